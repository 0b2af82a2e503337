import Foundation
import ObjectGraph
import Testing

@Suite("Dictionary results: expressions, grouping, having, distinct")
struct DictionaryResultTests {
    private func request(_ properties: [FetchProperty], groupBy: [FetchProperty]? = nil) -> FetchRequest {
        var request = FetchRequest(entityName: "Person")
        request.resultType = .dictionary
        request.propertiesToFetch = properties
        request.propertiesToGroupBy = groupBy
        return request
    }

    /// The people of the graph by department name ("" for none), computed by hand.
    private func peopleByDepartment(_ context: ManagedObjectContext) throws -> [String: [ManagedObject]] {
        var groups: [String: [ManagedObject]] = [:]
        for person in try context.fetch(FetchRequest(entityName: "Person")) {
            let department = try person.object(forKey: "department").map { try $0.value(forKey: "name").stringValue ?? "" } ?? ""
            groups[department, default: []].append(person)
        }
        return groups
    }

    @Test func groupedAggregatesMatchTheSameComputationByHand() throws {
        let (stack, _) = try FetchGraph.make()
        let context = stack.context()
        var fetch = request([
            "department.name",
            .aggregate(.count, of: "salary", as: "paid"),
            .aggregate(.sum, of: "salary", as: "payroll"),
            .aggregate(.average, of: "salary", as: "meanSalary"),
            .aggregate(.min, of: "age", as: "youngest"),
            .aggregate(.max, of: "name", as: "lastName"),
            .aggregate(.median, of: "age", as: "medianAge"),
            .aggregate(.stddev, of: "salary", as: "spread"),
        ], groupBy: ["department.name"])
        fetch.sortDescriptors = [FetchSortDescriptor(keyPath: "department.name")]
        let rows = try context.fetchDictionaries(fetch)

        let groups = try peopleByDepartment(context)
        #expect(rows.count == groups.count)
        #expect(rows.map { $0["department.name"] } == [.null, .attribute("Engineering"), .attribute("Sales")], "nulls first")
        for row in rows {
            let name = row["department.name"]?.attributeValue?.stringValue ?? ""
            let people = groups[name] ?? []
            let salaries = try people.compactMap { try $0.value(forKey: "salary").doubleValue }
            let ages = try people.compactMap { try $0.value(forKey: "age").integerValue }.sorted()
            let mean = salaries.reduce(0, +) / Double(salaries.count)
            #expect(row["paid"] == .attribute(.int64(Int64(salaries.count))))
            #expect(row["payroll"] == .attribute(.double(salaries.reduce(0, +))))
            #expect(row["meanSalary"] == .attribute(.double(mean)))
            #expect(row["youngest"] == (ages.first.map { .attribute(.int16(Int16($0))) } ?? .null))
            #expect(row["lastName"] == .attribute(.string(try people.compactMap { try $0.value(forKey: "name").stringValue }.max() ?? "")))
            let middle = ages.count / 2
            let median = ages.count % 2 == 1 ? Double(ages[middle]) : Double(ages[middle - 1] + ages[middle]) / 2
            #expect(row["medianAge"] == .attribute(.double(median)))
            let spread = (salaries.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / Double(salaries.count)).squareRoot()
            #expect(row["spread"] == .attribute(.double(spread)))
        }
    }

    @Test func havingFiltersGroupsByResultNames() throws {
        let (stack, _) = try FetchGraph.make()
        var fetch = request(["department.name", .aggregate(.sum, of: "salary", as: "payroll")], groupBy: ["department.name"])
        fetch.havingPredicate = try FetchPredicate(format: "payroll > 100")
        #expect(try stack.context().fetchDictionaries(fetch).map { $0["department.name"] } == [.attribute("Engineering"), .attribute("Sales")])
        fetch.havingPredicate = try FetchPredicate(format: "$payroll > 130 AND department.name != nil")
        #expect(try stack.context().fetchDictionaries(fetch).map { $0["department.name"] } == [.attribute("Sales")])
    }

