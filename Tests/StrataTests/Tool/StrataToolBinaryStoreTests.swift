import Foundation
import ObjectGraph
import Strata
import Testing

/// `strata fsck`, `inspect`, `dump` and `stats` on a binary store file ([BIN-1]), as
/// processes: they read it with its stored model, and fsck finds damage.
@Suite(.timeLimit(.minutes(5))) struct StrataToolBinaryStoreTests {
    /// A binary store of two teams and three members (one a captain).
    static func binaryStore(at path: String) throws {
        BinaryStore.register()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try StoreTestModel.make())
        try coordinator.addPersistentStore(type: .binary, at: URL(filePath: path))
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        for (team, members) in [("Red", ["Ann", "Ben"]), ("Blue", ["Cat"])] {
            let owner = try context.insertNewObject(forEntityName: "Team")
            try owner.setValue(.string(team), forKey: "name")
            for name in members {
                let member = try context.insertNewObject(forEntityName: name == "Cat" ? "Captain" : "Member")
                try member.setValue(.string(name), forKey: "name")
                try member.setValue(owner, forKey: "team")
            }
        }
        try context.save()
    }

    @Test func everyReadingCommandWorksOnABinaryStoreAndFsckFindsDamage() throws {
        let scratch = try ToolScratch()
        let file = scratch.path + "/teams.strata-binary"
        try Self.binaryStore(at: file)

        let fsck = try scratch.run("fsck", file)
        #expect(fsck.status == 0, "\(fsck)")
        #expect(fsck.stdout.contains("5 objects") && fsck.stdout.contains("clean"), "\(fsck)")

        let inspect = try scratch.run("inspect", file)
        #expect(inspect.status == 0, "\(inspect)")
        #expect(inspect.stdout.contains("generation 1") && inspect.stdout.contains("Member  2 objects") && inspect.stdout.contains("Captain : Member  1 objects"), "\(inspect)")

        let dump = try scratch.run("dump", file)
        #expect(dump.status == 0, "\(dump)")
        #expect(dump.lines.count == 5, "\(dump)")
        #expect(dump.lines.contains { $0.hasPrefix("Captain/p") && $0.contains("name=\"Cat\"") && $0.contains("team=[Team/p") }, "\(dump)")
        let json = try scratch.run("dump", "--json", file)
        #expect(json.lines.count == 5 && json.lines.allSatisfy { $0.hasPrefix("{") }, "\(json)")

        let stats = try scratch.run("stats", file)
        #expect(stats.status == 0 && stats.stdout.contains("objects:             5"), "\(stats)")

        // One byte flipped in the objects section: fsck reports it with its offset, exit 1.
        var bytes = [UInt8](try Data(contentsOf: URL(filePath: file)))
        bytes[bytes.count - 3] ^= 0x20
        try Data(bytes).write(to: URL(filePath: file))
        let damaged = try scratch.run("fsck", file)
        #expect(damaged.status == 1, "\(damaged)")
        #expect(damaged.stdout.contains("fails its checksum") && damaged.stdout.contains("bytes "), "\(damaged)")
        let repair = try scratch.run("fsck", "--repair", file)
        #expect(repair.status == 2 && repair.stderr.contains("nothing to repair in place"), "\(repair)")
        let dumpDamaged = try scratch.run("dump", file)
        #expect(dumpDamaged.status == 2 && dumpDamaged.stderr.contains("checksum"), "\(dumpDamaged)")
    }
}
