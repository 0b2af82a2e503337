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
        // Temporary IDs: the ones a save replaces (``IDReplacements`` looks up no other).
        let pool = (0..<60).map { _ in ManagedObjectID.temporary(for: Self.entity) }
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
                    map[old] = ManagedObjectID.temporary(for: Self.entity)
                }
                list.replace(IDReplacements(map))
                model = model.map { map[$0] ?? $0 }
                // The fresh IDs go again at once, so the pool stays the one the steps draw from.
                let back = Dictionary(uniqueKeysWithValues: map.map { ($1, $0) })
                list.replace(IDReplacements(back))
                model = model.map { back[$0] ?? $0 }
            }
            #expect(list.ids == model, "step \(step)")
            for probe in pool.prefix(8) { #expect(list.contains(probe) == model.contains(probe)) }
        }
    }

    // The journal of a list made from committed members, against the plain difference of
    // sets: after every append, removal or ID replacement it holds exactly the members added
    // and those removed since the base, until the difference grows past its limit, when it is
    // dropped for good (a store then compares the sets).
    @Test(arguments: [UInt64(5), 6, 7])
    func journalIsTheDifferenceFromTheBaseUntilItIsTooLong(seed: UInt64) {
        var random = RandomizedConformance.SeededGenerator(state: seed)
        func below(_ bound: Int) -> Int { Int(random.next() % UInt64(bound)) }
        var pool = (0..<200).map { _ in ManagedObjectID.temporary(for: Self.entity) }
        var base = Array(pool.prefix(100))
        var list = ObjectIDList(base: base, ordered: false, baseVersion: 7)
        var dropped = false
        var sawJournal = false
        for step in 0..<3_000 {
            let id = pool[below(pool.count)]
            switch below(20) {
            case 0..<10: list.append(id)
            case 10..<19: list.remove(id)
            default:
                // Every ID traded for a fresh one, as a save trades temporary IDs.
                let map = Dictionary(uniqueKeysWithValues: pool.map { ($0, ManagedObjectID.temporary(for: Self.entity)) })
                list.replace(IDReplacements(map))
                pool = pool.map { map[$0] ?? $0 }
                base = base.map { map[$0] ?? $0 }
            }
            let now = Set(list.ids), then = Set(base)
            #expect(now.count == list.ids.count, "step \(step): no member twice")
            let added = now.subtracting(then), removed = then.subtracting(now)
            if added.count + removed.count > MemberJournal.limit { dropped = true }
            if dropped {
                #expect(list.journal == nil, "step \(step): dropped past the limit, and for good")
            } else {
                let journal = list.journal
                #expect(journal?.baseVersion == 7)
                #expect(journal.map { Set($0.added) } == added, "step \(step)")
                #expect(journal.map { Set($0.removed) } == removed, "step \(step)")
                #expect(journal.map { $0.added.count + $0.removed.count } == added.count + removed.count, "step \(step): each change once")
                sawJournal = sawJournal || !(journal?.added.isEmpty ?? true)
            }
        }
        #expect(sawJournal && dropped, "the run kept a journal, then outgrew it")
    }

    // A list made from a whole value has no base to journal against; appending to it keeps none.
    @Test func aListOfAWholeValueKeepsNoJournal() {
        let token = StoreToken(identifier: "store", store: nil)
        let ids = (0..<4).map { ManagedObjectID(entity: Self.entity, store: token, kind: .permanent(.int64(Int64($0 + 1)))) }
        var list = ObjectIDList(Array(ids.prefix(2)), ordered: false)
        list.append(ids[3])
        #expect(list.journal == nil)
        var based = ObjectIDList(base: Array(ids.prefix(2)), ordered: false, baseVersion: 3)
        based.append(ids[2])
        based.remove(ids[0])
        based.remove(ids[2])
        #expect(based.journal?.added == [] && based.journal?.removed == [ids[0]])
        #expect(based.ids.count == 1 && based.contains(ids[1]) && !based.contains(ids[0]))
    }
}