    /// InMemoryStore computes dictionary results itself; DictionaryStore declares no
    /// capabilities, so the coordinator sends it a plain fetch and emulates the rest.
    @Test(arguments: allStoreFixtures)
    func everyStoreGivesTheSameGroupedResults(fixture: any StoreFixture) throws {
        let (stack, _) = try FetchGraph.make(in: fixture)
        var fetch = request([
            "department.name", .aggregate(.average, of: "projects.budget", as: "meanBudget"),
            .expression(FetchExpressionDescription(name: "most", expression: .function(.max, [.keyPath("projects.@count")]))),
        ], groupBy: ["department.name"])
        fetch.predicate = try FetchPredicate(format: "age > 20")
        fetch.havingPredicate = try FetchPredicate(format: "most >= 1")
        fetch.sortDescriptors = [FetchSortDescriptor(keyPath: "meanBudget", ascending: false)]
        #expect(fetch.requiredCapabilities == [.grouping])
        #expect(try stack.context().fetchDictionaries(fetch) == [
            ["department.name": .null, "meanBudget": .attribute(.double(500)), "most": .attribute(.int64(1))],
            ["department.name": .attribute("Engineering"), "meanBudget": .attribute(.double(350)), "most": .attribute(.int64(2))],
            ["department.name": .attribute("Sales"), "meanBudget": .attribute(.double(200)), "most": .attribute(.int64(1))],
        ])
        let counted = request([
            "department.name", .expression(FetchExpressionDescription(name: "people", expression: .function(.count, [.evaluatedObject]))),
        ], groupBy: ["department.name"])
        #expect(try stack.context().fetchDictionaries(counted).map { $0["people"] } == [2, 2, 2].map { .attribute(.int64($0)) })
        var distinct = request(["manager.name"])
        distinct.returnsDistinctResults = true
        distinct.sortDescriptors = [FetchSortDescriptor(keyPath: "manager.name")]
        #expect(distinct.requiredCapabilities == [.distinct])
        #expect(try stack.context().fetchDictionaries(distinct).map { $0["manager.name"] } == [.null, .attribute("Ada"), .attribute("Bob"), .attribute("Zoë")])
    }

    @Test func groupsSortByAggregateNames() throws {
        let (stack, _) = try FetchGraph.make()
        var fetch = request(["department.name", .aggregate(.count, of: "name", as: "headcount")], groupBy: ["department.name"])
        fetch.sortDescriptors = [FetchSortDescriptor(keyPath: "headcount", ascending: false), FetchSortDescriptor(keyPath: "department.name")]
        let rows = try stack.context().fetchDictionaries(fetch)
        #expect(rows.map { $0["department.name"] } == [.null, .attribute("Engineering"), .attribute("Sales")])
        #expect(rows.map { $0["headcount"] } == [2, 2, 2].map { .attribute(.int64($0)) })
        fetch.fetchLimit = 1
        fetch.fetchOffset = 1
        #expect(try stack.context().fetchDictionaries(fetch).map { $0["department.name"] } == [.attribute("Engineering")])
    }

    @Test func aggregatesWithoutGroupingGiveOneRow() throws {
        let (stack, _) = try FetchGraph.make()
        var fetch = request([.aggregate(.sum, of: "age", as: "years", type: .double), .aggregate(.count, of: "age", as: "n")])
        fetch.predicate = try FetchPredicate(format: "age > 30")
        #expect(try stack.context().fetchDictionaries(fetch) == [["years": .attribute(.double(147)), "n": .attribute(.int64(3))]])
        fetch.predicate = .value(false)
        let empty = try stack.context().fetchDictionaries(fetch)
        #expect(empty == [["years": .attribute(.double(0)), "n": .attribute(.int64(0))]], "SQL-like: one row over no rows")
        fetch.propertiesToFetch = [.aggregate(.average, of: "age", as: "mean")]
        #expect(try stack.context().fetchDictionaries(fetch) == [["mean": .null]])
    }

    @Test func distinctDropsRepeatedDictionaries() throws {
        let (stack, _) = try FetchGraph.make()
        var fetch = request(["active"])
        fetch.returnsDistinctResults = true
        fetch.sortDescriptors = [FetchSortDescriptor(keyPath: "active")]
        #expect(try stack.context().fetchDictionaries(fetch).map { $0["active"] } == [.null, .attribute(false), .attribute(true)])
        fetch.returnsDistinctResults = false
        #expect(try stack.context().fetchDictionaries(fetch).count == 6)
    }

    @Test func plainAndToOnePropertiesAndExpressions() throws {
        let (stack, ids) = try FetchGraph.make()
        var fetch = request([
            "name", "department", "manager.name",
            .expression(FetchExpressionDescription(name: "projectCount", expression: .keyPath("projects.@count"))),
        ])
        fetch.predicate = try FetchPredicate(format: "name == 'Bob'")
        let rows = try stack.context().fetchDictionaries(fetch)
        #expect(rows == [[
            "name": .attribute("Bob"), "department": .object(try #require(ids["Sales"])),
            "manager.name": .attribute("Ada"), "projectCount": .attribute(.int64(1)),
        ]])
    }

    @Test func ungroupedPropertiesAndDuplicateNamesAreRejected() throws {
        let (stack, _) = try FetchGraph.make()
        let context = stack.context()
        let ungrouped = request(["name", .aggregate(.sum, of: "salary", as: "payroll")])
        #expect(throws: ObjectGraphError.self) { _ = try context.fetchDictionaries(ungrouped) }
        let duplicate = request(["name", .aggregate(.count, of: "age", as: "name")], groupBy: ["name"])
        #expect(throws: ObjectGraphError.self) { _ = try context.fetchDictionaries(duplicate) }
        var having = request(["name"])
        having.havingPredicate = .value(true)
        #expect(throws: ObjectGraphError.self) { _ = try context.fetchDictionaries(having) }
    }

    @Test func countResultHonoursPredicateOffsetAndLimit() throws {
        let (stack, _) = try FetchGraph.make()
        var fetch = FetchRequest(entityName: "Person")
        fetch.predicate = try FetchPredicate(format: "ANY projects.tags.name == 'core'")
        #expect(try stack.context().count(for: fetch) == 4)
        fetch.fetchOffset = 1
        fetch.fetchLimit = 2
        #expect(try stack.context().count(for: fetch) == 2)
    }

    @Test func emulationRunsOnAnyEvaluableRows() throws {
        let (stack, _) = try FetchGraph.make()
        let entity = try stack.coordinator.managedObjectModel.entity(named: "Person")
        let rows: [[String: AttributeValue]] = [
            ["name": "a", "age": 3], ["name": "b", "age": 5], ["name": "a", "age": 4], ["name": "b", "age": .null],
        ]
        var fetch = FetchRequest(entity: entity)
        fetch.resultType = .dictionary
        fetch.propertiesToFetch = ["name", .aggregate(.sum, of: "age", as: "total"), .aggregate(.count, of: "age", as: "scored")]
        fetch.propertiesToGroupBy = ["name"]
        fetch.sortDescriptors = [FetchSortDescriptor(keyPath: "total", ascending: false)]
        guard case .dictionaries(let result) = try fetch.apply(to: rows, objectID: { _ in ManagedObjectID.temporary(for: entity) }) else {
            Issue.record("not dictionaries")
            return
        }
        #expect(result == [
            ["name": .attribute("a"), "total": .attribute(.int64(7)), "scored": .attribute(.int64(2))],
            ["name": .attribute("b"), "total": .attribute(.int64(5)), "scored": .attribute(.int64(1))],
        ])
    }

    @Test func collectionOperatorsAndFunctionsEvaluateAsExpressions() throws {
        let values: [String: AttributeValue] = ["x": 1]
        #expect(try FetchExpression(format: "sum:({1, 2, 3.5})").evaluate(with: values) == .attribute(.double(6.5)))
        #expect(try FetchExpression(format: "count:({1, nil, 3})").evaluate(with: values) == .attribute(.int64(2)))
        #expect(try FetchExpression(format: "average:({%@, %@})", Decimal(1), Decimal(2)).evaluate(with: values) == .attribute(.decimal(Decimal(string: "1.5") ?? 0)))
        #expect(try FetchExpression(format: "{3, 1, 2}[LAST]").evaluate(with: values) == .attribute(.int64(2)))
        #expect(try FetchExpression(format: "{3, 1, 2}[0]").evaluate(with: values) == .attribute(.int64(3)))
        #expect(try FetchExpression(format: "{3, 1, 2}[7]").evaluate(with: values) == .null)
        #expect(try FetchExpression(format: "sum:({%@, 1})", Int64.max).evaluate(with: values) == .attribute(.double(Double(Int64.max) + 1)), "overflow falls back to doubles")
    }
}
