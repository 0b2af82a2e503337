import StrataMacrosPlugin
import SwiftSyntaxMacroExpansion
import SwiftSyntaxMacrosGenericTestSupport
import Testing

/// What `@Entity` writes, and what it refuses, at compile time.
@Suite struct EntityMacroExpansionTests {
    static let macros: [String: MacroSpec] = [
        "Entity": MacroSpec(type: EntityMacro.self, conformances: ["EntityType", "FetchableEntity"]), "_EntityProperty": MacroSpec(type: EntityPropertyMacro.self),
        "Attribute": MacroSpec(type: AnnotationMacro.self), "Relationship": MacroSpec(type: AnnotationMacro.self),
        "Transient": MacroSpec(type: AnnotationMacro.self),
    ]

    static func fail(_ spec: TestFailureSpec) {
        Issue.record(
            Comment(rawValue: spec.message),
            sourceLocation: SourceLocation(
                fileID: spec.location.fileID, filePath: spec.location.filePath, line: spec.location.line, column: spec.location.column))
    }

    @Test func storedPropertiesBecomeTheEntitysProperties() {
        assertMacroExpansion(
            """
            @Entity final class Book: ManagedObject {
                @Attribute(.indexed, originalName: "name") var title: String = ""
                @Relationship(inverse: \\Author.books, deleteRule: .cascade) var author: Author?
                @Transient var cache = 0
                var shout: String { title }
            }
            """,
            expandedSource: """
                final class Book: ManagedObject {
                    var title: String {
                        init(initialValue) {
                        }
                        get {
                            _entityValue(forKey: "title")
                        }
                        set {
                            _setEntityValue(newValue, forKey: "title")
                        }
                    }
                    var author: Author? {
                        get {
                            _entityValue(forKey: "author")
                        }
                        set {
                            _setEntityValue(newValue, forKey: "author")
                        }
                    }
                    var cache = 0
                    var shout: String { title }

                    class var entityName: String {
                        "Book"
                    }

                    static func _BookEntityKeys<R: Book>(of root: R.Type) -> [(AnyKeyPath, String)] {
                        [(\\R.title, "title"), (\\R.author, "author")]
                    }

                    class func fetchKey(for keyPath: AnyKeyPath) -> String? {
                        _BookEntityKeys(of: Book.self).first {
                            $0.0 == keyPath
                        }?.1
                    }

                    class var entityProperties: [PropertySchema] {
                        [
                            .property("title", String.self, default: "", options: [.indexed], originalName: "name"),
                            .property("author", Author?.self, inverse: "books", deleteRule: .cascade),
                        ]
                    }

                    class var entityOriginalName: String? {
                        nil
                    }

                    class var entitySuperclass: AnyClass {
                        ManagedObject.self
                    }

                    class var entityUniquenessConstraints: [[String]] {
                        []
                    }
                }

                extension Book: EntityType, FetchableEntity {
                }
                """,
            macroSpecs: Self.macros, failureHandler: Self.fail)
    }

    // A constant or an untyped property cannot be an entity's; `@Entity` needs a class.
    @Test func whatCannotBeAPropertyIsAnError() {
        assertMacroExpansion(
            """
            @Entity final class Book: ManagedObject {
                let title: String = ""
                var pages = 3
            }
            """,
            expandedSource: """
                final class Book: ManagedObject {
                    let title: String = ""
                    var pages = 3

                    class var entityName: String {
                        "Book"
                    }

                    static func _BookEntityKeys<R: Book>(of root: R.Type) -> [(AnyKeyPath, String)] {
                        []
                    }

                    class func fetchKey(for keyPath: AnyKeyPath) -> String? {
                        _BookEntityKeys(of: Book.self).first {
                            $0.0 == keyPath
                        }?.1
                    }

                    class var entityProperties: [PropertySchema] {
                        []
                    }

                    class var entityOriginalName: String? {
                        nil
                    }

                    class var entitySuperclass: AnyClass {
                        ManagedObject.self
                    }

                    class var entityUniquenessConstraints: [[String]] {
                        []
                    }
                }

                extension Book: EntityType, FetchableEntity {
                }
                """,
            diagnostics: [
                DiagnosticSpec(message: "@Entity properties are variables: declare 'title' with 'var', or mark it @Transient", line: 2, column: 5),
                DiagnosticSpec(message: "@Entity property 'pages' needs an explicit type: its type decides what it stores", line: 3, column: 9),
            ],
            macroSpecs: Self.macros, failureHandler: Self.fail)
        assertMacroExpansion(
            "@Entity struct Book {}",
            expandedSource: "struct Book {}",
            diagnostics: [DiagnosticSpec(message: "@Entity applies to a class that inherits from ManagedObject", line: 1, column: 1)],
            macroSpecs: Self.macros, failureHandler: Self.fail)
    }

