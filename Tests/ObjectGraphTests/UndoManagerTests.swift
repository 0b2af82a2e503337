import Foundation
@testable import ObjectGraph
import StrataSync
import Testing

/// ``ManagedUndoManager`` against the semantics of `NSUndoManager`: grouping (explicit, nested
/// and by event), undo and redo round trips through targets that register their own inverse,
/// level limits, registration counting, action removal, weak targets, names and notifications;
/// and a seeded random run against a plain history model.
@Suite struct UndoManagerTests {
    // MARK: Oracle

    @Test(arguments: [(1, 0), (2, 0), (3, 3), (4, 1), (5, 0), (6, 6)] as [(UInt64, Int)])
    func undoAndRedoMatchAHistoryModelUnderRandomOperations(seed: UInt64, levels: Int) throws {
        var random = RandomizedConformance.SeededGenerator(state: seed)
        func below(_ bound: Int) -> Int { Int(random.next() % UInt64(bound)) }
        let manager = ManagedUndoManager()
        manager.levelsOfUndo = levels
        let counter = UndoCounter(manager)
        // The model: the value after each closed group, the position in that history, and the
        // open groups (how deep, whether the outermost is the implicit event group, and whether
        // the outermost has recorded a change).
        var history = [0]
        var index = 0
        var current = 0
        var depth = 0
        var implicit = false
        var dirty = false
        func closeOutermost() {
            if dirty {
                history.append(current)
                index += 1
                if levels > 0 && index > levels {
                    history.removeFirst(index - levels)
                    index = levels
                }
            }
            depth = 0
            implicit = false
            dirty = false
        }
        for step in 0..<600 {
            switch below(100) {
            case 0..<35:
                if depth == 0 { depth = 1; implicit = true }
                history.removeSubrange((index + 1)...)
                dirty = true
                current = below(1_000)
                counter.set(current)
            case 35..<47:
                manager.endEvent()
                if implicit && depth == 1 { closeOutermost() }
            case 47..<55:
                guard depth < 3 else { break }
                if depth == 0 { implicit = false; dirty = false }
                depth += 1
                manager.beginUndoGrouping()
            case 55..<63:
                if depth == 0 {
                    #expect(throws: ObjectGraphError.self, "step \(step)") { try manager.endUndoGrouping() }
                } else {
                    try manager.endUndoGrouping()
                    depth -= 1
                    if depth == 0 { closeOutermost() }
                }
            case 63..<83:
                if depth > 1 || (depth == 1 && !implicit) {
                    #expect(throws: ObjectGraphError.self, "step \(step)") { try manager.undo() }
                    break
                }
                if depth == 1 { closeOutermost() }
                try manager.undo()
                if index > 0 { index -= 1 }
                current = history[index]
            default:
                if depth > 1 || (depth == 1 && !implicit) {
                    #expect(throws: ObjectGraphError.self, "step \(step)") { try manager.redo() }
                    break
                }
                if depth == 1 { closeOutermost() }
                try manager.redo()
                if index < history.count - 1 { index += 1 }
                current = history[index]
            }
            #expect(counter.value == current, "step \(step)")
            #expect(manager.canUndo == (index > 0 || (implicit && depth == 1 && dirty)), "step \(step)")
            #expect(manager.canRedo == (index < history.count - 1), "step \(step)")
            #expect(manager.groupingLevel == depth, "step \(step)")
        }
        #expect(counter.registrationErrors.isEmpty)
    }

    // MARK: Grouping

    @Test func nestedGroupIsUndoneAsOneStepOfItsParent() throws {
        let manager = ManagedUndoManager()
        let counter = UndoCounter(manager)
        manager.beginUndoGrouping()
        counter.set(1)
        manager.beginUndoGrouping()
        counter.set(2)
        counter.set(3)
        try manager.endUndoGrouping()
        #expect(manager.groupingLevel == 1)
        counter.set(4)
        try manager.endUndoGrouping()
        #expect(manager.groupingLevel == 0)
        try manager.undo()
        #expect(counter.value == 0)
        #expect(!manager.canUndo)
        try manager.redo()
        #expect(counter.value == 4)
        #expect(!manager.canRedo)
    }

    @Test func actionsInAGroupAreUndoneInReverseOrderOfRegistration() throws {
        let manager = ManagedUndoManager()
        let trace = UndoTrace()
        manager.beginUndoGrouping()
        for name in ["a", "b", "c"] { try manager.registerUndo(withTarget: trace) { $0.entries.append(name) } }
        manager.beginUndoGrouping()
        for name in ["d", "e"] { try manager.registerUndo(withTarget: trace) { $0.entries.append(name) } }
        try manager.endUndoGrouping()
        try manager.registerUndo(withTarget: trace) { $0.entries.append("f") }
        try manager.endUndoGrouping()
        try manager.undo()
        #expect(trace.entries == ["f", "e", "d", "c", "b", "a"])
    }

