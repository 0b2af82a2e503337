import SwiftCompilerPlugin
import SwiftDiagnostics
import SwiftSyntax
import SwiftSyntaxBuilder
import SwiftSyntaxMacros

@main
struct StrataMacrosPlugin: CompilerPlugin {
    let providingMacros: [Macro.Type] = [EntityMacro.self, EntityPropertyMacro.self, AnnotationMacro.self]
}

/// An error or warning at a node of the declaration.
struct EntityDiagnostic: DiagnosticMessage {
    let message: String
    var diagnosticID: MessageID { MessageID(domain: "StrataMacros", id: message) }
    var severity: DiagnosticSeverity { .error }
}

/// A stored property of an `@Entity` class that is one of the entity's properties.
struct EntityProperty {
    let name: String
    let type: TypeSyntax
    let initializer: ExprSyntax?
    /// `@Attribute(…)`'s arguments, if any.
    let attribute: AttributeSyntax?
    /// `@Relationship(…)`'s arguments, if any.
    let relationship: AttributeSyntax?

    /// The property of `declaration`, or `nil` for a member that is not one (a computed or
    /// static property, a `@Transient` one, anything but a variable). Problems with a
    /// property that looks like one are diagnosed (once: by the member expansion).
    static func of(_ declaration: some SyntaxProtocol, in context: some MacroExpansionContext, diagnosing: Bool = true) -> EntityProperty? {
        guard let variable = declaration.as(VariableDeclSyntax.self) else { return nil }
        if variable.modifiers.contains(where: { ["static", "class", "lazy"].contains($0.name.text) }) { return nil }
        var attribute: AttributeSyntax?, relationship: AttributeSyntax?
        for element in variable.attributes {
            guard let node = element.as(AttributeSyntax.self) else { continue }
            switch node.attributeName.trimmedDescription {
            case "Transient": return nil
            case "Attribute": attribute = node
            case "Relationship": relationship = node
            case "_EntityProperty": continue
            default:
                // A property wrapper or another attribute: the property is the wrapper's.
                return nil
            }
        }
        guard variable.bindings.count == 1, let binding = variable.bindings.first,
            let pattern = binding.pattern.as(IdentifierPatternSyntax.self)
        else {
            if diagnosing {
                context.diagnose(Diagnostic(node: variable, message: EntityDiagnostic(
                    message: "@Entity properties are declared one per 'var', each with a name")))
            }
            return nil
        }
        if let accessors = binding.accessorBlock {
            // Computed: not stored, not the entity's.
            if case .getter = accessors.accessors { return nil }
            if case .accessors(let list) = accessors.accessors {
                if list.contains(where: { ["get", "set", "_read", "_modify", "unsafeAddress"].contains($0.accessorSpecifier.text) }) { return nil }
                // Observers would never run: the value lives in the object, not here.
                if list.contains(where: { ["willSet", "didSet"].contains($0.accessorSpecifier.text) }) {
                    if diagnosing {
                        context.diagnose(Diagnostic(node: accessors, message: EntityDiagnostic(
                            message: "@Entity property '\(pattern.identifier.text)' cannot have willSet or didSet; observe the object's changes instead, or mark it @Transient")))
                    }
                    return nil
                }
            }
        }
        guard variable.bindingSpecifier.text == "var" else {
            if diagnosing {
                context.diagnose(Diagnostic(node: variable.bindingSpecifier, message: EntityDiagnostic(
                    message: "@Entity properties are variables: declare '\(pattern.identifier.text)' with 'var', or mark it @Transient")))
            }
            return nil
        }
        guard let type = binding.typeAnnotation?.type else {
            if diagnosing {
                context.diagnose(Diagnostic(node: binding, message: EntityDiagnostic(
                    message: "@Entity property '\(pattern.identifier.text)' needs an explicit type: its type decides what it stores")))
            }
            return nil
        }
        return EntityProperty(
            name: pattern.identifier.text, type: type.trimmed, initializer: binding.initializer?.value.trimmed,
            attribute: attribute, relationship: relationship)
    }