    // Observers would never run and two names in one declaration are ambiguous: both are errors.
    @Test func observersAndSharedDeclarationsAreErrors() {
        assertMacroExpansion(
            """
            @Entity final class Book: ManagedObject {
                var title: String = "" { didSet {} }
                var a: Int = 0, b: Int = 0
            }
            """,
            expandedSource: """
                final class Book: ManagedObject {
                    var title: String = "" { didSet {} }
                    var a: Int = 0, b: Int = 0

                    class var entityName: String {
                        "Book"
                    }

                    static func _BookEntityKeys<R: Book>(of root: R.Type) -> [(AnyKeyPath, String)] {
                        []
                    }

                    class func fetchKey(for keyPath: AnyKeyPath) -> String? {
                        _BookEntityKeys(of: Book.self).first {
                            $0.0 == keyPath
                        }?.1
                    }

                    class var entityProperties: [PropertySchema] {
                        []
                    }

                    class var entityOriginalName: String? {
                        nil
                    }

                    class var entitySuperclass: AnyClass {
                        ManagedObject.self
                    }

                    class var entityUniquenessConstraints: [[String]] {
                        []
                    }
                }

                extension Book: EntityType, FetchableEntity {
                }
                """,
            diagnostics: [
                DiagnosticSpec(
                    message: "@Entity property 'title' cannot have willSet or didSet; observe the object's changes instead, or mark it @Transient",
                    line: 2, column: 28),
                DiagnosticSpec(message: "@Entity properties are declared one per 'var', each with a name", line: 3, column: 5),
            ],
            macroSpecs: Self.macros, failureHandler: Self.fail)
    }

    // A subclass of an entity class is its subentity: its members override, its key paths
    // list the superclass's first, and it conforms through its superclass (no extension).
    @Test func aSubclassOfAnEntityIsASubentity() {
        var macros = Self.macros
        macros["Entity"] = MacroSpec(type: EntityMacro.self, conformances: [])
        assertMacroExpansion(
            """
            @Entity final class Epic: Novel {
                var cantos: Int16 = 12
            }
            """,
            expandedSource: """
                final class Epic: Novel {
                    var cantos: Int16 {
                        init(initialValue) {
                        }
                        get {
                            _entityValue(forKey: "cantos")
                        }
                        set {
                            _setEntityValue(newValue, forKey: "cantos")
                        }
                    }

                    override class var entityName: String {
                        "Epic"
                    }

                    static func _EpicEntityKeys<R: Epic>(of root: R.Type) -> [(AnyKeyPath, String)] {
                        Novel._NovelEntityKeys(of: R.self) + [(\\R.cantos, "cantos")]
                    }

                    override class func fetchKey(for keyPath: AnyKeyPath) -> String? {
                        _EpicEntityKeys(of: Epic.self).first {
                            $0.0 == keyPath
                        }?.1
                    }

                    override class var entityProperties: [PropertySchema] {
                        [
                            .property("cantos", Int16.self, default: 12),
                        ]
                    }

                    override class var entityOriginalName: String? {
                        nil
                    }

                    override class var entitySuperclass: AnyClass {
                        Novel.self
                    }

                    override class var entityUniquenessConstraints: [[String]] {
                        []
                    }
                }
                """,
            macroSpecs: macros, failureHandler: Self.fail)
    }
}
