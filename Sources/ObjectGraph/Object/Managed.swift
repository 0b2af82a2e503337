import Foundation

/// A typed, stored attribute of a ``ManagedObject`` subclass.
///
/// For example:
///
/// ```swift
/// final class Person: ManagedObject {
///     @Managed("name") var name: String?
///     @Managed("age") var age: Int16?
/// }
/// person.name = "Ada"
/// ```
///
/// A model built with the class as an entity's class refuses a key the entity does not
/// have (``ManagedObjectModel/init(entities:configurations:versionIdentifiers:)``), so a
/// misspelled key is an error when the model is built, not a write that goes nowhere.
///
/// Property accessors cannot throw. When reading fails (the object's row is gone from
/// its store, or the attribute holds another type) the property reads as `nil` and
/// ``ManagedObject/lastAccessError`` says why; when writing fails the value is unchanged
/// and ``ManagedObject/lastAccessError`` says why. Use ``ManagedObject/value(forKey:as:)``
/// and ``ManagedObject/setValue(_:forKey:)-(AttributeValue,_)`` to get the error thrown.
@propertyWrapper
public struct Managed<Value: AttributeValueConvertible & ExpressibleByNilLiteral> {
    /// The attribute's name in the entity.
    public let key: String

    /// Declares the property for the named attribute.
    public init(_ key: String) { self.key = key }

    // Impossible state: the declaration is unavailable, so no code can call it; Swift
    // requires it to exist and routes every access through the subscript below.
    /// Not available: the property is reached through its enclosing object.
    @available(*, unavailable, message: "@Managed can only be used on properties of ManagedObject subclasses")
    public var wrappedValue: Value {
        get { preconditionFailure("unreachable: the enclosing-instance subscript is always used") }
        set { preconditionFailure("unreachable: the enclosing-instance subscript is always used") }
    }

    /// Reads and writes the attribute through the enclosing object.
    public static subscript<Owner: ManagedObject>(
        _enclosingInstance object: Owner,
        wrapped wrappedKeyPath: ReferenceWritableKeyPath<Owner, Value>,
        storage storageKeyPath: ReferenceWritableKeyPath<Owner, Managed<Value>>
    ) -> Value {
        get {
            let key = object[keyPath: storageKeyPath].key
            do {
                return try object.value(forKey: key, as: Value.self)
            } catch let error as ObjectGraphError {
                object.lastAccessError = error
                return nil
            } catch {
                return nil
            }
        }
        set {
            let key = object[keyPath: storageKeyPath].key
            do {
                try object.setValue(newValue.attributeValue, forKey: key)
            } catch let error as ObjectGraphError {
                object.lastAccessError = error
            } catch {}
        }
    }
}

/// A `@Managed` property's key, read off an object's stored properties by the model's check.
protocol ManagedKeyed {
    var key: String { get }
}

extension Managed: ManagedKeyed {}
