import ArgumentParser
import Foundation
import Strata

/// `strata inspect <store>`.
struct Inspect: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a store's manifest, files, model and row counts, or one record decoded.",
        discussion: """
            Without --key or --object: the manifest (next file number, last sequence), every \
            WAL (size, records, entries, sequence range) and segment (size, live and dead \
            bytes, blocks, compression ratio), and for a StrataStore its stored model with the \
            rows of each entity and the coordinator's metadata.

            Examples:
              strata inspect /var/lib/app/store
              strata inspect /var/lib/app/store --object x-coredata://<store-uuid>/Book/p12
              strata inspect /var/lib/app/store --key 006d65746164617461
              strata inspect --json /var/lib/app/store
            """)

    @Argument(help: "The store directory, or a binary store file.")
    var store: String

    @Option(help: "Print the record with this key (hex, optionally 0x-prefixed, or text).")
    var key: String?

    @Option(help: "Print the row of the object with this URI (x-coredata://<store>/<Entity>/p<n>).")
    var object: String?

    @OptionGroup var output: OutputOptions

    func validate() throws {
        if key != nil && object != nil { throw ValidationError("give --key or --object, not both") }
    }

    func run() throws {
        if BinaryStoreInspector.isBinaryStore(at: store) {
            guard key == nil, object == nil else { throw ToolFailure(message: "\(store) is a binary store file: it has no keys; use `strata dump` for its objects.") }
            let report = try explained(path: store) { try BinaryStoreInspector.inspect(at: store) }
            if output.json { return try Output.json(WithVerdict(verdict: "ok", result: report)) }
            Output.line("binary store \(report.path)  format \(report.format), generation \(report.generation), \(Output.bytes(UInt64(report.fileBytes)))")
            for section in report.sections {
                Output.line("  \(section.kind) at byte \(section.offset): \(Output.bytes(UInt64(section.storedBytes))) stored, \(Output.bytes(UInt64(section.rawBytes))) raw")
            }
            Output.line("  store \(report.storeIdentifier ?? "(no NSStoreUUID)"), \(report.objects) objects, next reference \(report.nextReference)")
            Output.line("  model and objects:")
            for entity in report.entities {
                Output.line("    \(entity.name)\(entity.superentity.map { " : \($0)" } ?? "")  \(entity.objects) objects")
                for property in entity.properties { Output.line("      \(property)") }
            }
            if !report.metadata.isEmpty {
                Output.line("  metadata:")
                for (key, value) in report.metadata.sorted(by: { $0.key < $1.key }) { Output.line("    \(key) = \(value)") }
            }
            return
        }
        if key != nil || object != nil {
            let record = try explained(path: store) { try StoreInspector.record(at: store, key: key.map(parseKey), objectURI: object) }
            if output.json { return try Output.json(WithVerdict(verdict: "ok", result: record)) }
            Output.line(record.line)
            return
        }
        let progress = Progress("inspect", quiet: output.quiet || output.json)
        progress.begin("opening the store (replaying its log)")
        let report = try explained(path: store) { try StoreInspector.inspect(at: store, logger: output.logger) }
        progress.finish()
        if output.json { return try Output.json(WithVerdict(verdict: "ok", result: report)) }
        Output.line("store \(report.path)")
        Output.line("  manifest: next file number \(report.nextFileNumber), last sequence \(report.lastSequence), \(report.keyCount) keys")
        Output.line("  files:")
        for file in report.files {
            let sequences = file.firstSequence.map { "sequences \($0)…\(file.lastSequence ?? $0)" } ?? "empty"
            if file.kind == "wal" {
                Output.line("    \(file.name)  WAL      \(Output.bytes(file.sizeBytes)), \(file.records) records, \(file.entries) entries, live \(Output.bytes(file.liveBytes)), dead \(Output.bytes(file.deadBytes)), \(sequences)")
            } else {
                Output.line("    \(file.name)  segment  \(Output.bytes(file.sizeBytes)), \(file.entries) entries, \(file.dataBlocks) blocks, live \(Output.bytes(file.liveBytes)), dead \(Output.bytes(file.deadBytes)), compression \(String(format: "%.2f", file.compressionRatio))×, \(sequences)")
            }
        }
        guard report.isObjectStore else {
            Output.line("  not a StrataStore (an engine store without StrataStore's records, rows or keys)")
            return
        }
        Output.line("  StrataStore \(report.storeIdentifier ?? "(no NSStoreUUID)"), next reference \(report.nextReference.map(String.init) ?? "?")")
        if report.nextReference == nil {
            Output.line("  the metadata record is missing (row counts, next reference, store UUID): run `strata fsck \(report.path)`")
        }
        if report.entities.isEmpty {
            Output.line("  no stored model (saved before Strata stored its model); rows per entity:")
            for (entity, rows) in report.rowCounts.sorted(by: { $0.key < $1.key }) { Output.line("    \(entity): \(rows) rows") }
        } else {
            Output.line("  model and rows:")
            for entity in report.entities {
                Output.line("    \(entity.name)\(entity.superentity.map { " : \($0)" } ?? "")  \(entity.rows) rows")
                for attribute in entity.attributes { Output.line("      \(attribute)") }
                for relationship in entity.relationships { Output.line("      \(relationship)") }
            }
        }
        if !report.layouts.isEmpty {
            Output.line("  row layouts (\(report.modelVersions) model version\(report.modelVersions == 1 ? "" : "s") in the model record):")
            for layout in report.layouts {
                let note: String
                switch (layout.current, layout.modelVersion) {
                case (true, _): note = ""
                case (false, let version?): note = "  (model version \(version) back, read upgraded)"
                case (false, nil): note = "  (no model version in the record has this layout)"
                }
                Output.line("    \(layout.entity)  layout \(layout.layout)  \(layout.rows) rows\(note)")
            }
        }
        if !report.pending.isEmpty {
            Output.line("  written by the next read-write load's background build ([MIG-5]; read from old rows meanwhile):")
            for item in report.pending { Output.line("    \(item)") }
        }
        if !report.metadata.isEmpty {
            Output.line("  metadata:")
            for (key, value) in report.metadata.sorted(by: { $0.key < $1.key }) { Output.line("    \(key) = \(value.text)") }
        }
    }
}

