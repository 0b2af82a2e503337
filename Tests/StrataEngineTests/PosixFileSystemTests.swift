import Foundation
import Glibc
import Testing

@testable import StrataEngine

/// Runs `body` with a fresh directory under the system temporary directory, removed afterwards.
private func withTemporaryDirectory(_ body: (String) throws -> Void) throws {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("strata-posix-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: false)
    defer { try? FileManager.default.removeItem(at: url) }
    try body(url.path)
}

/// The ``StoreError`` `body` throws, or nil when it succeeds. (Closures here throw untyped:
/// Swift 6 does not infer a closure's typed throws from its context.)
@Suite struct PosixFileSystemTests {
    let fs = PosixFileSystem()

    @Test func writeThenReadRoundTripsAndReadsShortAtEndOfFile() throws {
        try withTemporaryDirectory { dir in
            let handle = try fs.open(dir + "/data", mode: .createNew)
            defer { handle.close() }
            try handle.write(Array(0..<10), at: 0)
            #expect(try handle.size() == 10)
            #expect(try handle.read(upTo: 4, at: 2) == [2, 3, 4, 5])
            #expect(try handle.read(upTo: 20, at: 6) == [6, 7, 8, 9])
            #expect(try handle.read(upTo: 5, at: 100) == [])
            #expect(caught { try handle.read(exactly: 5, at: 8) }?.code == .corruption)

            let reopened = try fs.open(dir + "/data", mode: .readOnly)
            defer { reopened.close() }
            #expect(try reopened.read(exactly: 10, at: 0) == Array(0..<10))
        }
    }

    @Test func writePastEndZeroFillsTheGap() throws {
        try withTemporaryDirectory { dir in
            let handle = try fs.open(dir + "/data", mode: .createNew)
            defer { handle.close() }
            try handle.write([1], at: 0)
            try handle.write([2], at: 3)
            #expect(try handle.read(upTo: 10, at: 0) == [1, 0, 0, 2])
        }
    }

    @Test func createNewFailsOnAnExistingFile() throws {
        try withTemporaryDirectory { dir in
            try fs.open(dir + "/data", mode: .createNew).close()
            let error = caught { try fs.open(dir + "/data", mode: .createNew) }
            #expect(error?.code == .io)
            #expect(error?.errno == EEXIST)
            #expect(error?.path == dir + "/data")
            #expect(error?.message.contains("open") == true)
        }
    }

    @Test func syncAndSyncDirectorySucceed() throws {
        try withTemporaryDirectory { dir in
            let handle = try fs.open(dir + "/data", mode: .createNew)
            defer { handle.close() }
            try handle.write([1, 2, 3], at: 0)
            try handle.sync()
            try fs.syncDirectory(dir)
            #expect(try fs.kind(of: dir + "/data") == .file(size: 3))
        }
    }

    @Test func truncateCutsAndExtends() throws {
        try withTemporaryDirectory { dir in
            let handle = try fs.open(dir + "/data", mode: .createNew)
            defer { handle.close() }
            try handle.write([1, 2, 3, 4], at: 0)
            try handle.truncate(to: 2)
            #expect(try handle.read(upTo: 10, at: 0) == [1, 2])
            try handle.truncate(to: 5)
            #expect(try handle.read(upTo: 10, at: 0) == [1, 2, 0, 0, 0])
        }
    }

    @Test func renameReplacesTheTarget() throws {
        try withTemporaryDirectory { dir in
            for (name, byte) in [("a", UInt8(1)), ("b", UInt8(2))] {
                let handle = try fs.open(dir + "/" + name, mode: .createNew)
                try handle.write([byte], at: 0)
                handle.close()
            }
            try fs.rename(dir + "/a", to: dir + "/b")
            #expect(try fs.kind(of: dir + "/a") == nil)
            let handle = try fs.open(dir + "/b", mode: .readOnly)
            defer { handle.close() }
            #expect(try handle.read(upTo: 4, at: 0) == [1])
        }
    }

    @Test func listingNamesEntriesWithoutDotEntries() throws {
        try withTemporaryDirectory { dir in
            try fs.open(dir + "/one", mode: .createNew).close()
            try fs.open(dir + "/two", mode: .createNew).close()
            try fs.createDirectory(dir + "/sub")
            #expect(try fs.contentsOfDirectory(dir).sorted() == ["one", "sub", "two"])
            #expect(try fs.contentsOfDirectory(dir + "/sub") == [])
        }
    }

    @Test func kindReportsFilesDirectoriesAndNothing() throws {
        try withTemporaryDirectory { dir in
            let handle = try fs.open(dir + "/data", mode: .createNew)
            try handle.write([1, 2], at: 0)
            handle.close()
            #expect(try fs.kind(of: dir + "/data") == .file(size: 2))
            #expect(try fs.kind(of: dir) == .directory)
            #expect(try fs.kind(of: dir + "/missing") == nil)
            #expect(try fs.exists(dir + "/data"))
        }
    }

    @Test func removeDeletesFilesAndEmptyDirectories() throws {
        try withTemporaryDirectory { dir in
            try fs.createDirectory(dir + "/sub")
            try fs.open(dir + "/sub/data", mode: .createNew).close()
            #expect(caught { try fs.remove(dir + "/sub") }?.errno == ENOTEMPTY)
            try fs.remove(dir + "/sub/data")
            try fs.remove(dir + "/sub")
            #expect(try fs.contentsOfDirectory(dir) == [])
        }
    }

    @Test func secondLockOnTheSameFileThrowsLockedUntilUnlocked() throws {
        try withTemporaryDirectory { dir in
            let first = try fs.lock(dir + "/LOCK")
            let error = caught { try fs.lock(dir + "/LOCK") }
            #expect(error?.code == .locked)
            #expect(error?.path == dir + "/LOCK")
            #expect(error?.message.contains("another process or engine") == true)
            first.unlock()
            first.unlock()  // Harmless.
            let second = try fs.lock(dir + "/LOCK")
            second.unlock()
        }
    }

    // [DIR-5] A shared lock creates nothing, coexists with other shared locks and excludes the
    // exclusive lock both ways.
    @Test func sharedLocksCoexistExcludeTheExclusiveLockAndCreateNothing() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/LOCK"
            #expect(try fs.sharedLock(path) == nil)
            #expect(try fs.kind(of: path) == nil, "no lock file created")
            let writer = try fs.lock(path)
            #expect(caught { try fs.sharedLock(path) }?.code == .locked)
            writer.unlock()
            let reader1 = try #require(try fs.sharedLock(path))
            let reader2 = try #require(try fs.sharedLock(path))
            #expect(caught { try fs.lock(path) }?.code == .locked)
            reader1.unlock()
            #expect(caught { try fs.lock(path) }?.code == .locked)
            reader2.unlock()
            try fs.lock(path).unlock()
        }
    }

    @Test func operationsOnAClosedHandleThrowClosed() throws {
        try withTemporaryDirectory { dir in
            let handle = try fs.open(dir + "/data", mode: .createNew)
            handle.close()
            handle.close()  // Harmless.
            #expect(caught { try handle.read(upTo: 1, at: 0) }?.code == .closed)
            #expect(caught { try handle.write([1], at: 0) }?.code == .closed)
            #expect(caught { try handle.size() }?.code == .closed)
            #expect(caught { try handle.truncate(to: 0) }?.code == .closed)
            #expect(caught { try handle.sync() }?.code == .closed)
        }
    }

    @Test func failuresCarryPathAndErrno() throws {
        try withTemporaryDirectory { dir in
            let missing = dir + "/missing"
            for error in [
                caught { try fs.open(missing, mode: .readOnly) },
                caught { try fs.open(missing, mode: .readWrite) },
                caught { try fs.remove(missing) },
                caught { try fs.rename(missing, to: dir + "/other") },
                caught { try fs.createDirectory(missing + "/sub") },
                caught { try fs.contentsOfDirectory(missing) },
                caught { try fs.syncDirectory(missing) },
            ] {
                #expect(error?.code == .io)
                #expect(error?.errno == ENOENT)
                #expect(error?.path?.hasPrefix(missing) == true)
            }
            #expect(caught { try fs.open(dir, mode: .readOnly) }?.errno == EISDIR)
        }
    }

    @Test func writingThroughAReadOnlyHandleFails() throws {
        try withTemporaryDirectory { dir in
            try fs.open(dir + "/data", mode: .createNew).close()
            let handle = try fs.open(dir + "/data", mode: .readOnly)
            defer { handle.close() }
            let error = caught { try handle.write([1], at: 0) }
            #expect(error?.errno == EBADF)
            #expect(error?.path == dir + "/data")
        }
    }
}