    @Test func emptyGroupsAreDiscardedRatherThanPushed() throws {
        let manager = ManagedUndoManager()
        let counter = UndoCounter(manager)
        counter.set(1)
        manager.endEvent()
        manager.beginUndoGrouping()
        manager.beginUndoGrouping()
        try manager.endUndoGrouping()
        try manager.endUndoGrouping()
        try manager.undo()
        #expect(counter.value == 0, "the undo reverted the last group with actions")
        #expect(!manager.canUndo)
    }

    @Test func firstRegistrationOpensAnEventGroupThatEndEventCloses() throws {
        let manager = ManagedUndoManager()
        let counter = UndoCounter(manager)
        #expect(manager.groupingLevel == 0)
        counter.set(1)
        #expect(manager.groupingLevel == 1)
        counter.set(2)
        manager.endEvent()
        #expect(manager.groupingLevel == 0)
        counter.set(3)
        manager.endEvent()
        try manager.undo()
        #expect(counter.value == 2)
        try manager.undo()
        #expect(counter.value == 0, "both changes of the first event undo as one step")
        #expect(!manager.canUndo)
    }

    @Test func undoClosesTheOpenEventGroupFirst() throws {
        let manager = ManagedUndoManager()
        let counter = UndoCounter(manager)
        counter.set(1)
        manager.endEvent()
        counter.set(2)
        counter.set(3)
        #expect(manager.canUndo)
        try manager.undo()
        #expect(manager.groupingLevel == 0)
        #expect(counter.value == 1)
        try manager.undo()
        #expect(counter.value == 0)
    }

    @Test func undoWithNothingToUndoOrRedoDoesNothing() throws {
        let manager = ManagedUndoManager()
        #expect(!manager.canUndo && !manager.canRedo)
        try manager.undo()
        try manager.redo()
        try manager.undoNestedGroup()
        #expect(!manager.canUndo && !manager.canRedo)
    }

    // MARK: Limits and the redo stack

    @Test func levelsOfUndoDropsTheOldestGroups() throws {
        let manager = ManagedUndoManager()
        manager.levelsOfUndo = 2
        let counter = UndoCounter(manager)
        for value in 1...4 {
            counter.set(value)
            manager.endEvent()
        }
        try manager.undo()
        try manager.undo()
        #expect(counter.value == 2)
        #expect(!manager.canUndo, "the groups that set 1 and 2 were dropped")
        try manager.redo()
        try manager.redo()
        #expect(counter.value == 4)
    }

    @Test func loweringLevelsOfUndoTrimsTheOldestGroups() throws {
        let manager = ManagedUndoManager()
        let counter = UndoCounter(manager)
        for value in 1...5 {
            counter.set(value)
            manager.endEvent()
        }
        manager.levelsOfUndo = 1
        try manager.undo()
        #expect(counter.value == 4)
        #expect(!manager.canUndo)
        manager.levelsOfUndo = -3
        #expect(manager.levelsOfUndo == 0, "a negative limit counts as unlimited")
    }

    @Test func newRegistrationClearsTheRedoStack() throws {
        let manager = ManagedUndoManager()
        let counter = UndoCounter(manager)
        counter.set(1)
        manager.endEvent()
        try manager.undo()
        #expect(manager.canRedo)
        counter.set(7)
        #expect(!manager.canRedo)
        try manager.redo()
        #expect(counter.value == 7)
    }

    @Test func registrationsDuringRedoKeepTheRemainingRedoStack() throws {
        let manager = ManagedUndoManager()
        let counter = UndoCounter(manager)
        for value in 1...3 {
            counter.set(value)
            manager.endEvent()
        }
        for _ in 1...3 { try manager.undo() }
        try manager.redo()
        #expect(counter.value == 1)
        #expect(manager.canRedo, "the redo's own registrations did not clear the redo stack")
        try manager.redo()
        try manager.redo()
        #expect(counter.value == 3)
        try manager.undo()
        #expect(counter.value == 2, "the redo recorded its inverse on the undo stack")
    }

    // MARK: Registration

    @Test func disablingIsCountedAndIgnoresRegistrations() throws {
        let manager = ManagedUndoManager()
        let counter = UndoCounter(manager)
        manager.disableUndoRegistration()
        manager.disableUndoRegistration()
        counter.set(1)
        try manager.enableUndoRegistration()
        #expect(!manager.isUndoRegistrationEnabled)
        counter.set(2)
        try manager.enableUndoRegistration()
        #expect(manager.isUndoRegistrationEnabled)
        #expect(manager.groupingLevel == 0, "an ignored registration opens no event group")
        #expect(!manager.canUndo)
        counter.set(3)
        manager.endEvent()
        try manager.undo()
        #expect(counter.value == 2)
        #expect(counter.registrationErrors.isEmpty)
    }

