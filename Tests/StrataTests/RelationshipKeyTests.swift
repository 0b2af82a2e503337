import Foundation
import ObjectGraph
@testable import Strata
import StrataEngine
import Testing

/// Relationship keys ([REL-1]…[REL-4]): unordered to-many relationships stored as keys, not
/// lists in rows, checked against a simple model of who belongs to whom.
@Suite struct RelationshipKeyTests {
    /// A one-to-many (Owner.items ↔ Item.owner), a many-to-many (Item.tags ↔ Tag.items), a
    /// to-many without inverse (Item.links) and an ordered to-many (Owner.ranked, in the row).
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Owner", properties: [
                .attribute("name", .string),
                .toMany("items", "Item", inverse: "owner"),
                .toMany("ranked", "Item", ordered: true),
            ]),
            EntityDescription(name: "Item", properties: [
                .attribute("name", .string),
                .toOne("owner", "Owner", inverse: "items"),
                .toMany("tags", "Tag", inverse: "items"),
                .toMany("links", "Item"),
            ]),
            EntityDescription(name: "Tag", properties: [
                .attribute("name", .string),
                .toMany("items", "Item", inverse: "tags"),
            ]),
        ])
    }

    /// Who belongs to whom, by name.
    struct Oracle {
        var owners: Set<String> = []
        var tags: Set<String> = []
        var items: Set<String> = []
        var ownerOf: [String: String] = [:]
        var tagsOf: [String: Set<String>] = [:]
        var linksOf: [String: Set<String>] = [:]
        var ranked: [String: [String]] = [:]

        /// The keys the store must hold: one per owned item, two per (item, tag) pair, one per link.
        var keyCount: Int {
            ownerOf.count + 2 * tagsOf.values.reduce(0) { $0 + $1.count } + linksOf.values.reduce(0) { $0 + $1.count }
        }
    }

    static func object(_ entity: String, _ name: String, in context: ManagedObjectContext) throws -> ManagedObject {
        var request = FetchRequest(entityName: entity)
        request.predicate = .equal("name", .string(name))
        return try #require(try context.fetch(request).first, "\(entity) \(name)")
    }

    static func names(_ objects: [ManagedObject]) throws -> [String] {
        try objects.map { try $0.value(forKey: "name").stringValue ?? "?" }
    }

    /// Every relationship, from both sides, read back through a new context: faults ([REL-3])
    /// and fetch predicates through the keys.
    static func verify(_ oracle: Oracle, _ coordinator: PersistentStoreCoordinator) throws {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        for name in oracle.items.sorted() {
            let item = try object("Item", name, in: context)
            let owner = try item.object(forKey: "owner")
            let ownerName = try owner.map { try $0.value(forKey: "name").stringValue ?? "?" }
            #expect(ownerName == oracle.ownerOf[name], "owner of \(name)")
            #expect(Set(try names(item.objects(forKey: "tags"))) == oracle.tagsOf[name, default: []], "tags of \(name)")
            #expect(Set(try names(item.objects(forKey: "links"))) == oracle.linksOf[name, default: []], "links of \(name)")
        }
        for name in oracle.owners.sorted() {
            let owner = try object("Owner", name, in: context)
            let expected = Set(oracle.ownerOf.filter { $0.value == name }.map(\.key))
            #expect(Set(try names(owner.objects(forKey: "items"))) == expected, "items of \(name)")
            #expect(try names(owner.objects(forKey: "ranked")) == oracle.ranked[name, default: []], "ranked of \(name), in order")
            // The same through a predicate on the keys: ANY, @count.
            var request = FetchRequest(entityName: "Item")
            request.predicate = try FetchPredicate(format: "owner.name == %@", name)
            #expect(Set(try names(context.fetch(request))) == expected)
            request = FetchRequest(entityName: "Owner")
            request.predicate = try FetchPredicate(format: "name == %@ AND items.@count == %d", name, expected.count)
            #expect(try context.count(for: request) == 1, "items.@count of \(name)")
        }
        for name in oracle.tags.sorted() {
            let tag = try object("Tag", name, in: context)
            let expected = Set(oracle.tagsOf.filter { $0.value.contains(name) }.map(\.key))
            #expect(Set(try names(tag.objects(forKey: "items"))) == expected, "items of tag \(name)")
            var request = FetchRequest(entityName: "Item")
            request.predicate = try FetchPredicate(format: "ANY tags.name == %@", name)
            #expect(Set(try names(context.fetch(request))) == expected, "ANY tags.name == \(name)")
        }
        let engine = try #require((coordinator.persistentStores.first as? StrataStore)?.storageEngine)
        var keys = 0
        try engine.snapshot().forEachKeyBytes(from: [RelationshipKeys.tag], to: [RelationshipKeys.tag + 1]) { _ in
            keys += 1
            return true
        }
        #expect(keys == oracle.keyCount, "relationship keys")
        let report = try ObjectChecker.check(engine: engine, repair: false)
        #expect(report.problems.isEmpty, "\(report.problems)")
    }

    // Oracle: random membership changes from either side, inserts and deletes, saved in small
    // batches, with the store closed and reopened now and then; after every save each
    // relationship reads back as the model says from both sides, the key count is exact and
    // fsck finds nothing.
    @Test(arguments: [UInt64(1), 2, 3])
    func randomMembershipChangesMatchTheModelAcrossReopens(seed: UInt64) throws {
        let store = TemporaryStore()
        let model = try Self.model()
        var coordinator = try store.coordinator(model: model)
        var random = DiffRandom(seed: seed)
        var oracle = Oracle()
        var serial = 0
        func fresh(_ prefix: String) -> String {
            serial += 1
            return "\(prefix)\(serial)"
        }
        for round in 0..<24 {
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            for _ in 0..<Int.random(in: 1...6, using: &random) {
                switch Int.random(in: 0..<10, using: &random) {
                case 0:
                    let name = fresh("O")
                    try context.insertNewObject(forEntityName: "Owner").setValue(.string(name), forKey: "name")
                    oracle.owners.insert(name)
                case 1:
                    let name = fresh("T")
                    try context.insertNewObject(forEntityName: "Tag").setValue(.string(name), forKey: "name")
                    oracle.tags.insert(name)
                case 2:
                    let name = fresh("I")
                    try context.insertNewObject(forEntityName: "Item").setValue(.string(name), forKey: "name")
                    oracle.items.insert(name)
                case 3:
                    // Move an item to another owner (or none), from the item's side.
                    guard let item = oracle.items.randomElement(using: &random) else { continue }
                    let owner = Bool.random(using: &random) ? oracle.owners.randomElement(using: &random) : nil
                    try Self.object("Item", item, in: context).setValue(try owner.map { try Self.object("Owner", $0, in: context) }, forKey: "owner")
                    oracle.ownerOf[item] = owner
                case 4:
                    // Add an item to an owner from the owner's side.
                    guard let item = oracle.items.randomElement(using: &random), let owner = oracle.owners.randomElement(using: &random) else { continue }
                    let ownerObject = try Self.object("Owner", owner, in: context)
                    var members = try ownerObject.objects(forKey: "items")
                    let itemObject = try Self.object("Item", item, in: context)
                    if !members.contains(itemObject) { members.append(itemObject) }
                    try ownerObject.setValue(members, forKey: "items")
                    oracle.ownerOf[item] = owner
                case 5:
                    // Tag or untag, from either side.
                    guard let item = oracle.items.randomElement(using: &random), let tag = oracle.tags.randomElement(using: &random) else { continue }
                    let adding = !oracle.tagsOf[item, default: []].contains(tag)
                    let itemObject = try Self.object("Item", item, in: context), tagObject = try Self.object("Tag", tag, in: context)
                    if Bool.random(using: &random) {
                        var tags = try itemObject.objects(forKey: "tags")
                        if adding { tags.append(tagObject) } else { tags.removeAll { $0 === tagObject } }
                        try itemObject.setValue(tags, forKey: "tags")
                    } else {
                        var items = try tagObject.objects(forKey: "items")
                        if adding { items.append(itemObject) } else { items.removeAll { $0 === itemObject } }
                        try tagObject.setValue(items, forKey: "items")
                    }
                    if adding { oracle.tagsOf[item, default: []].insert(tag) } else { oracle.tagsOf[item]?.remove(tag) }
                    if oracle.tagsOf[item]?.isEmpty == true { oracle.tagsOf[item] = nil }
                case 6:
                    // Link or unlink (no inverse).
                    guard let from = oracle.items.randomElement(using: &random), let to = oracle.items.randomElement(using: &random) else { continue }
                    let fromObject = try Self.object("Item", from, in: context), toObject = try Self.object("Item", to, in: context)
                    var links = try fromObject.objects(forKey: "links")
                    if oracle.linksOf[from, default: []].contains(to) {
                        links.removeAll { $0 === toObject }
                        oracle.linksOf[from]?.remove(to)
                        if oracle.linksOf[from]?.isEmpty == true { oracle.linksOf[from] = nil }
                    } else {
                        links.append(toObject)
                        oracle.linksOf[from, default: []].insert(to)
                    }
                    try fromObject.setValue(links, forKey: "links")
                case 7:
                    // Rank an owner's items (ordered, in the row).
                    guard let owner = oracle.owners.randomElement(using: &random) else { continue }
                    let picked = Array(oracle.items.shuffled(using: &random).prefix(3))
                    try Self.object("Owner", owner, in: context).setValue(try picked.map { try Self.object("Item", $0, in: context) }, forKey: "ranked")
                    oracle.ranked[owner] = picked
                case 8:
                    // Delete an item: nullify takes it out of owners and tags; links to it
                    // (no inverse) are removed by hand, as an app must.
                    guard let item = oracle.items.randomElement(using: &random) else { continue }
                    for (from, targets) in oracle.linksOf where targets.contains(item) && from != item {
                        let fromObject = try Self.object("Item", from, in: context)
                        try fromObject.setValue(try fromObject.objects(forKey: "links").filter { try $0.value(forKey: "name").stringValue != item }, forKey: "links")
                    }
                    for (owner, list) in oracle.ranked where list.contains(item) {
                        let ownerObject = try Self.object("Owner", owner, in: context)
                        try ownerObject.setValue(try ownerObject.objects(forKey: "ranked").filter { try $0.value(forKey: "name").stringValue != item }, forKey: "ranked")
                        oracle.ranked[owner] = list.filter { $0 != item }
                    }
                    context.delete(try Self.object("Item", item, in: context))
                    oracle.items.remove(item)
                    oracle.ownerOf[item] = nil
                    oracle.tagsOf[item] = nil
                    oracle.linksOf[item] = nil
                    for key in Array(oracle.linksOf.keys) {
                        oracle.linksOf[key]?.remove(item)
                        if oracle.linksOf[key]?.isEmpty == true { oracle.linksOf[key] = nil }
                    }
                default:
                    // Delete a tag (nullify: its items lose it).
                    guard let tag = oracle.tags.randomElement(using: &random) else { continue }
                    context.delete(try Self.object("Tag", tag, in: context))
                    oracle.tags.remove(tag)
                    for key in Array(oracle.tagsOf.keys) {
                        oracle.tagsOf[key]?.remove(tag)
                        if oracle.tagsOf[key]?.isEmpty == true { oracle.tagsOf[key] = nil }
                    }
                }
            }
            try context.save()
            try Self.verify(oracle, coordinator)
            if round % 6 == 5 {
                for persistent in coordinator.persistentStores { try coordinator.remove(persistent) }
                coordinator = try store.coordinator(model: model)
                try Self.verify(oracle, coordinator)
            }
        }
    }

    // [REL-2] Adding a member to a one-to-many writes one key and leaves the owner's row
    // bytes alone except for its version; a many-to-many adds one key each way.
    @Test func addingAMemberIsOneKeyPerDirection() throws {
        let store = TemporaryStore()
        let coordinator = try store.coordinator(model: try Self.model())
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let owner = try context.insertNewObject(forEntityName: "Owner")
        let tag = try context.insertNewObject(forEntityName: "Tag")
        try context.save()
        let engine = try #require((coordinator.persistentStores.first as? StrataStore)?.storageEngine)
        let before = try engine.snapshot().count
        let item = try context.insertNewObject(forEntityName: "Item")
        try item.setValue(owner, forKey: "owner")
        try item.setValue([tag], forKey: "tags")
        try context.save()
        // The item's row and its three keys; the owner's and tag's rows are rewritten in place.
        #expect(try engine.snapshot().count == before + 4)
        let layout = try StoreLayout(model: try Self.model())
        let ownerLayout = try #require(layout.layout(of: try Self.model().entity(named: "Owner")))
        #expect(ownerLayout.fields.map(\.name) == ["name", "ranked"], "unordered to-many relationships are not fields")
    }

    // A to-many changed one member at a time from committed members (here by inverse
    // maintenance) keeps what changed, and the save writes its keys from that: only against
    // the row version the members were read with, never after a refresh brought another one,
    // and not once more members changed than the journal keeps. Every case reads back right
    // from both sides.
    @Test func memberChangesAreWrittenFromTheJournalOnlyAgainstTheirOwnRow() throws {
        let store = TemporaryStore()
        let coordinator = try store.coordinator(model: try Self.model())
        let setup = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let tag = try setup.insertNewObject(forEntityName: "Tag")
        try tag.setValue("t", forKey: "name")
        var items: [ManagedObject] = []
        for index in 0..<100 {
            let item = try setup.insertNewObject(forEntityName: "Item")
            try item.setValue(.string("i\(index)"), forKey: "name")
            items.append(item)
        }
        try tag.setValue(Array(items.prefix(50)), forKey: "items")
        try setup.save()
        let ordinal = try #require(try Self.model().entity(named: "Tag").relationshipsByName["items"]).ordinal
        func members(_ context: ManagedObjectContext) throws -> Set<String> {
            Set(try Self.names(try context.existingObject(with: tag.objectID).objects(forKey: "items")))
        }
        func itemsTagged(_ context: ManagedObjectContext) throws -> Set<String> {
            var request = FetchRequest(entityName: "Item")
            request.predicate = try FetchPredicate(format: "ANY tags == %@", tag.objectID)
            return Set(try Self.names(try context.fetch(request)))
        }

        // Two removed and one added by the members' sides: the journal says so, and the save
        // writes those keys.
        let one = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let tagOne = try one.existingObject(with: tag.objectID)
        _ = try tagOne.objects(forKey: "items")
        try one.existingObject(with: items[0].objectID).setValue([ManagedObject](), forKey: "tags")
        try one.existingObject(with: items[1].objectID).setValue([ManagedObject](), forKey: "tags")
        try one.existingObject(with: items[60].objectID).setValue([tagOne], forKey: "tags")
        let journal = try #require(tagOne.memberChanges(atOrdinal: ordinal))
        #expect(Set(journal.removed) == [items[0].objectID, items[1].objectID] && journal.added == [items[60].objectID])
        try one.save()
        var expected = Set((2..<50).map { "i\($0)" } + ["i60"])
        #expect(try members(ManagedObjectContext(persistentStoreCoordinator: coordinator)) == expected)
        #expect(try itemsTagged(ManagedObjectContext(persistentStoreCoordinator: coordinator)) == expected)

        // Changed again, then another context saves the tag (a new row version) and the first
        // refreshes it keeping its changes: the journal no longer describes the stored
        // members, and the save compares the sets instead.
        let two = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let tagTwo = try two.existingObject(with: tag.objectID)
        _ = try tagTwo.objects(forKey: "items")
        try two.existingObject(with: items[2].objectID).setValue([ManagedObject](), forKey: "tags")
        #expect(tagTwo.memberChanges(atOrdinal: ordinal) != nil)
        let other = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        try other.existingObject(with: tag.objectID).setValue("renamed", forKey: "name")
        try other.save()
        two.refresh(tagTwo, mergeChanges: true)
        _ = try tagTwo.value(forKey: "name")
        #expect(tagTwo.memberChanges(atOrdinal: ordinal) == nil, "another version came in")
        try two.save()
        expected.remove("i2")
        #expect(try members(ManagedObjectContext(persistentStoreCoordinator: coordinator)) == expected)
        #expect(try itemsTagged(ManagedObjectContext(persistentStoreCoordinator: coordinator)) == expected)

        // More changes than a journal keeps: every tagged member removed and every other added.
        let three = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let tagThree = try three.existingObject(with: tag.objectID)
        _ = try tagThree.objects(forKey: "items")
        for (index, item) in items.enumerated() {
            let tagged = expected.contains("i\(index)")
            try three.existingObject(with: item.objectID).setValue(tagged ? [] : [tagThree], forKey: "tags")
        }
        #expect(tagThree.memberChanges(atOrdinal: ordinal) == nil, "past the journal's limit")
        try three.save()
        let rest = Set((0..<100).map { "i\($0)" }).subtracting(expected)
        #expect(try members(ManagedObjectContext(persistentStoreCoordinator: coordinator)) == rest)
        #expect(try itemsTagged(ManagedObjectContext(persistentStoreCoordinator: coordinator)) == rest)
        // Two keys per tagged item, no stale one left.
        let engine = try #require((coordinator.persistentStores.first as? StrataStore)?.storageEngine)
        var keys = 0
        try engine.snapshot().forEachKeyBytes(from: [RelationshipKeys.tag], to: [RelationshipKeys.tag + 1]) { _ in
            keys += 1
            return true
        }
        #expect(keys == 2 * rest.count)
        let report = try ObjectChecker.check(engine: engine, repair: false)
        #expect(report.problems.isEmpty, "\(report.problems)")
    }

    // [REL-2] A membership change saved against a stale version conflicts and writes no key:
    // the keys a save diffs against are the committed members, guarded by the row version.
    @Test func aStaleMembershipChangeConflictsAndWritesNoKey() throws {
        let store = TemporaryStore()
        let coordinator = try store.coordinator(model: try Self.model())
        let setup = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let item = try setup.insertNewObject(forEntityName: "Item")
        try item.setValue("i", forKey: "name")
        let first = try setup.insertNewObject(forEntityName: "Tag")
        try first.setValue("first", forKey: "name")
        let second = try setup.insertNewObject(forEntityName: "Tag")
        try second.setValue("second", forKey: "name")
        try setup.save()

        let one = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let two = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let itemOne = try one.existingObject(with: item.objectID), itemTwo = try two.existingObject(with: item.objectID)
        #expect(try itemOne.objects(forKey: "tags").isEmpty && itemTwo.objects(forKey: "tags").isEmpty)
        try itemOne.setValue([one.object(with: first.objectID)], forKey: "tags")
        try one.save()
        try itemTwo.setValue([two.object(with: second.objectID)], forKey: "tags")
        #expect(throws: ObjectGraphError.self) { try two.save() }

        let check = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(try Self.names(check.existingObject(with: item.objectID).objects(forKey: "tags")) == ["first"])
        #expect(try Self.names(check.existingObject(with: second.objectID).objects(forKey: "items")).isEmpty)
    }

    // [REL-1] Parsing hostile keys (fsck and dump parse every key of the 0x03 space): every
    // body shape around the separators, exhaustively for short bodies, returns a key only
    // when it re-encodes to the same bytes, and never traps (the fuzzer found a key whose
    // only zero ended the body).
    @Test func hostileRelationshipKeysParseOrAreRejectedWithoutTrapping() throws {
        let alphabet: [UInt8] = [0x00, 0x41, 0xFF]
        var bodies: [[UInt8]] = [[]]
        for _ in 0..<5 { bodies += bodies.flatMap { body in alphabet.map { body + [$0] } } }
        var parsed = 0
        for body in Set(bodies) {
            for tail in [[UInt8](repeating: 0, count: 18), [UInt8](repeating: 0xFF, count: 18), [UInt8](repeating: 0, count: 17)] {
                let key = [RelationshipKeys.tag] + body + tail
                guard let parts = RelationshipKeys.parse(key) else { continue }
                parsed += 1
                let again = RelationshipKeys.key(
                    ownerPrefix: RelationshipKeys.ownerPrefix(root: parts.root, relationship: parts.relationship, owner: parts.owner),
                    member: parts.member)
                #expect(again == key)
            }
        }
        #expect(parsed > 0, "well-formed keys among the shapes parse")
        #expect(RelationshipKeys.parse([RelationshipKeys.tag, 0x41, 0x41, 0x41, 0x00] + [UInt8](repeating: 0, count: 18)) == nil)
    }

    /// Ten owners "O0"…"O9" and 300 items "I0"…"I299", item i owned by owner i % 10 and, with
    /// `tag`, tagged when i % 7 == 0; returns the items.
    static func ownedItems(in context: ManagedObjectContext, tagging tag: ManagedObject? = nil) throws -> [ManagedObject] {
        let owners = try (0..<10).map { index -> ManagedObject in
            let owner = try context.insertNewObject(forEntityName: "Owner")
            try owner.setValue(.string("O\(index)"), forKey: "name")
            return owner
        }
        return try (0..<300).map { index in
            let item = try context.insertNewObject(forEntityName: "Item")
            try item.setValue(.string("I\(index)"), forKey: "name")
            try item.setValue(owners[index % 10], forKey: "owner")
            if let tag, index % 7 == 0 { try item.setValue([tag], forKey: "tags") }
            return item
        }
    }

    /// The store's point reads so far: row-cache lookups and reads of WAL values, which a
    /// scan does not make.
    static func pointReads(_ strata: StrataStore) throws -> Int {
        let stats = try #require(strata.rowCacheStats())
        return stats.hits + stats.misses + stats.walReads
    }

    // [FETCH-S2] A predicate through a to-one whose inverse is keyed reads the matching
    // owner's members by key, not every row: the fetch's point reads (row-cache lookups, which
    // a scan does not make) are its members' rows, nothing more.
    @Test func aSemiJoinThroughAKeyedInverseReadsOnlyTheMembers() throws {
        let store = TemporaryStore()
        let coordinator = try store.coordinator(model: try Self.model())
        let setup = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        _ = try Self.ownedItems(in: setup)
        try setup.save()
        let strata = try #require(coordinator.persistentStores.first as? StrataStore)
        func reads() throws -> Int { try Self.pointReads(strata) }
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var request = FetchRequest(entityName: "Item")
        request.predicate = try FetchPredicate(format: "owner.name == %@", "O3")
        let before = try reads()
        let found = try context.fetch(request)
        #expect(found.count == 30)
        // 30 members read by reference, and at most the metadata record (for the row counts
        // that bound the candidates); a scan would make none of these point reads.
        let delta = try reads() - before
        #expect((30...31).contains(delta), "the 30 members' rows, read by reference (\(delta) reads)")
        #expect(try Set(Self.names(found)) == Set((0..<300).filter { $0 % 10 == 3 }.map { "I\($0)" }))
    }

    /// A store of the owned items, every seventh tagged "hot" (``ownedItems(in:tagging:)``), with
    /// the items numbered `deleting` deleted in a second save.
    static func taggedItems(in store: TemporaryStore, deleting: [Int]) throws -> (PersistentStoreCoordinator, StrataStore) {
        let coordinator = try store.coordinator(model: try Self.model())
        let setup = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let tag = try setup.insertNewObject(forEntityName: "Tag")
        try tag.setValue(.string("hot"), forKey: "name")
        let items = try Self.ownedItems(in: setup, tagging: tag)
        try setup.save()
        for index in deleting { setup.delete(items[index]) }
        try setup.save()
        return (coordinator, try #require(coordinator.persistentStores.first as? StrataStore))
    }

    // [FETCH-S3] A count or ID fetch whose whole predicate is a semi-join through a keyed
    // inverse is answered from the keys and the index: no row is read, deleted members are
    // not counted, and the same fetch with a second conjunct (which reads the rows) agrees.
    @Test func aSemiJoinCountOrIDFetchIsAnsweredWithoutReadingRows() throws {
        let store = TemporaryStore()
        // I3: owner O3, not tagged; I7: owner O7, tagged.
        let (coordinator, strata) = try Self.taggedItems(in: store, deleting: [3, 7])
        func reads() throws -> Int { try Self.pointReads(strata) }
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let expectedO3 = Set((0..<300).filter { $0 % 10 == 3 && $0 != 3 }.map { "I\($0)" })
        let expectedHot = Set((0..<300).filter { $0 % 7 == 0 && $0 != 7 }.map { "I\($0)" })
        for (format, argument, expected) in [("owner.name == %@", "O3", expectedO3), ("ANY tags.name == %@", "hot", expectedHot)] {
            var request = FetchRequest(entityName: "Item")
            request.predicate = try FetchPredicate(format: format, argument)
            let before = try reads()
            #expect(try context.count(for: request) == expected.count, "\(format)")
            request.resultType = .managedObjectID
            let ids = try context.fetchObjectIDs(request)
            // The destination's own fetch (one row for O3, one for the tag) and the metadata
            // record at most: the members' rows are not read.
            let delta = try reads() - before
            #expect(delta <= 4, "\(format): \(delta) reads")
            #expect(try Set(Self.names(ids.map { try context.existingObject(with: $0) })) == expected)
            // With a conjunct the keys cannot answer, the rows are read and agree.
            var both = FetchRequest(entityName: "Item")
            both.predicate = try FetchPredicate(format: format + " AND name BEGINSWITH %@", argument, "I1")
            #expect(try Set(Self.names(context.fetch(both))) == expected.filter { $0.hasPrefix("I1") })
        }
    }

    // [FETCH-S3] An ID fetch with an offset and a limit takes the stretch of the keyed
    // candidates a scan would return: the same IDs, in the same order, as the objects of the
    // same fetch (which reads the rows), and no member's row is read.
    @Test func aSemiJoinIDFetchWithAnOffsetAndALimitIsTheStretchOfTheCandidates() throws {
        let store = TemporaryStore()
        // I13: owner O3, not tagged (a member key gone with its row); I14: owner O4, tagged.
        let (coordinator, strata) = try Self.taggedItems(in: store, deleting: [13, 14])
        for (format, argument) in [("owner.name == %@", "O3"), ("ANY tags.name == %@", "hot")] {
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            var request = FetchRequest(entityName: "Item")
            request.predicate = try FetchPredicate(format: format, argument)
            let all = try context.fetch(request).map(\.objectID)
            #expect(all.count > 20, "\(format)")
            for (offset, limit) in [(0, 1), (0, 5), (3, 7), (10, 0), (all.count - 2, 5), (all.count, 3), (all.count + 4, 0)] {
                var ids = request
                ids.resultType = .managedObjectID
                ids.fetchOffset = offset
                ids.fetchLimit = limit
                let fresh = ManagedObjectContext(persistentStoreCoordinator: coordinator)
                let before = try Self.pointReads(strata)
                let found = try fresh.fetchObjectIDs(ids)
                #expect(try Self.pointReads(strata) - before <= 4, "\(format) offset \(offset) limit \(limit): rows read")
                let expected = Array(all.dropFirst(offset).prefix(limit > 0 ? limit : Int.max))
                #expect(found == expected, "\(format) offset \(offset) limit \(limit)")
                var objects = request
                objects.fetchOffset = offset
                objects.fetchLimit = limit
                #expect(try fresh.fetch(objects).map(\.objectID) == expected, "\(format) offset \(offset) limit \(limit), objects")
            }
        }
    }

    // [REL-4] fsck finds a missing one-to-many key, a key without an owner and a key whose
    // member does not point back, and repair leaves a store it finds clean.
    @Test func fsckFindsAndRepairsBrokenRelationshipKeys() throws {
        let store = TemporaryStore()
        let model = try Self.model()
        let coordinator = try store.coordinator(model: model)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let owner = try context.insertNewObject(forEntityName: "Owner")
        let other = try context.insertNewObject(forEntityName: "Owner")
        let item = try context.insertNewObject(forEntityName: "Item")
        try item.setValue(owner, forKey: "owner")
        try context.save()
        let strata = try #require(coordinator.persistentStores.first as? StrataStore)
        let engine = try #require(strata.storageEngine)
        let layout = try StoreLayout(model: model)
        let itemNumber = try #require(layout.number(of: "Item"))
        let itemRef = try strata.integerReference(item.objectID)
        let ownerRef = try strata.integerReference(owner.objectID), otherRef = try strata.integerReference(other.objectID)
        func key(_ owner: Int64) -> [UInt8] {
            RelationshipKeys.key(
                ownerPrefix: RelationshipKeys.ownerPrefix(root: "Owner", relationship: "items", owner: owner),
                member: StoredObject(entity: itemNumber, reference: itemRef))
        }
        var batch = WriteBatch()
        batch.delete(key(ownerRef))  // the item's key is missing
        batch.put(key(otherRef), [])  // another owner claims the item
        batch.put(key(999_999), [])  // an owner that does not exist
        _ = try engine.commit(batch)

        let report = try ObjectChecker.check(engine: engine, repair: false)
        #expect(report.problems.map(\.kind).filter { $0 == .relationshipKey }.count == 2, "\(report.problems)")
        #expect(report.problems.contains { $0.kind == .inverseMismatch }, "\(report.problems)")
        let repaired = try ObjectChecker.check(engine: engine, repair: true)
        #expect(!repaired.repairs.isEmpty)
        #expect(try ObjectChecker.check(engine: engine, repair: false).problems.isEmpty)
        let snapshot = try engine.snapshot()
        #expect(try snapshot.get(key(ownerRef)) != nil, "the key the item's to-one calls for is back")
        #expect(try snapshot.get(key(otherRef)) == nil && snapshot.get(key(999_999)) == nil)
    }
}