    /// The `PropertySchema` entry that declares the property.
    var schemaEntry: String {
        var arguments = ["\"\(name)\"", "\(type.trimmedDescription).self"]
        if let initializer { arguments.append("default: \(initializer.trimmedDescription)") }
        var options: [String] = []
        var originalName: String?
        for argument in Self.arguments(of: attribute) {
            if argument.label?.text == "originalName" { originalName = argument.expression.trimmedDescription } else {
                options.append(argument.expression.trimmedDescription)
            }
        }
        if !options.isEmpty { arguments.append("options: [\(options.joined(separator: ", "))]") }
        for argument in Self.arguments(of: relationship) {
            switch argument.label?.text {
            case "inverse":
                if let name = Self.lastComponent(of: argument.expression) { arguments.append("inverse: \"\(name)\"") }
            case "deleteRule": arguments.append("deleteRule: \(argument.expression.trimmedDescription)")
            case "originalName": originalName = argument.expression.trimmedDescription
            default: continue
            }
        }
        if let originalName { arguments.append("originalName: \(originalName)") }
        return ".property(\(arguments.joined(separator: ", ")))"
    }

    static func arguments(of attribute: AttributeSyntax?) -> [LabeledExprSyntax] {
        guard let attribute, case .argumentList(let list) = attribute.arguments else { return [] }
        return Array(list)
    }

    /// The property a key path expression (`\Book.author`) ends with.
    static func lastComponent(of expression: ExprSyntax) -> String? {
        guard let keyPath = expression.as(KeyPathExprSyntax.self),
            let last = keyPath.components.last?.component.as(KeyPathPropertyComponentSyntax.self)
        else { return nil }
        return last.declName.baseName.text
    }
}

/// `@Entity`: the entity's description, its fetch names and `EntityType` conformance, from the
/// class's stored properties; each of them gets `@_EntityProperty`.
public struct EntityMacro: MemberMacro, MemberAttributeMacro, ExtensionMacro {
    public static func expansion(
        of node: AttributeSyntax, providingMembersOf declaration: some DeclGroupSyntax, conformingTo protocols: [TypeSyntax],
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        guard let classDecl = declaration.as(ClassDeclSyntax.self) else {
            context.diagnose(Diagnostic(node: node, message: EntityDiagnostic(message: "@Entity applies to a class that inherits from ManagedObject")))
            return []
        }
        let className = classDecl.name.text
        let properties = classDecl.memberBlock.members.compactMap { EntityProperty.of($0.decl, in: context) }
        let superclass = classDecl.inheritanceClause?.inheritedTypes.first?.type.trimmedDescription ?? "ManagedObject"
        // A class inheriting another `@Entity` class is its subentity: its members override.
        let isRoot = ["ManagedObject", "ObjectGraph.ManagedObject"].contains(superclass)
        // A public (or open) class's entity members are public, as its conformance needs.
        let access = classDecl.modifiers.contains { ["public", "open"].contains($0.name.text) } ? "public " : ""
        let override = access + (isRoot ? "" : "override ")
        var originalName = "nil"
        var uniqueness: [[String]] = []
        for argument in EntityProperty.arguments(of: node) {
            switch argument.label?.text {
            case "originalName": originalName = argument.expression.trimmedDescription
            case "uniqueness":
                // `[["title", "year"], …]`: each constraint's attribute names.
                for constraint in argument.expression.as(ArrayExprSyntax.self)?.elements ?? [] {
                    let names = (constraint.expression.as(ArrayExprSyntax.self)?.elements ?? []).compactMap {
                        $0.expression.as(StringLiteralExprSyntax.self)?.representedLiteralValue
                    }
                    if !names.isEmpty { uniqueness.append(names) }
                }
            default: continue
            }
        }
        let keys = properties.map { "(\\R.\($0.name), \"\($0.name)\")" }
        let inherited = isRoot ? "" : "\(superclass).\(keysFunction(superclass))(of: R.self) + "
        let entries = properties.map(\.schemaEntry)
        return [
            "\(raw: override)class var entityName: String { \(literal: className) }",
            """
            \(raw: access)static func \(raw: keysFunction(className))<R: \(raw: className)>(of root: R.Type) -> [(AnyKeyPath, String)] {
                \(raw: inherited)[\(raw: keys.joined(separator: ", "))]
            }
            """,
            """
            \(raw: override)class func fetchKey(for keyPath: AnyKeyPath) -> String? {
                \(raw: keysFunction(className))(of: \(raw: className).self).first { $0.0 == keyPath }?.1
            }
            """,
            """
            \(raw: override)class var entityProperties: [PropertySchema] {
                [\(raw: entries.isEmpty ? "" : "\n" + entries.joined(separator: ",\n") + ",\n")]
            }
            """,
            "\(raw: override)class var entityOriginalName: String? { \(raw: originalName) }",
            "\(raw: override)class var entitySuperclass: AnyClass { \(raw: superclass).self }",
            """
            \(raw: override)class var entityUniquenessConstraints: [[String]] { [\(raw: uniqueness.map { "[" + $0.map { "\"\($0)\"" }.joined(separator: ", ") + "]" }.joined(separator: ", "))] }
            """,
        ]
    }