    @Test func enablingMoreThanDisabledThrows() throws {
        let manager = ManagedUndoManager()
        #expect(throws: ObjectGraphError.self) { try manager.enableUndoRegistration() }
        manager.disableUndoRegistration()
        try manager.enableUndoRegistration()
        #expect(throws: ObjectGraphError.self) { try manager.enableUndoRegistration() }
        #expect(manager.isUndoRegistrationEnabled)
    }

    @Test func registeringWithoutEventGroupingOutsideAGroupThrows() throws {
        let manager = ManagedUndoManager()
        manager.groupsByEvent = false
        let trace = UndoTrace()
        let error = #expect(throws: ObjectGraphError.self) {
            try manager.registerUndo(withTarget: trace) { $0.entries.append("x") }
        }
        #expect(error?.code == .invalidArgument)
        #expect(!manager.canUndo)
        manager.beginUndoGrouping()
        try manager.registerUndo(withTarget: trace) { $0.entries.append("x") }
        try manager.endUndoGrouping()
        try manager.undo()
        #expect(trace.entries == ["x"])
    }

    // MARK: Misuse

    @Test func endingAGroupWithNoneOpenThrows() {
        let manager = ManagedUndoManager()
        let error = #expect(throws: ObjectGraphError.self) { try manager.endUndoGrouping() }
        #expect(error?.code == .invalidArgument)
        #expect(manager.groupingLevel == 0)
    }

    @Test func undoOrRedoWithAnExplicitGroupOpenThrows() throws {
        let manager = ManagedUndoManager()
        let counter = UndoCounter(manager)
        counter.set(1)
        manager.endEvent()
        manager.beginUndoGrouping()
        #expect(throws: ObjectGraphError.self) { try manager.undo() }
        #expect(throws: ObjectGraphError.self) { try manager.redo() }
        #expect(counter.value == 1)
        #expect(manager.groupingLevel == 1)
        try manager.endUndoGrouping()
        try manager.undo()
        #expect(counter.value == 0)
    }

    @Test func undoNestedGroupThrowsOnlyWhenAnOpenGroupHasActions() throws {
        let manager = ManagedUndoManager()
        let counter = UndoCounter(manager)
        counter.set(1)
        manager.endEvent()
        manager.beginUndoGrouping()
        try manager.undoNestedGroup()
        #expect(counter.value == 0)
        #expect(manager.groupingLevel == 1, "the open group stays open")
        counter.set(5)
        #expect(throws: ObjectGraphError.self) { try manager.undoNestedGroup() }
        try manager.endUndoGrouping()
        try manager.undo()
        #expect(counter.value == 0)
    }

    @Test func undoFromInsideAnUndoActionThrows() throws {
        let manager = ManagedUndoManager()
        let trace = UndoTrace()
        var nestedError: ObjectGraphError?
        try manager.registerUndo(withTarget: trace) { [unowned manager] _ in
            do { try manager.undo() } catch { nestedError = error as? ObjectGraphError }
        }
        manager.endEvent()
        try manager.undo()
        #expect(nestedError?.code == .invalidArgument)
        #expect(!manager.isUndoing)
    }

    // MARK: Removing actions

    @Test func removeAllActionsEmptiesBothStacksAndTheOpenGroups() throws {
        let manager = ManagedUndoManager()
        let counter = UndoCounter(manager)
        for value in 1...3 {
            counter.set(value)
            manager.endEvent()
        }
        try manager.undo()
        manager.beginUndoGrouping()
        counter.set(9)
        manager.removeAllActions()
        #expect(!manager.canUndo && !manager.canRedo)
        #expect(manager.groupingLevel == 0)
        #expect(throws: ObjectGraphError.self) { try manager.endUndoGrouping() }
        counter.set(10)
        manager.endEvent()
        try manager.undo()
        #expect(counter.value == 9)
    }

    @Test func removeAllActionsWithTargetRemovesOnlyThatTargetsActions() throws {
        let manager = ManagedUndoManager()
        let kept = UndoCounter(manager)
        let removed = UndoCounter(manager)
        kept.set(1)
        removed.set(1)
        manager.endEvent()
        removed.set(2)
        manager.endEvent()
        removed.set(3)
        manager.removeAllActions(withTarget: removed)
        #expect(manager.groupingLevel == 1, "the open group stays open")
        manager.endEvent()
        try manager.undo()
        #expect(kept.value == 0)
        #expect(removed.value == 3)
        #expect(!manager.canUndo, "the groups left empty were dropped")
    }

    // MARK: Weak targets

    @Test func actionOfADeallocatedTargetIsSkippedAndDoesNotKeepItAlive() throws {
        let manager = ManagedUndoManager()
        let survivor = UndoCounter(manager)
        weak var released: UndoCounter?
        do {
            let counter = UndoCounter(manager)
            counter.set(1)
            survivor.set(1)
            released = counter
        }
        manager.endEvent()
        #expect(released == nil)
        #expect(manager.canUndo)
        try manager.undo()
        #expect(survivor.value == 0)
        try manager.redo()
        #expect(survivor.value == 1)
    }

    // MARK: Names

    @Test func actionNamesAndMenuTitlesFollowUndoAndRedo() throws {
        let manager = ManagedUndoManager()
        let counter = UndoCounter(manager)
        #expect(manager.undoMenuItemTitle == "Undo" && manager.redoMenuItemTitle == "Redo")
        counter.set(1)
        manager.setActionName("Set One")
        #expect(manager.undoActionName == "Set One", "the open event group is what undo() would revert")
        manager.endEvent()
        counter.set(2)
        manager.endEvent()
        #expect(manager.undoActionName == "")
        #expect(manager.undoMenuItemTitle == "Undo")
        manager.setActionName("Set Two")
        #expect(manager.undoMenuItemTitle == "Undo Set Two", "with no group open, the top group is named")
        try manager.undo()
        #expect(manager.undoMenuItemTitle == "Undo Set One")
        #expect(manager.redoActionName == "Set Two")
        #expect(manager.redoMenuItemTitle == "Redo Set Two")
        try manager.undo()
        #expect(manager.redoMenuItemTitle == "Redo Set One")
        #expect(manager.undoMenuItemTitle == "Undo")
        try manager.redo()
        #expect(manager.undoMenuItemTitle == "Undo Set One", "the name survives the round trip")
        #expect(manager.redoMenuItemTitle == "Redo Set Two")
    }

    @Test func actionNameSetWhileUndoingNamesTheRedoGroup() throws {
        let manager = ManagedUndoManager()
        let trace = UndoTrace()
        try manager.registerUndo(withTarget: trace) { [unowned manager] trace in
            try? manager.registerUndo(withTarget: trace) { $0.entries.append("redone") }
            manager.setActionName("Restore")
        }
        manager.setActionName("Remove")
        manager.endEvent()
        try manager.undo()
        #expect(manager.redoActionName == "Restore")
        try manager.redo()
        #expect(trace.entries == ["redone"])
    }

    // MARK: Notifications

    @Test func notificationsAroundOneUndoAndRedo() throws {
        let manager = ManagedUndoManager()
        let counter = UndoCounter(manager)
        let recorder = UndoNotificationRecorder(manager)
        counter.set(1)
        #expect(recorder.names == [ManagedUndoManager.checkpointNotification, ManagedUndoManager.didOpenUndoGroupNotification])
        counter.set(2)
        #expect(recorder.names.count == 2, "nothing is posted per action")
        recorder.clear()
        try manager.undo()
        #expect(recorder.names == [
            ManagedUndoManager.checkpointNotification, ManagedUndoManager.willCloseUndoGroupNotification,
            ManagedUndoManager.didCloseUndoGroupNotification, ManagedUndoManager.willUndoChangeNotification,
            ManagedUndoManager.didUndoChangeNotification,
        ])
        recorder.clear()
        try manager.redo()
        #expect(recorder.names == [ManagedUndoManager.willRedoChangeNotification, ManagedUndoManager.didRedoChangeNotification])
        recorder.clear()
        manager.endEvent()
        #expect(recorder.names == [ManagedUndoManager.checkpointNotification])
    }
}

