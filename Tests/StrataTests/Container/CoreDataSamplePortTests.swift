import Foundation
import Strata
import Testing

/// A Core Data application's usual shape, ported to Strata: a persistent container, a
/// background import through `performBackgroundTask`, a view context that merges saves
/// automatically, and an edit sheet on a child context that is saved or discarded.
///
/// The Core Data original differs by names only: `NSPersistentContainer` →
/// `PersistentContainer`, `NSPersistentStoreDescription` → `PersistentStoreDescription`,
/// `NSManagedObjectContext` → `ManagedObjectContext`, `NSManagedObject` → `ManagedObject`,
/// `NSFetchRequest` → `FetchRequest`, `@NSManaged var title: String?` →
/// `@Managed("title") var title: String?`. Two spellings differ beyond a rename, until typed
/// models land (issue 18): a generic `NSFetchRequest<Note>` is
/// `context.fetch(FetchRequest(entityName: "Note"), as: Note.self)`, and key-value calls
/// (`setValue(_:forKey:)`) and `Note(context:)` throw, so they take a `try`.
@Suite("A Core Data sample, ported")
struct CoreDataSamplePortTests {
    /// The sample's data controller (Apple's templates call it `PersistenceController`).
    final class DataController: Sendable {
        let container: PersistentContainer

        init(storeURL: URL) throws {
            container = PersistentContainer(name: "Notes", managedObjectModel: try NotesModel.make())
            container.persistentStoreDescriptions.first?.url = storeURL
            var loadError: (any Error)?
            container.loadPersistentStores { _, error in loadError = error }
            if let loadError { throw loadError }
            container.viewContext.automaticallyMergesChangesFromParent = true
            container.viewContext.name = "viewContext"
        }

        /// Imports notes off the main queue, as a network refresh would.
        func importNotes(_ titles: [String], into folderName: String) async throws {
            try await container.performBackgroundTask { context in
                let folder = try context.insertNewObject(forEntityName: "Folder")
                try folder.setValue(folderName, forKey: "name")
                for title in titles {
                    let note = try Note(context: context)
                    note.title = title
                    note.created = Date(timeIntervalSince1970: 1_700_000_000)
                    try note.setValue(folder, forKey: "folder")
                }
                try context.save()
            }
        }

        /// An edit sheet: a child of the view context, so nothing reaches the view context
        /// unless the sheet is saved.
        func makeEditingContext() -> ManagedObjectContext {
            let context = ManagedObjectContext(concurrencyType: .mainQueueConcurrencyType)
            context.parent = container.viewContext
            context.name = "editSheet"
            return context
        }
    }

    @Test func theSampleImportsEditsInASheetAndSaves() async throws {
        let directory = FileManager.default.temporaryDirectory.appending(path: "sample-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let controller = try DataController(storeURL: directory.appending(path: "Notes.strata"))
        let view = controller.container.viewContext

        // The list screen shows the notes of the view context.
        let before = try await view.perform { try view.count(for: FetchRequest(entityName: "Note")) }
        #expect(before == 0)

        try await controller.importNotes(["Groceries", "Dentist", "Taxes"], into: "Inbox")
        let listed = try await view.perform {
            var request = FetchRequest(entityName: "Note")
            request.sortDescriptors = [FetchSortDescriptor(keyPath: "title")]
            return try view.fetch(request, as: Note.self).map { $0.title ?? "" }
        }
        #expect(listed == ["Dentist", "Groceries", "Taxes"], "the import reached the view context")

        // The sheet edits one note; cancelling it leaves everything as it was.
        let dentistID = try await view.perform {
            var request = FetchRequest(entityName: "Note")
            request.predicate = .equal("title", "Dentist")
            return try view.fetch(request).first?.objectID
        }
        let noteID = try #require(dentistID)
        let cancelled = controller.makeEditingContext()
        try await cancelled.perform {
            let note = try #require(try cancelled.existingObject(with: noteID) as? Note)
            note.title = "Dentist (moved)"
        }
        let afterCancel = try await view.perform { try (view.existingObject(with: noteID) as? Note)?.title }
        #expect(afterCancel == "Dentist")

        // Saved, the sheet's edit reaches the view context, whose save reaches the store.
        let sheet = controller.makeEditingContext()
        try await sheet.perform {
            let note = try #require(try sheet.existingObject(with: noteID) as? Note)
            note.title = "Dentist, Tuesday"
            note.body = "Bring the forms"
            try sheet.save()
        }
        let (edited, pending) = try await view.perform {
            let note = try view.existingObject(with: noteID) as? Note
            return (note?.title, view.hasChanges)
        }
        #expect(edited == "Dentist, Tuesday")
        #expect(pending, "the sheet saved into the view context only")
        let stored = try await controller.container.performBackgroundTask { context in
            try (context.existingObject(with: noteID) as? Note)?.title
        }
        #expect(stored == "Dentist", "nothing reached the store before the view context saved")
        try await view.perform { try view.save() }
        let saved = try await controller.container.performBackgroundTask { context in
            try (context.existingObject(with: noteID) as? Note).map { ($0.title, $0.body) }
        }
        #expect(saved?.0 == "Dentist, Tuesday")
        #expect(saved?.1 == "Bring the forms")

        // A new sheet inserts a note with a temporary ID; after the view context saves, the
        // sheet's object has the permanent one.
        let composer = controller.makeEditingContext()
        // The sheet's view would hold its note; here the context does.
        composer.retainsRegisteredObjects = true
        let draftID = try await composer.perform {
            let note = try Note(context: composer)
            note.title = "Draft"
            try composer.save()
            return note.objectID
        }
        #expect(draftID.isTemporaryID)
        try await view.perform { try view.save() }
        let permanent = await composer.perform {
            composer.processPendingChanges()
            return composer.registeredObjects.first { ($0 as? Note)?.title == "Draft" }?.objectID
        }
        #expect(permanent.map { !$0.isTemporaryID } == true)
    }
}
