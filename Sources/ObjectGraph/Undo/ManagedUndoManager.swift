import Foundation

/// Records changes as undo actions and replays them, with the semantics of Foundation's
/// `NSUndoManager` (which swift-corelibs-foundation does not provide).
///
/// Actions are recorded in groups; ``undo()`` reverts the most recent group by running its
/// actions in reverse order of registration, and whatever those actions register while they
/// run becomes one group on the redo stack. With ``groupsByEvent`` on (the default), the
/// first registration outside any group opens a group that ``endEvent()`` closes, so each
/// event (for a managed object context, each `processPendingChanges`) undoes as one step.
///
/// Not `Sendable`: like the managed object context that owns it, an undo manager is used on
/// one thread or queue at a time. It uses no locks.
///
/// For example, a setter that registers its own inverse:
///
/// ```swift
/// final class Document {
///     let undoManager = ManagedUndoManager()
///     var title = "" {
///         didSet {
///             let old = oldValue
///             try? undoManager.registerUndo(withTarget: self) { $0.title = old }
///             undoManager.setActionName("Rename")
///         }
///     }
/// }
///
/// let document = Document()
/// document.title = "Draft"
/// document.undoManager.endEvent()
/// document.undoManager.undoMenuItemTitle  // "Undo Rename"
/// try document.undoManager.undo()         // title is "" again
/// try document.undoManager.redo()         // title is "Draft" again
/// ```
public final class ManagedUndoManager {
    /// One recorded action: a closure on a weakly held target, or a nested group.
    private enum Action {
        case invocation(Invocation)
        case group(Group)
    }

    /// A closure and the target it runs on, held weakly.
    private struct Invocation {
        weak var target: AnyObject?
        let perform: (AnyObject) -> Void
    }

    /// Actions in order of registration, and the name the menu shows for them.
    private struct Group {
        var actions: [Action] = []
        var name = ""
    }

    /// Closed groups, the most recent last.
    private var undoStack: [Group] = []
    private var redoStack: [Group] = []
    /// The groups being built, outermost first.
    private var openGroups: [Group] = []
    /// Whether `openGroups[0]` was opened by a registration under ``groupsByEvent``.
    private var implicitGroupOpen = false
    /// While undoing or redoing: the open groups set aside, restored when the actions end.
    private var suspendedGroups: [Group] = []
    private var suspendedImplicit = false
    private var disableCount = 0

    /// Posted when a group opens or closes and at ``endEvent()``. The object is the manager.
    public static let checkpointNotification = Notification.Name("ObjectGraph.ManagedUndoManagerCheckpoint")
    /// Posted after a group opens. The object is the manager.
    public static let didOpenUndoGroupNotification = Notification.Name("ObjectGraph.ManagedUndoManagerDidOpenUndoGroup")
    /// Posted before a group closes. The object is the manager.
    public static let willCloseUndoGroupNotification = Notification.Name("ObjectGraph.ManagedUndoManagerWillCloseUndoGroup")
    /// Posted after a group closes. The object is the manager.
    public static let didCloseUndoGroupNotification = Notification.Name("ObjectGraph.ManagedUndoManagerDidCloseUndoGroup")
    /// Posted before a group is undone. The object is the manager.
    public static let willUndoChangeNotification = Notification.Name("ObjectGraph.ManagedUndoManagerWillUndoChange")
    /// Posted after a group is undone. The object is the manager.
    public static let didUndoChangeNotification = Notification.Name("ObjectGraph.ManagedUndoManagerDidUndoChange")
    /// Posted before a group is redone. The object is the manager.
    public static let willRedoChangeNotification = Notification.Name("ObjectGraph.ManagedUndoManagerWillRedoChange")
    /// Posted after a group is redone. The object is the manager.
    public static let didRedoChangeNotification = Notification.Name("ObjectGraph.ManagedUndoManagerDidRedoChange")

    /// Creates an undo manager with empty stacks, grouping by event, and no level limit.
    public init() {}

    /// Whether the first registration made while no group is open opens a group that
    /// ``endEvent()`` closes (default `true`). When `false`, registering outside an explicit
    /// group throws.
    public var groupsByEvent = true

