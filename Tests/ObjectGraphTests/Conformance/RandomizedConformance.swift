import Foundation
import ObjectGraph
import Testing

/// Random inserts, updates, deletes, saves, rollbacks and resets, applied to a context
/// and to a plain dictionary; after every step the fetches of the context (which must
/// honour pending changes) and of a fresh context (which sees only saved state) must
/// agree with the dictionary. Seeded, so every run is the same.
@Suite("Conformance: randomized against an oracle")
struct RandomizedConformance {
    /// SplitMix64: small, seedable, good enough to pick operations.
    struct SeededGenerator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9e37_79b9_7f4a_7c15
            var z = state
            z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
            z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
            return z ^ (z >> 31)
        }
    }

    @Test(arguments: allStoreFixtures)
    func contextAgreesWithOracleAfterRandomOperations(fixture: any StoreFixture) throws {
        for seed in [1, 2, 3] as [UInt64] {
            try run(fixture: fixture, seed: seed, steps: 150)
        }
    }

    private func run(fixture: any StoreFixture, seed: UInt64, steps: Int) throws {
        var random = SeededGenerator(state: seed)
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        var committed: [String: Int16] = [:]
        var current: [String: Int16] = [:]  // what the context should show
        var live: [String: ManagedObject] = [:]  // objects the test holds
        var counter = 0

        func object(named name: String) throws -> ManagedObject {
            if let object = live[name] { return object }
            let found = try #require(try context.fetch(.make("Person", .equal("name", .string(name)))).first)
            live[name] = found
            return found
        }

        for step in 0..<steps {
            let names = current.keys.sorted()
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<30:
                counter += 1
                let name = "p\(counter)"
                let age = Int16.random(in: 0...100, using: &random)
                live[name] = try context.makePerson(name, age: age)
                current[name] = age
            case 30..<50 where !names.isEmpty:
                let name = names[Int.random(in: 0..<names.count, using: &random)]
                let age = Int16.random(in: 0...100, using: &random)
                try object(named: name).setValue(.int16(age), forKey: "age")
                current[name] = age
            case 50..<62 where !names.isEmpty:
                let name = names[Int.random(in: 0..<names.count, using: &random)]
                context.delete(try object(named: name))
                current[name] = nil
                live[name] = nil
            case 62..<82:
                try context.save()
                committed = current
            case 82..<90:
                context.rollback()
                current = committed
                live = live.filter { committed[$0.key] != nil && $0.value.managedObjectContext === context }
            case 90..<94:
                context.reset()
                current = committed
                live = [:]
            default:
                if let name = names.first { context.refresh(try object(named: name), mergeChanges: true) }
            }

            let threshold = Int16.random(in: 0...100, using: &random)
            let request = FetchRequest.make("Person", .greaterThan("age", .int16(threshold)), sortedBy: ["name"])
            let expected = current.filter { $0.value > threshold }.keys.sorted()
            let label = "seed \(seed), step \(step)"
            #expect(try context.names(request) == expected, "\(label)")
            #expect(try context.count(for: request) == expected.count, "\(label)")
            let stored = try stack.read { try $0.names(request) }
            #expect(stored == committed.filter { $0.value > threshold }.keys.sorted(), "\(label): store")
        }
        try context.save()
        let ages = try stack.read { reader in
            try reader.fetch(FetchRequest(entityName: "Person")).map {
                (try $0.value(forKey: "name").stringValue ?? "", try $0.value(forKey: "age", as: Int16.self))
            }
        }
        #expect(Dictionary(uniqueKeysWithValues: ages) == current)
    }
}
