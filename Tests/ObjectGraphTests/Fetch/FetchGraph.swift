import Foundation
import ObjectGraph

/// A small fixed object graph for the fetch-language tests: people, departments,
/// projects and tags, with to-one (department, manager), to-many (employees, reports,
/// tags) and many-to-many (people ⇄ projects) relationships, nulls and Unicode names.
///
/// | person | age | salary | active | email | department | manager | projects |
/// |---|---|---|---|---|---|---|---|
/// | Ada | 36 | 120.5 | yes | ada@example.com | Engineering | – | Engine, Atlas |
/// | Bob | 25 | 80 | no | – | Sales | Ada | Atlas |
/// | Zoë | 41 | – | yes | zoe@example.com | Engineering | Ada | – |
/// | José | 29 | 95.25 | yes | – | – | Zoë | Engine |
/// | Ådne | – | 60 | no | adne@example.no | Sales | Bob | Atlas, Cargo |
/// | Σωκράτης | 70 | 0 | – | sokrates@example.gr | – | – | Cargo |
///
/// Departments: Engineering (budget 1000.50, decimal), Sales (250), Ops (no budget, no
/// one). Projects: Engine (Engineering, 500, tags core and fast), Atlas (Sales, 200, core
/// and maps), Cargo (no department, no budget, no tags). Tag legacy has no project.
/// Born (seconds after the reference date): Ada 100, Bob 200, José 300, Ådne 400, Σωκράτης 50.
enum FetchGraph {
    static let adaID = UUID(uuidString: "00000000-0000-0000-0000-00000000000A") ?? UUID()

    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Department", properties: [
                .attribute("name", .string),
                .attribute("budget", .decimal),
                .toMany("employees", "Person", inverse: "department"),
                .toMany("projects", "Project", inverse: "department"),
            ]),
            EntityDescription(name: "Person", properties: [
                .attribute("name", .string),
                .attribute("age", .integer16),
                .attribute("salary", .double),
                .attribute("active", .boolean),
                .attribute("email", .string),
                .attribute("born", .date),
                .attribute("id", .uuid),
                .attribute("photo", .binaryData),
                .toOne("department", "Department", inverse: "employees"),
                .toOne("manager", "Person", inverse: "reports"),
                .toMany("reports", "Person", inverse: "manager"),
                .toMany("projects", "Project", inverse: "members"),
            ]),
            EntityDescription(name: "Project", properties: [
                .attribute("title", .string),
                .attribute("budget", .integer64),
                .toOne("department", "Department", inverse: "projects"),
                .toMany("members", "Person", inverse: "projects"),
                .toMany("tags", "Tag", inverse: "projects"),
            ]),
            EntityDescription(name: "Tag", properties: [
                .attribute("name", .string),
                .toMany("projects", "Project", inverse: "tags"),
            ]),
        ])
    }

    /// The key that names an object of each entity in the tests.
    static func nameKey(_ entity: String) -> String { entity == "Project" ? "title" : "name" }

    /// A saved graph in a fresh store of the fixture's type, and every object's ID by name.
    static func make(in fixture: any StoreFixture = InMemoryFixture()) throws -> (TestStack, [String: ManagedObjectID]) {
        let stack = try fixture.makeStack(model: try model())
        let context = stack.context()
        func make(_ entity: String, _ values: [String: AttributeValue]) throws -> ManagedObject {
            let object = try context.insertNewObject(forEntityName: entity)
            for (key, value) in values { try object.setValue(value, forKey: key) }
            return object
        }
        let eng = try make("Department", ["name": "Engineering", "budget": .decimal(Decimal(string: "1000.50") ?? 0)])
        let sales = try make("Department", ["name": "Sales", "budget": .decimal(250)])
        let ops = try make("Department", ["name": "Ops"])
        let core = try make("Tag", ["name": "core"]), fast = try make("Tag", ["name": "fast"])
        let maps = try make("Tag", ["name": "maps"]), legacy = try make("Tag", ["name": "legacy"])
        let engine = try make("Project", ["title": "Engine", "budget": 500])
        let atlas = try make("Project", ["title": "Atlas", "budget": 200])
        let cargo = try make("Project", ["title": "Cargo"])
        try engine.setValue(eng, forKey: "department")
        try atlas.setValue(sales, forKey: "department")
        try engine.setValue([core, fast], forKey: "tags")
        try atlas.setValue([core, maps], forKey: "tags")
        func born(_ seconds: Double) -> AttributeValue { .date(Date(timeIntervalSinceReferenceDate: seconds)) }
        let ada = try make("Person", ["name": "Ada", "age": 36, "salary": 120.5, "active": true, "email": "ada@example.com",
                                      "born": born(100), "id": .uuid(adaID), "photo": .data(Data([1, 2, 3]))])
        let bob = try make("Person", ["name": "Bob", "age": 25, "salary": 80.0, "active": false, "born": born(200),
                                      "id": .uuid(UUID()), "photo": .data(Data([9]))])
        let zoe = try make("Person", ["name": "Zoë", "age": 41, "active": true, "email": "zoe@example.com", "id": .uuid(UUID())])
        let jose = try make("Person", ["name": "José", "age": 29, "salary": 95.25, "active": true, "born": born(300), "id": .uuid(UUID())])
        let adne = try make("Person", ["name": "Ådne", "salary": 60.0, "active": false, "email": "adne@example.no",
                                       "born": born(400), "id": .uuid(UUID())])
        let sokrates = try make("Person", ["name": "Σωκράτης", "age": 70, "salary": 0.0, "email": "sokrates@example.gr",
                                           "born": born(50), "id": .uuid(UUID())])
        try ada.setValue(eng, forKey: "department")
        try bob.setValue(sales, forKey: "department")
        try zoe.setValue(eng, forKey: "department")
        try adne.setValue(sales, forKey: "department")
        try bob.setValue(ada, forKey: "manager")
        try zoe.setValue(ada, forKey: "manager")
        try jose.setValue(zoe, forKey: "manager")
        try adne.setValue(bob, forKey: "manager")
        try ada.setValue([engine, atlas], forKey: "projects")
        try bob.setValue([atlas], forKey: "projects")
        try jose.setValue([engine], forKey: "projects")
        try adne.setValue([atlas, cargo], forKey: "projects")
        try sokrates.setValue([cargo], forKey: "projects")
        try context.save()
        var ids: [String: ManagedObjectID] = [:]
        for object in [eng, sales, ops, core, fast, maps, legacy, engine, atlas, cargo, ada, bob, zoe, jose, adne, sokrates] {
            let name = try object.value(forKey: nameKey(object.entity.name)).stringValue ?? ""
            ids[name] = object.objectID
        }
        return (stack, ids)
    }
}