    /// How many top-level groups each stack keeps (0, the default, keeps all); the oldest are
    /// dropped when a group is pushed and when this is lowered. A negative value counts as 0.
    public var levelsOfUndo = 0 {
        didSet {
            if levelsOfUndo < 0 { levelsOfUndo = 0 }
            trimStacks()
        }
    }

    /// How many groups are open: explicit ones, the implicit event group, and while undoing or
    /// redoing, the group recording the inverse actions.
    public var groupingLevel: Int { openGroups.count }

    /// Whether ``undo()`` is running actions.
    public private(set) var isUndoing = false
    /// Whether ``redo()`` is running actions.
    public private(set) var isRedoing = false

    /// Whether registrations are recorded (no ``disableUndoRegistration()`` is outstanding).
    public var isUndoRegistrationEnabled: Bool { disableCount == 0 }

    /// Whether ``undo()`` would revert something: a closed group, or an implicit event group
    /// holding actions that ``undo()`` closes first.
    public var canUndo: Bool { groupToUndo != nil }

    /// Whether ``redo()`` would replay something.
    public var canRedo: Bool { !redoStack.isEmpty }

    /// The name of the group ``undo()`` would revert, or `""`.
    public var undoActionName: String { groupToUndo?.name ?? "" }

    /// The name of the group ``redo()`` would replay, or `""`.
    public var redoActionName: String { redoStack.last?.name ?? "" }

    /// The title of an Undo menu item: `"Undo"`, or `"Undo <name>"` when the group has a name.
    public var undoMenuItemTitle: String { undoActionName.isEmpty ? "Undo" : "Undo \(undoActionName)" }

    /// The title of a Redo menu item: `"Redo"`, or `"Redo <name>"` when the group has a name.
    public var redoMenuItemTitle: String { redoActionName.isEmpty ? "Redo" : "Redo \(redoActionName)" }

    /// The group `undo()` would revert: a closable event group with actions, else the stack top.
    private var groupToUndo: Group? {
        if groupsByEvent, closableEventGroup, let group = openGroups.first, !group.actions.isEmpty { return group }
        return undoStack.last
    }

    /// Whether the only open group is the implicit event group.
    private var closableEventGroup: Bool { implicitGroupOpen && openGroups.count == 1 }

    // MARK: Grouping

    /// Opens a group; groups nest, and a nested group is kept as one action of its parent.
    public func beginUndoGrouping() {
        openGroup()
    }

    /// Closes the innermost open group; an empty group is discarded rather than pushed.
    ///
    /// - Throws: ``ObjectGraphError/Code/invalidArgument`` when no group is open (or, inside
    ///   an undo or redo action, when the action closes more groups than it opened).
    public func endUndoGrouping() throws {
        if openGroups.isEmpty {
            throw ObjectGraphError(
                .invalidArgument,
                "endUndoGrouping() was called with no undo group open; call beginUndoGrouping() first and balance each begin with one end.")
        }
        if (isUndoing || isRedoing) && openGroups.count == 1 {
            throw ObjectGraphError(
                .invalidArgument,
                "endUndoGrouping() was called inside an undo or redo action more times than it called beginUndoGrouping(); balance each begin with one end.")
        }
        closeGroup()
    }

    /// Marks the end of an event: closes the implicit event group if it is the only open group,
    /// and posts ``checkpointNotification``. The managed object context calls this from
    /// `processPendingChanges`, as the end of a run-loop pass does in AppKit.
    public func endEvent() {
        if closableEventGroup {
            closeGroup()
        } else {
            post(Self.checkpointNotification)
        }
    }

    // MARK: Registration

