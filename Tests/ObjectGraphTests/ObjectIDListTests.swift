import Foundation
@testable import ObjectGraph
import Testing

/// A to-many relationship's pending members (``ObjectIDList``) against a plain array: random
/// appends, removals and ID replacements, on short lists and on lists long enough for a
/// position table (built as they change, dropped as they shrink, left unbuilt by a
/// replacement until the next change), ordered and unordered.
@Suite struct ObjectIDListTests {
    static let entity: EntityDescription = {
        do {
            return try ManagedObjectModel(entities: [EntityDescription(name: "Item", properties: [.attribute("name", .string)])])
                .entity(named: "Item")
        } catch {
            preconditionFailure("model: \(error)")
        }
    }()

    @Test(arguments: [(1, false), (2, true), (3, false), (4, true)] as [(UInt64, Bool)])
    func listMatchesAnArrayUnderRandomChanges(seed: UInt64, ordered: Bool) {
        var random = RandomizedConformance.SeededGenerator(state: seed)
        func below(_ bound: Int) -> Int { Int(random.next() % UInt64(bound)) }
        let token = StoreToken(identifier: "store-\(seed)", store: nil)
        let pool = (0..<60).map { ManagedObjectID(entity: Self.entity, store: token, kind: .permanent(.int64(Int64($0 + 1)))) }
        var list = ObjectIDList([], ordered: ordered)
        var model: [ManagedObjectID] = []
        for step in 0..<4_000 {
            let id = pool[below(pool.count)]
            switch below(10) {
            case 0..<5:
                let added = list.append(id)
                #expect(added == !model.contains(id), "step \(step)")
                if added { model.append(id) }
            case 5..<9:
                let removed = list.remove(id)
                #expect(removed == model.contains(id), "step \(step)")
                if let index = model.firstIndex(of: id) {
                    if ordered {
                        model.remove(at: index)
                    } else {
                        let last = model.removeLast()
                        if index < model.count { model[index] = last }
                    }
                }
            default:
                // Half the pool's IDs traded for fresh ones, as a save trades temporary IDs.
                var map: [ManagedObjectID: ManagedObjectID] = [:]
                for (index, old) in pool.enumerated() where index % 2 == step % 2 {
                    map[old] = ManagedObjectID(entity: Self.entity, store: token, kind: .permanent(.int64(Int64(1_000 + step * 100 + index))))
                }
                list = list.replacing(map)
                model = model.map { map[$0] ?? $0 }
                // The fresh IDs go again at once, so the pool stays the one the steps draw from.
                let back = Dictionary(uniqueKeysWithValues: map.map { ($1, $0) })
                list = list.replacing(back)
                model = model.map { back[$0] ?? $0 }
            }
            #expect(list.ids == model, "step \(step)")
            for probe in pool.prefix(8) { #expect(list.contains(probe) == model.contains(probe)) }
        }
    }
}
