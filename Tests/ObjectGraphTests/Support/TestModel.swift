import Foundation
import ObjectGraph

/// A typed subclass used by the tests, to check that fetched objects use the entity's class.
final class Person: ManagedObject {
    @Managed("name") var name: String?
    @Managed("age") var age: Int16?
    @Managed("nickname") var nickname: String?

    var fetchAwakenings = 0
    var saves = 0
    var deletionsPrepared = 0

    override func awakeFromInsert() { fetchAwakenings = 0 }
    override func awakeFromFetch() { fetchAwakenings += 1 }
    override func didSave() { saves += 1 }
    override func prepareForDeletion() { deletionsPrepared += 1 }
}

/// The model every conformance test uses.
///
/// - Department 1—* Person (`employees`, cascade; `department`, nullify)
/// - Department 1—* Project (`projects`, deny; `department`, nullify)
/// - Person 1—1 Badge (`badge`, cascade; `owner`, nullify)
/// - Person 1—* Note (`notes`, noAction; `author`, nullify)
/// - Manager is a Person; Project.members is ordered and has no inverse.
enum TestModel {
    static func make() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Department", properties: [
                .attribute("name", .string, optional: false),
                .attribute("budget", .decimal),
                .toMany("employees", "Person", inverse: "department", deleteRule: .cascade),
                .toMany("projects", "Project", inverse: "department", deleteRule: .deny),
            ]),
            EntityDescription(name: "Person", managedObjectClass: Person.self, properties: [
                .attribute("name", .string, optional: false),
                .attribute("age", .integer16, defaultValue: 0, rules: [.minimum(0), .maximum(150)]),
                .attribute("email", .string, rules: [.pattern("[a-z]+@[a-z]+\\.[a-z]+")]),
                .attribute("nickname", .string, transient: true),
                .attribute("id", .uuid),
                .toOne("department", "Department", inverse: "employees"),
                .toOne("badge", "Badge", inverse: "owner", deleteRule: .cascade),
                .toMany("notes", "Note", inverse: "author", deleteRule: .noAction),
            ]),
            EntityDescription(name: "Manager", superentity: "Person", properties: [
                .attribute("level", .integer32, defaultValue: 1)
            ]),
            EntityDescription(name: "Project", properties: [
                .attribute("title", .string),
                .toOne("department", "Department", inverse: "projects"),
                .toMany("members", "Person", ordered: true),
            ]),
            EntityDescription(name: "Badge", properties: [
                .attribute("code", .string),
                .toOne("owner", "Person", inverse: "badge"),
            ]),
            EntityDescription(name: "Note", properties: [
                .attribute("text", .string),
                .toOne("author", "Person", inverse: "notes"),
            ]),
        ])
    }
}