    /// Records `handler` to run on `target` when the current group is undone (or, while
    /// undoing, redone). The target is held weakly: an action whose target is gone is skipped.
    ///
    /// Ignored while registration is disabled. Outside undo and redo, clears the redo stack.
    /// - Throws: ``ObjectGraphError/Code/invalidArgument`` when ``groupsByEvent`` is off and no
    ///   group is open.
    public func registerUndo<Target: AnyObject>(withTarget target: Target, handler: @escaping (Target) -> Void) throws {
        guard disableCount == 0 else { return }
        if openGroups.isEmpty {
            guard groupsByEvent else {
                throw ObjectGraphError(
                    .invalidArgument,
                    "registerUndo(withTarget:handler:) was called with groupsByEvent off and no undo group open; call beginUndoGrouping() first, or turn groupsByEvent on.")
            }
            openGroup()
            implicitGroupOpen = true
        }
        if !isUndoing && !isRedoing { redoStack.removeAll() }
        let invocation = Invocation(target: target) { object in
            if let target = object as? Target { handler(target) }
        }
        openGroups[openGroups.count - 1].actions.append(.invocation(invocation))
    }

    /// Stops recording registrations until a matching ``enableUndoRegistration()``; calls nest.
    public func disableUndoRegistration() {
        disableCount += 1
    }

    /// Balances one ``disableUndoRegistration()``; registration resumes when all are balanced.
    ///
    /// - Throws: ``ObjectGraphError/Code/invalidArgument`` when registration is not disabled.
    public func enableUndoRegistration() throws {
        guard disableCount > 0 else {
            throw ObjectGraphError(
                .invalidArgument,
                "enableUndoRegistration() was called more times than disableUndoRegistration(); balance each disable with one enable.")
        }
        disableCount -= 1
    }

    /// Names the group being built: the outermost open group, or while undoing or redoing the
    /// group being recorded (which otherwise takes the name of the group it reverts). With no
    /// group open, names the group ``undo()`` would revert. `""` removes the name.
    public func setActionName(_ name: String) {
        if !openGroups.isEmpty {
            openGroups[0].name = name
        } else if !undoStack.isEmpty {
            undoStack[undoStack.count - 1].name = name
        }
    }

    // MARK: Undo and redo

    /// Reverts the most recent group, first closing the implicit event group if it is the only
    /// open group. Does nothing when there is nothing to undo.
    ///
    /// - Throws: ``ObjectGraphError/Code/invalidArgument`` when an explicit group is open, or
    ///   when called from inside an undo or redo action.
    public func undo() throws {
        try closeEventGroupBefore("undo()")
        try undoNestedGroup()
    }

    /// Replays the most recently undone group, first closing the implicit event group if it is
    /// the only open group. Registrations made meanwhile go to the undo stack without clearing
    /// the redo stack. Does nothing when there is nothing to redo.
    ///
    /// - Throws: ``ObjectGraphError/Code/invalidArgument`` when an explicit group is open, or
    ///   when called from inside an undo or redo action.
    public func redo() throws {
        try closeEventGroupBefore("redo()")
        guard let group = redoStack.popLast() else { return }
        replay(group, undoing: false)
    }

    /// Reverts the most recent closed group without closing any open group. Does nothing when
    /// there is nothing to undo.
    ///
    /// - Throws: ``ObjectGraphError/Code/invalidArgument`` when an open group holds actions, or
    ///   when called from inside an undo or redo action.
    public func undoNestedGroup() throws {
        try checkNotReplaying("undoNestedGroup()")
        if openGroups.contains(where: { !$0.actions.isEmpty }) {
            throw ObjectGraphError(
                .invalidArgument,
                "undoNestedGroup() was called while an open undo group holds actions; call endUndoGrouping() first.")
        }
        guard let group = undoStack.popLast() else { return }
        replay(group, undoing: true)
    }

    // MARK: Removing actions

    /// Empties both stacks and discards every open group (``groupingLevel`` becomes 0, or 1 for
    /// the group being recorded while undoing or redoing). Leaves registration enabled or
    /// disabled as it was.
    public func removeAllActions() {
        undoStack.removeAll()
        redoStack.removeAll()
        suspendedGroups.removeAll()
        suspendedImplicit = false
        implicitGroupOpen = false
        openGroups = isUndoing || isRedoing ? [Group()] : []
    }

