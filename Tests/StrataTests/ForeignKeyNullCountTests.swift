import Foundation
import ObjectGraph
import Strata
import Testing

/// [FETCH-S16] A count of `toOne == nil`, `toOne != nil`, `toOne == object` or `toOne != object` is answered from
/// the one-to-many's keys: random inserts, reassignments, deletes of members and of owners (nullify, and no
/// action, which leaves members naming a deleted owner) applied alike to an InMemoryStore,
/// the oracle, and a StrataStore; the counts compared after every save, over entity
/// hierarchies on both sides (members of a subentity only, and of an entity without its
/// subentities, whose keys are walked), then once more after the store is reopened.
@Suite struct ForeignKeyNullCountTests {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Box", properties: [
                .attribute("name", .string),
                .toMany("items", "Item", inverse: "box"),
                .toMany("loose", "Item", inverse: "looseIn", deleteRule: .noAction),
            ]),
            EntityDescription(name: "Crate", superentity: "Box", properties: [.attribute("size", .integer32)]),
            EntityDescription(name: "Item", properties: [
                .attribute("name", .string),
                .toOne("box", "Box", inverse: "items"),
                .toOne("looseIn", "Box", inverse: "loose"),
            ]),
            EntityDescription(name: "Part", superentity: "Item", properties: [.attribute("weight", .double)]),
        ])
    }

    enum Operation {
        case insertBox(name: String, crate: Bool)
        case insertItem(name: String, part: Bool, box: String?, loose: String?)
        case setBox(item: String, box: String?)
        case setLoose(item: String, box: String?)
        case deleteItem(String)
        case deleteBox(String)
        case save
    }

    /// A sequence of operations that never touches a member naming a deleted owner through
    /// the no-action relationship (the context would fault the deleted owner to update it). An
    /// owner is deleted in a save of its own, and only while no member names it both ways: a
    /// save that changes a member naming an owner it deletes through a no-action relationship
    /// is refused (a dangling reference), so members only come to dangle unchanged.
    static func operations(seed: UInt64, count: Int) -> (operations: [Operation], dangling: Int) {
        var random = DiffRandom(seed: seed)
        var boxes: [String] = []
        var items: [String] = []
        var dangling: Set<String> = []
        var looseIn: [String: String] = [:]
        var boxOf: [String: String] = [:]
        var operations: [Operation] = []
        var serial = 0
        func someBox() -> String? { boxes.isEmpty || random.chance(30) ? nil : random.pick(boxes) }
        for _ in 0..<count {
            serial += 1
            let roll = random.int(0...99)
            if boxes.count < 3 || roll < 8 {
                let name = "box \(serial)"
                boxes.append(name)
                operations.append(.insertBox(name: name, crate: random.chance(40)))
            } else if items.count < 5 || roll < 50 {
                let name = "item \(serial)"
                let loose = someBox()
                items.append(name)
                let box = someBox()
                looseIn[name] = loose
                boxOf[name] = box
                operations.append(.insertItem(name: name, part: random.chance(35), box: box, loose: loose))
            } else if roll < 65 {
                let item = random.pick(items)
                let box = someBox()
                boxOf[item] = box
                operations.append(.setBox(item: item, box: box))
            } else if roll < 75 {
                let item = random.pick(items)
                guard !dangling.contains(item) else { continue }
                let box = someBox()
                looseIn[item] = box
                operations.append(.setLoose(item: item, box: box))
            } else if roll < 85 {
                let item = random.pick(items)
                guard !dangling.contains(item) else { continue }
                items.removeAll { $0 == item }
                looseIn[item] = nil
                boxOf[item] = nil
                operations.append(.deleteItem(item))
            } else if roll < 90 {
                let box = random.pick(boxes)
                guard !looseIn.contains(where: { $0.value == box && boxOf[$0.key] == box }) else { continue }
                boxes.removeAll { $0 == box }
                for (item, owner) in looseIn where owner == box { dangling.insert(item) }
                for (item, owner) in boxOf where owner == box { boxOf[item] = nil }
                operations += [.save, .deleteBox(box), .save]
            } else {
                operations.append(.save)
            }
        }
        operations.append(.save)
        return (operations, dangling.count)
    }

    /// Applies `operations` through one context, checking `check` after every save.
    static func apply(_ operations: [Operation], to coordinator: PersistentStoreCoordinator, check: (Int) throws -> Void) throws {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var objects: [String: ManagedObject] = [:]
        func object(_ name: String?) -> ManagedObject? { name.flatMap { objects[$0] } }
        var saves = 0
        for operation in operations {
            switch operation {
            case .insertBox(let name, let crate):
                let box = try context.insertNewObject(forEntityName: crate ? "Crate" : "Box")
                try box.setValue(.string(name), forKey: "name")
                objects[name] = box
            case .insertItem(let name, let part, let box, let loose):
                let item = try context.insertNewObject(forEntityName: part ? "Part" : "Item")
                try item.setValue(.string(name), forKey: "name")
                if let box = object(box) { try item.setValue(box, forKey: "box") }
                if let loose = object(loose) { try item.setValue(loose, forKey: "looseIn") }
                objects[name] = item
            case .setBox(let item, let box):
                try objects[item]?.setValue(object(box), forKey: "box")
            case .setLoose(let item, let box):
                try objects[item]?.setValue(object(box), forKey: "looseIn")
            case .deleteItem(let name), .deleteBox(let name):
                if let doomed = objects.removeValue(forKey: name) { context.delete(doomed) }
            case .save:
                try context.save()
                try check(saves)
                saves += 1
            }
        }
    }

    /// The counts compared: each to-one against nil, both ways, and `!=` and `==` each of the first
    /// boxes by name (boxes and crates), over the whole member hierarchy, a subentity, and the
    /// root without its subentities.
    static func counts(in coordinator: PersistentStoreCoordinator) throws -> [String: Int] {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var byName = FetchRequest(entityName: "Box")
        byName.sortDescriptors = [FetchSortDescriptor(keyPath: "name")]
        byName.fetchLimit = 6
        let boxes = try context.fetch(byName).map { (try $0.value(forKey: "name").stringValue ?? "?", $0.objectID) }
        var counts: [String: Int] = [:]
        for entity in ["Item", "Part"] {
            for subentities in [true, false] where entity == "Item" || subentities {
                func count(_ format: String, _ arguments: [any FetchArgument], as name: String) throws {
                    var request = FetchRequest(entityName: entity)
                    request.includesSubentities = subentities
                    request.predicate = try FetchPredicate(format: format, argumentArray: arguments)
                    counts["\(entity)\(subentities ? "" : " only") \(name)"] = try context.count(for: request)
                }
                for format in ["box == nil", "box != nil", "looseIn == nil", "looseIn != nil"] { try count(format, [], as: format) }
                for (name, id) in boxes {
                    for format in ["box != %@", "looseIn != %@", "box == %@", "looseIn == %@"] { try count(format, [id], as: "\(format) \(name)") }
                }
            }
        }
        return counts
    }

    @Test(arguments: [1, 2, 3] as [UInt64])
    func countsOfToOnesAgainstNilMatchTheInMemoryStore(seed: UInt64) throws {
        let model = try Self.model()
        let store = TemporaryStore()
        let (reference, strata) = try store.referenceAndStrata(model: model) { _ in }
        let (operations, dangling) = Self.operations(seed: seed, count: 400)
        var expected: [[String: Int]] = []
        try Self.apply(operations, to: reference) { _ in expected.append(try Self.counts(in: reference)) }
        var checked = 0
        try Self.apply(operations, to: strata) { save in
            let counts = try Self.counts(in: strata)
            #expect(counts == expected[save], "seed \(seed), after save \(save)")
            checked += 1
        }
        #expect(checked == expected.count && checked > 10)
        // Members naming a deleted owner exist (the case the keys cannot answer), and nil and
        // non-nil ones.
        #expect(dangling > 0)
        let final = try #require(expected.last)
        #expect(final["Item box == nil"]! > 0 && final["Item box != nil"]! > 0 && final["Part looseIn != nil"]! > 0)
        // Some box holds items.
        #expect(final.contains { $0.key.hasPrefix("Item box == %@") && $0.value > 0 })
        for coordinator in [strata] { for store in coordinator.persistentStores { try coordinator.remove(store) } }
        #expect(try Self.counts(in: try store.coordinator(model: model)) == final, "seed \(seed), reopened")
    }
}
