import Foundation
@testable import ObjectGraph
import Testing

/// The context's object registry against a dictionary: random registrations (permanent IDs of
/// one store in and out of sequence, boxed and temporary IDs), replacements, removals by slot
/// (as a deallocating object makes them) and by ID, reservations and the rebuilds they cause,
/// with every entry's object knowing its slot after each step. The registry reads each
/// entry's ID from its object, so every object here has the ID it is registered under.
@Suite struct ObjectRegistryTests {
    static let model: ManagedObjectModel = {
        // The test's own model: a failure to build it is a defect of the test.
        do {
            return try ManagedObjectModel(entities: [
                EntityDescription(name: "Item", properties: [.attribute("name", .string)]),
                EntityDescription(name: "Tag", properties: [.attribute("name", .string)]),
            ])
        } catch {
            preconditionFailure("model: \(error)")
        }
    }()

    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func registryMatchesADictionaryUnderRandomOperations(seed: UInt64) throws {
        var random = RandomizedConformance.SeededGenerator(state: seed)
        func below(_ bound: Int) -> Int { Int(random.next() % UInt64(bound)) }
        let item = try Self.model.entity(named: "Item"), tag = try Self.model.entity(named: "Tag")
        let token = StoreToken(identifier: "store-\(seed)", store: nil)
        // A pool of IDs: one store's references (shared homes), boxed permanent IDs without a
        // store, temporary IDs.
        var ids: [ManagedObjectID] = []
        for reference in 1...300 { ids.append(ManagedObjectID(entity: reference % 3 == 0 ? tag : item, store: token, kind: .permanent(.int64(Int64(reference))))) }
        for reference in 1...40 { ids.append(ManagedObjectID(entity: item, store: nil, kind: .permanent(.int64(Int64(reference))))) }
        for _ in 0..<40 { ids.append(ManagedObjectID.temporary(for: tag)) }
        let registry = ObjectRegistry()
        var model: [ManagedObjectID: (object: ManagedObject, inStore: Bool)] = [:]
        var steps = 0
        for _ in 0..<6_000 {
            steps += 1
            let id = ids[below(ids.count)]
            switch below(100) {
            case 0..<15:
                // A fetch's path: one probe, then the insert into the slot it chose; sometimes
                // another registration comes between (a stale probe must not be used).
                let probe = registry.probe(id)
                #expect(probe.found == registry.slot(of: id))
                guard probe.found == nil else { continue }
                if below(3) == 0 {
                    let other = ids[below(ids.count)]
                    if other != id {
                        let object = ManagedObject(entity: other.entity, insertInto: nil)
                        object.objectID = other
                        registry.update(Registration(object), for: other)
                        model[other] = (object, false)
                    }
                }
                let object = ManagedObject(entity: id.entity, insertInto: nil)
                object.objectID = id
                let inStore = below(2) == 0
                registry.insert(Registration(object, inStore: inStore), for: id, at: probe)
                #expect(registry.holds(object))
                model[id] = (object, inStore)
            case 15..<45:
                let object = ManagedObject(entity: id.entity, insertInto: nil)
                object.objectID = id
                let inStore = below(2) == 0
                let replaced = registry.update(Registration(object, inStore: inStore), for: id)
                #expect(replaced?.pointer == model[id].map { Unmanaged.passUnretained($0.object).toOpaque() })
                model[id] = (object, inStore)
            case 45..<70:
                // A deallocation: the object's own slot.
                guard let entry = model[id] else { continue }
                let slot = Int(entry.object.registrySlot)
                let removed = try #require(registry.registration(at: slot))
                #expect(removed.holds(entry.object) && entry.object.objectID == id)
                #expect(registry.remove(at: slot).inStore == entry.inStore)
                #expect(!registry.holds(entry.object))
                model[id] = nil
            case 70..<80:
                #expect(registry.removeValue(forKey: id)?.pointer == model[id].map { Unmanaged.passUnretained($0.object).toOpaque() })
                model[id] = nil
            case 80..<85:
                if let slot = registry.slot(of: id) {
                    registry.setInStore(at: slot)
                    model[id]?.inStore = true
                }
            case 85..<88:
                registry.reserveCapacity(registry.count + below(500))
            case 88:
                registry.removeAll(keepingCapacity: below(2) == 0)
                model = [:]
            default:
                #expect(registry[id]?.pointer == model[id].map { Unmanaged.passUnretained($0.object).toOpaque() })
            }
            #expect(registry.count == model.count)
        }
        // Every entry is found by its ID, knows its slot, and nothing else is there.
        for (id, entry) in model {
            let slot = try #require(registry.slot(of: id))
            #expect(Int(entry.object.registrySlot) == slot)
            #expect(registry[id]?.holds(entry.object) == true && registry[id]?.inStore == entry.inStore)
            #expect(registry.holds(entry.object))
            // An object of another registry whose slot number is this entry's is not held.
            let stranger = ManagedObject(entity: id.entity, insertInto: nil)
            stranger.registrySlot = entry.object.registrySlot
            #expect(!registry.holds(stranger))
        }
        #expect(Set(registry.entries.map(\.id)) == Set(model.keys))
        for id in ids where model[id] == nil { #expect(registry[id] == nil) }
        #expect(steps == 6_000)
    }

    /// Many objects in and out, as fetches that release their results make them: the table
    /// reuses its tombstones instead of growing without end.
    @Test func churnKeepsTheTableBounded() throws {
        let item = try Self.model.entity(named: "Item")
        let token = StoreToken(identifier: "churn", store: nil)
        let registry = ObjectRegistry()
        var reference: Int64 = 0
        for _ in 0..<200 {
            var objects: [(ManagedObject, ManagedObjectID)] = []
            for _ in 0..<100 {
                reference += 1
                let id = ManagedObjectID(entity: item, store: token, kind: .permanent(.int64(reference)))
                let object = ManagedObject(entity: item, insertInto: nil)
                object.objectID = id
                registry.update(Registration(object), for: id)
                objects.append((object, id))
            }
            for (object, id) in objects {
                let slot = Int(object.registrySlot)
                #expect(try #require(registry.registration(at: slot)).object.objectID == id)
                registry.remove(at: slot)
            }
        }
        #expect(registry.count == 0)
        #expect(registry.capacity <= 512, "20,000 registrations, never more than 100 at once")
    }
}
