import Foundation
import ObjectGraph

extension ManagedObjectContext {
    /// Inserts a person with a name and an age.
    @discardableResult
    func makePerson(_ name: String, age: Int16 = 30, entity: String = "Person") throws -> ManagedObject {
        let person = try insertNewObject(forEntityName: entity)
        try person.setValue(.string(name), forKey: "name")
        try person.setValue(.int16(age), forKey: "age")
        return person
    }

    /// Inserts a department with a name.
    @discardableResult
    func makeDepartment(_ name: String) throws -> ManagedObject {
        let department = try insertNewObject(forEntityName: "Department")
        try department.setValue(.string(name), forKey: "name")
        return department
    }

    /// Fetches the names of the objects matching a request, in result order.
    func names(_ request: FetchRequest, key: String = "name") throws -> [String] {
        try fetch(request).map { try $0.value(forKey: key).stringValue ?? "<nil>" }
    }
}

extension FetchRequest {
    /// A request with a predicate and sort descriptors, in one expression.
    static func make(_ entity: String, _ predicate: FetchPredicate? = nil, sortedBy keys: [String] = []) -> FetchRequest {
        var request = FetchRequest(entityName: entity)
        request.predicate = predicate
        request.sortDescriptors = keys.map { FetchSortDescriptor(keyPath: $0) }
        return request
    }
}