/// `strata dump <store>`.
struct Dump: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Stream every record of a store in key order, decoded: text lines or JSON lines.",
        discussion: """
            Each record is printed with its kind (metadata, model, row, index or raw), its key \
            in hex and, for rows, the object URI, version, attributes and relationship \
            destinations. JSON lines (--json) carry the same fields, one object per line, for \
            scripts. Two dumps of the same content are identical, whatever the files look like.

            Examples:
              strata dump /var/lib/app/store | head
              strata dump --json /var/lib/app/store | jq -c 'select(.entity == "Book")'
              strata dump --rows-only /var/lib/app/store > before.txt
            """)

    @Argument(help: "The store directory, or a binary store file.")
    var store: String

    @Flag(name: .customLong("rows-only"), help: "Only rows (skip metadata, model and index entries).")
    var rowsOnly = false

    @OptionGroup var output: OutputOptions

    func run() throws {
        if BinaryStoreInspector.isBinaryStore(at: store) {
            var buffer = ""
            try explained(path: store) {
                try BinaryStoreInspector.dump(at: store) { object in
                    buffer += (output.json ? try Output.jsonLine(object) : object.line) + "\n"
                    if buffer.utf8.count > 1 << 16 {
                        FileHandle.standardOutput.write(Data(buffer.utf8))
                        buffer = ""
                    }
                    return true
                }
            }
            FileHandle.standardOutput.write(Data(buffer.utf8))
            return
        }
        let progress = Progress("dump", quiet: output.quiet || isatty(STDOUT_FILENO) == 1)
        progress.begin("opening the store (replaying its log)")
        var buffer = ""
        try explained(path: store) {
            try StoreInspector.dump(at: store, logger: output.logger, progress: { done, total in
                progress.begin("writing records")
                progress.update(UInt64(done), of: UInt64(total))
            }) { record in
                if rowsOnly && record.kind != "row" { return true }
                buffer += (output.json ? try Output.jsonLine(record) : record.line) + "\n"
                if buffer.utf8.count > 1 << 16 {
                    FileHandle.standardOutput.write(Data(buffer.utf8))
                    buffer = ""
                }
                return true
            }
        }
        FileHandle.standardOutput.write(Data(buffer.utf8))
        progress.finish()
    }
}
