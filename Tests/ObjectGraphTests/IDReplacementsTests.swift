import Foundation
@testable import ObjectGraph
import Testing

/// The table a save rewrites relationship values through (``IDReplacements``): every temporary
/// key found, by identity or by value, and nothing else replaced.
@Suite struct IDReplacementsTests {
    static let entity = ObjectIDListTests.entity

    @Test func everyTemporaryKeyIsFoundAndNothingElseIsReplaced() throws {
        let token = StoreToken(identifier: "store", store: nil)
        let temporaries = (0..<500).map { _ in ManagedObjectID.temporary(for: Self.entity) }
        let permanents = temporaries.indices.map {
            ManagedObjectID(entity: Self.entity, store: token, kind: .permanent(.int64(Int64($0 + 1))))
        }
        let map = Dictionary(uniqueKeysWithValues: zip(temporaries, permanents).map { ($0, $1) })
        let replacements = IDReplacements(map)
        #expect(!replacements.isEmpty)
        for (old, new) in zip(temporaries, permanents) {
            #expect(replacements[old] == new)
            #expect(replacements.image(of: old) == new)
        }
        // The same temporary ID made again from its kind (as decoding its URI would): another
        // home, an equal ID, found by value.
        for (old, new) in zip(temporaries, permanents).prefix(25) {
            guard case .temporary(let uuid) = old.kind else {
                Issue.record("\(old) is not temporary")
                continue
            }
            let again = ManagedObjectID(entity: Self.entity, store: nil, kind: .temporary(uuid))
            #expect(again.home !== old.home && again == old)
            #expect(replacements[again] == new)
        }
        // A temporary ID the map does not have, and permanent IDs, stay.
        let stranger = ManagedObjectID.temporary(for: Self.entity)
        #expect(replacements[stranger] == nil)
        #expect(replacements.image(of: stranger) == stranger)
        for id in permanents.prefix(25) { #expect(replacements[id] == nil) }
        #expect(replacements.replacesAny(of: [stranger] + permanents.prefix(10)) == false)
        #expect(replacements.replacesAny(of: [stranger, temporaries[7]]))
    }

    // A save replaces temporary IDs only: a permanent key in the map is never looked up.
    @Test func permanentKeysAreNotReplacements() {
        let token = StoreToken(identifier: "store", store: nil)
        let a = ManagedObjectID(entity: Self.entity, store: token, kind: .permanent(.int64(1)))
        let b = ManagedObjectID(entity: Self.entity, store: token, kind: .permanent(.int64(2)))
        let replacements = IDReplacements([a: b])
        #expect(replacements.isEmpty)
        #expect(replacements[a] == nil)
        #expect(IDReplacements([:]).isEmpty)
    }
}
