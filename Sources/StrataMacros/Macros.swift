@_exported import ObjectGraph

/// Declares a `ManagedObject` subclass as an entity, once: each stored `var` is a property
/// of the entity, named as the Swift property and typed by its Swift type.
///
/// ```swift
/// @Entity final class Author: ManagedObject {
///     @Attribute(.indexed) var name: String = ""
///     var born: Date?
///     @Relationship(inverse: \Book.author, deleteRule: .cascade) var books: Set<Book>
/// }
///
/// @Entity final class Book: ManagedObject {
///     var title: String = ""
///     var pages: Int32?
///     var author: Author?
/// }
///
/// let model = try ManagedObjectModel(types: [Author.self, Book.self])
/// ```
///
/// A type that `TypedAttributeValue` covers (numbers, `Bool`, `String`, `Date`, `Data`,
/// `UUID`, `URL`, `Decimal`) is an attribute, optional when the type is an `Optional`, with
/// the property's initial value as its default; an optional of an entity type is a to-one
/// relationship; a `Set` of one an unordered to-many and an array an ordered one. Any other
/// `Codable` type (`[String]`, a struct, an enum) is a transformable attribute, its values
/// stored encoded: a required one needs an initial value (the model refuses it without), and
/// fetches neither filter nor sort by it. A type that is none of these does not compile. The property becomes computed: it reads and writes the object's
/// value under the property's own name, so a key cannot be misspelled. `@Attribute` and `@Relationship` add indexes, uniqueness, Core Data transient
/// properties, inverses, delete rules and renaming identifiers; `@Transient` leaves a
/// property out of the entity (a plain Swift stored property). `originalName` is the entity's
/// renaming identifier; `uniqueness` lists uniqueness constraints of several attributes by
/// name (`[["title", "year"]]`: a macro's arguments cannot name the members it makes, so these
/// are checked when the model is built; one attribute's is `@Attribute(.unique)`). The class adopts `EntityType` and `FetchableEntity`, so Foundation's
/// `#Predicate` over it fetches through the store's indexes.
///
/// A class that inherits another `@Entity` class is its subentity, with the properties it
/// declares itself (and every property of its superclass); list both types in
/// `ManagedObjectModel(types:)`. An entity class inherits `ManagedObject` or another entity
/// class.
@attached(
    member, names: named(entityName), named(fetchKey(for:)), named(entityProperties), named(entityOriginalName),
    named(entitySuperclass), named(entityUniquenessConstraints), arbitrary)
@attached(memberAttribute)
// Both protocols are listed: the compiler expands the conformance extension when a
// conformance to a listed protocol is looked up, and `FetchableEntity` is looked up alone
// (typed fetches ask for it), so naming only `EntityType` left it unfound in some orders.
@attached(extension, conformances: EntityType, FetchableEntity)
public macro Entity(originalName: String? = nil, uniqueness: [[String]] = []) =
    #externalMacro(module: "StrataMacrosPlugin", type: "EntityMacro")

/// Makes a stored property of an `@Entity` class read and write the object's value (added by
/// `@Entity`; not written by hand).
@attached(accessor, names: named(init), named(get), named(set))
public macro _EntityProperty() = #externalMacro(module: "StrataMacrosPlugin", type: "EntityPropertyMacro")

/// An attribute's options (`.indexed`, `.unique`, `.transient`) and its name in the model
/// version before (its renaming identifier), for a property of an `@Entity` class.
@attached(peer)
public macro Attribute(_ options: PropertyOption..., originalName: String? = nil) =
    #externalMacro(module: "StrataMacrosPlugin", type: "AnnotationMacro")

/// A relationship's inverse (a key path of the destination type, declared on one side only),
/// delete rule and name in the model version before, for a property of an `@Entity` class.
@attached(peer)
public macro Relationship(inverse: AnyKeyPath? = nil, deleteRule: DeleteRule = .nullify, originalName: String? = nil) =
    #externalMacro(module: "StrataMacrosPlugin", type: "AnnotationMacro")

/// Leaves a stored property of an `@Entity` class out of the entity: a plain Swift stored
/// property of the object, never in the model or the store.
@attached(peer)
public macro Transient() = #externalMacro(module: "StrataMacrosPlugin", type: "AnnotationMacro")