    /// Removes every action on `target` from both stacks and the open groups; closed groups
    /// left empty are dropped.
    public func removeAllActions(withTarget target: AnyObject) {
        func strip(_ group: inout Group) {
            group.actions = group.actions.compactMap { action in
                switch action {
                case .invocation(let invocation):
                    return invocation.target === target ? nil : action
                case .group(var nested):
                    strip(&nested)
                    return nested.actions.isEmpty ? nil : .group(nested)
                }
            }
        }
        for index in undoStack.indices { strip(&undoStack[index]) }
        for index in redoStack.indices { strip(&redoStack[index]) }
        for index in openGroups.indices { strip(&openGroups[index]) }
        for index in suspendedGroups.indices { strip(&suspendedGroups[index]) }
        undoStack.removeAll { $0.actions.isEmpty }
        redoStack.removeAll { $0.actions.isEmpty }
    }

    // MARK: Private

    private func openGroup() {
        openGroups.append(Group())
        post(Self.checkpointNotification)
        post(Self.didOpenUndoGroupNotification)
    }

    /// Closes the innermost open group into its parent, or onto the undo stack.
    private func closeGroup() {
        post(Self.checkpointNotification)
        post(Self.willCloseUndoGroupNotification)
        guard let group = openGroups.popLast() else { return }
        if openGroups.isEmpty {
            implicitGroupOpen = false
            if !group.actions.isEmpty { push(group, onUndoStack: true) }
        } else if !group.actions.isEmpty {
            openGroups[openGroups.count - 1].actions.append(.group(group))
        }
        post(Self.didCloseUndoGroupNotification)
    }

    private func closeEventGroupBefore(_ operation: String) throws {
        try checkNotReplaying(operation)
        guard !openGroups.isEmpty else { return }
        guard groupsByEvent && closableEventGroup else {
            throw ObjectGraphError(
                .invalidArgument,
                "\(operation) was called with an explicit undo group open; call endUndoGrouping() first.")
        }
        closeGroup()
    }

    private func checkNotReplaying(_ operation: String) throws {
        if isUndoing || isRedoing {
            throw ObjectGraphError(
                .invalidArgument,
                "\(operation) was called from inside an undo or redo action; let the running one finish first.")
        }
    }

    /// Runs `group` backwards, recording what its actions register as one group on the other stack.
    private func replay(_ group: Group, undoing: Bool) {
        post(undoing ? Self.willUndoChangeNotification : Self.willRedoChangeNotification)
        suspendedGroups = openGroups
        suspendedImplicit = implicitGroupOpen
        openGroups = [Group(name: group.name)]
        implicitGroupOpen = false
        if undoing { isUndoing = true } else { isRedoing = true }
        run(group)
        isUndoing = false
        isRedoing = false
        // Groups an action left open are folded into the recorded group.
        while openGroups.count > 1, let inner = openGroups.popLast() {
            if !inner.actions.isEmpty { openGroups[openGroups.count - 1].actions.append(.group(inner)) }
        }
        let recorded = openGroups.first ?? Group()
        openGroups = suspendedGroups
        implicitGroupOpen = suspendedImplicit
        suspendedGroups = []
        suspendedImplicit = false
        if !recorded.actions.isEmpty { push(recorded, onUndoStack: !undoing) }
        post(undoing ? Self.didUndoChangeNotification : Self.didRedoChangeNotification)
    }

    private func run(_ group: Group) {
        for action in group.actions.reversed() {
            switch action {
            case .invocation(let invocation):
                if let target = invocation.target { invocation.perform(target) }
            case .group(let nested):
                run(nested)
            }
        }
    }

    private func push(_ group: Group, onUndoStack: Bool) {
        if onUndoStack { undoStack.append(group) } else { redoStack.append(group) }
        trimStacks()
    }

    private func trimStacks() {
        guard levelsOfUndo > 0 else { return }
        if undoStack.count > levelsOfUndo { undoStack.removeFirst(undoStack.count - levelsOfUndo) }
        if redoStack.count > levelsOfUndo { redoStack.removeFirst(redoStack.count - levelsOfUndo) }
    }

    private func post(_ name: Notification.Name) {
        NotificationCenter.default.post(name: name, object: self)
    }
}