    /// The name of the static function that lists a class's key paths and property names
    /// (its superclass's first), generic over the class, so that a subclass's key paths to
    /// inherited properties name them too.
    static func keysFunction(_ className: String) -> String {
        "_" + String(className.map { $0.isLetter || $0.isNumber ? $0 : "_" }) + "EntityKeys"
    }

    public static func expansion(
        of node: AttributeSyntax, attachedTo declaration: some DeclGroupSyntax, providingAttributesFor member: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [AttributeSyntax] {
        guard declaration.is(ClassDeclSyntax.self), EntityProperty.of(member, in: context, diagnosing: false) != nil else { return [] }
        return ["@_EntityProperty"]
    }

    public static func expansion(
        of node: AttributeSyntax, attachedTo declaration: some DeclGroupSyntax, providingExtensionsOf type: some TypeSyntaxProtocol,
        conformingTo protocols: [TypeSyntax], in context: some MacroExpansionContext
    ) throws -> [ExtensionDeclSyntax] {
        // A subentity's class conforms through its superclass already.
        guard declaration.is(ClassDeclSyntax.self), !protocols.isEmpty else { return [] }
        return [try ExtensionDeclSyntax("extension \(type.trimmed): \(raw: protocols.map(\.trimmedDescription).joined(separator: ", ")) {}")]
    }
}

/// `@_EntityProperty`: a stored property becomes computed over the object's value for its
/// name; an initial value is the attribute's default (the model's), not stored here.
public struct EntityPropertyMacro: AccessorMacro {
    public static func expansion(
        of node: AttributeSyntax, providingAccessorsOf declaration: some DeclSyntaxProtocol, in context: some MacroExpansionContext
    ) throws -> [AccessorDeclSyntax] {
        guard let variable = declaration.as(VariableDeclSyntax.self), let binding = variable.bindings.first,
            let name = binding.pattern.as(IdentifierPatternSyntax.self)?.identifier.text
        else { return [] }
        var accessors: [AccessorDeclSyntax] = []
        if binding.initializer != nil { accessors.append("init(initialValue) {}") }
        accessors.append("get { _entityValue(forKey: \(literal: name)) }")
        accessors.append("set { _setEntityValue(newValue, forKey: \(literal: name)) }")
        return accessors
    }
}

/// `@Attribute`, `@Relationship`, `@Transient`: markers `@Entity` reads; they add nothing.
public struct AnnotationMacro: PeerMacro {
    public static func expansion(
        of node: AttributeSyntax, providingPeersOf declaration: some DeclSyntaxProtocol, in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        []
    }
}