/// A value whose setter registers its own inverse, as a managed object's setter does.
private final class UndoCounter {
    let manager: ManagedUndoManager
    var value = 0
    var registrationErrors: [any Error] = []

    init(_ manager: ManagedUndoManager) { self.manager = manager }

    func set(_ newValue: Int) {
        let old = value
        value = newValue
        do {
            try manager.registerUndo(withTarget: self) { $0.set(old) }
        } catch {
            registrationErrors.append(error)
        }
    }
}

/// A target that records which actions ran, in order.
private final class UndoTrace {
    var entries: [String] = []
}

/// Records the names of the notifications one manager posts, in order. Managers post
/// synchronously on the caller's thread, so the names are complete when a call returns.
private final class UndoNotificationRecorder {
    private final class Log: Sendable {
        let names = Locked<[Notification.Name]>([])
    }

    private let log = Log()
    private var token: (any NSObjectProtocol)?

    init(_ manager: ManagedUndoManager) {
        let log = self.log
        token = NotificationCenter.default.addObserver(forName: nil, object: manager, queue: nil) { note in
            log.names.withLock { $0.append(note.name) }
        }
    }

    deinit {
        if let token { NotificationCenter.default.removeObserver(token) }
    }

    var names: [Notification.Name] { log.names.withLock { $0 } }

    func clear() { log.names.withLock { $0.removeAll() } }
}
