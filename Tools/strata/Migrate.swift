import ArgumentParser
import Foundation
import ObjectGraph
import Strata

/// `strata migrate <store> --to MODEL.json [--set Entity.property=EXPRESSION]...`, and
/// `strata migrate <store> --export-model`.
struct Migrate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Migrate a store to another model offline, or print the model it holds.",
        discussion: """
            The store (a StrataStore directory or a binary store file) must not be open \
            elsewhere. --export-model prints the model the store was last saved with, as JSON \
            (the format --to reads): edit it into the next version. --to migrates the store to \
            the model in a JSON file. Without --set, the mapping is inferred (lightweight \
            migration): a StrataStore migrates in place (SPEC.md [MIG-1]: two records written, \
            no row; added indexes built before the command returns), other changes by copy. \
            Each --set gives a destination property its value as an expression of the \
            fetch language on the source object (a key path, a function, @count...), and \
            the store is copied by that mapping into a new one swapped in crash-safely \
            ([MIG-3]). A change inference refuses and no --set covers is reported with every \
            entity and property named; nothing is written.

            Examples:
              strata migrate /var/lib/app/store --export-model > v1.json
              strata migrate /var/lib/app/store --to v2.json
              strata migrate /var/lib/app/store --to v3.json --set Author.bookCount=books.@count
            """)

    @Argument(help: "The store directory, or a binary store file.")
    var store: String

    @Option(help: "The model to migrate to, as a JSON file (the format --export-model prints).")
    var to: String?

    @Option(name: .customLong("set"), help: "Entity.property=EXPRESSION: the value of a destination property (repeatable).")
    var values: [String] = []

    @Flag(name: .customLong("export-model"), help: "Print the model the store holds, as JSON, and change nothing.")
    var exportModel = false

    @OptionGroup var output: OutputOptions

    func validate() throws {
        if exportModel == (to != nil) { throw ValidationError("give either --to MODEL.json or --export-model") }
        if exportModel && !values.isEmpty { throw ValidationError("--set goes with --to") }
        for value in values where !value.contains("=") { throw ValidationError("--set \(value): expected Entity.property=EXPRESSION") }
    }

    func run() throws {
        if exportModel {
            let model = try explained(path: store) { try OfflineMigration.storedModel(at: store) }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            Output.line(String(decoding: try encoder.encode(ModelFile(model: model)), as: UTF8.self))
            return
        }
        guard let to else { return }
        let model: ManagedObjectModel
        do {
            model = try JSONDecoder().decode(ModelFile.self, from: Data(contentsOf: URL(fileURLWithPath: to))).model()
        } catch {
            throw ToolFailure(message: "The model file \(to) does not describe a model: \(error)")
        }
        var mapped: [String: PropertyMapping.Value] = [:]
        for value in values {
            let parts = value.split(separator: "=", maxSplits: 1).map(String.init)
            do {
                mapped[parts[0]] = .expression(try FetchExpression(format: parts[1]))
            } catch {
                throw ToolFailure(message: "--set \(value): the expression does not parse: \(error)")
            }
        }
        let progress = Progress("migrate", quiet: output.quiet || output.json)
        progress.begin(mapped.isEmpty ? "migrating" : "copying into the new model")
        let chosen = mapped
        let report = try explained(path: store) {
            try OfflineMigration.run(at: store, to: model, values: chosen) { share in
                progress.update(UInt64(share * 1000), of: 1000)
            }
        }
        progress.finish()
        if output.json { return try Output.json(WithVerdict(verdict: "migrated", result: report)) }
        Output.line("migrate \(report.path)")
        Output.line("  how:      \(report.kind)")
        for change in report.changes { Output.line("  entity:   \(change)") }
        Output.line(String(format: "  time:     %.3f s", report.seconds))
    }
}
