import Foundation
import Testing

/// Issue 20: `strata replicate` and `strata restore` against a real S3 server (radosgw, from
/// `Scripts/s3-server`): a demo store backed up, restored, and checked by fsck; usage errors.
@Suite(.enabled(if: ProcessInfo.processInfo.environment["STRATA_S3_ENDPOINT"] != nil, "no S3 server: run Scripts/s3-server start and export what it prints"))
struct StrataToolReplicateTests {
    @Test func aStoreReplicatedOnceRestoresCleanAndARestoreNeverOverwrites() throws {
        let scratch = try ToolScratch()
        let store = scratch.path + "/store", restored = scratch.path + "/restored"
        let location = "s3://strata-tool-\(UUID().uuidString.lowercased().prefix(12))/app"
        #expect(try scratch.run("demo", store).status == 0)
        let pass = try scratch.run("replicate", "--once", "--json", store, location)
        #expect(pass.status == 0, "\(pass)")
        #expect(pass.stdout.contains("\"walChunks\""), "\(pass)")
        let restore = try scratch.run("restore", location, restored)
        #expect(restore.status == 0 && restore.stdout.contains("checked clean"), "\(restore)")
        let fsck = try scratch.run("fsck", restored)
        #expect(fsck.status == 0, "\(fsck)")
        let again = try scratch.run("restore", location, restored)
        #expect(again.status == 2 && again.stderr.contains("is not empty"), "\(again)")
        let beyond = try scratch.run("restore", location, scratch.path + "/beyond", "--at", "999999999")
        #expect(beyond.status == 2 && beyond.stderr.contains("reaches sequence"), "\(beyond)")
        let badTime = try scratch.run("restore", location, scratch.path + "/t", "--at-time", "yesterday")
        #expect(badTime.status == 2 && badTime.stderr.contains("ISO 8601"), "\(badTime)")
    }

    @Test func aLocationThatIsNotS3IsAUsageError() throws {
        let scratch = try ToolScratch()
        #expect(try scratch.run("demo", scratch.path + "/store").status == 0)
        let run = try scratch.run("replicate", "--once", scratch.path + "/store", "/not/s3")
        #expect(run.status == 2 && run.stderr.contains("not an s3://bucket/prefix location"), "\(run)")
    }
}

/// `strata replicate` refuses a retention that is not a positive number of days before it
/// reaches the bucket (no server needed).
@Suite struct StrataToolReplicateUsageTests {
    @Test func aRetentionThatIsNotPositiveIsAUsageError() throws {
        let scratch = try ToolScratch()
        for days in ["0", "-1"] {
            let run = try scratch.run(["replicate", "--once", "--retain-days=" + days, scratch.path + "/store", "s3://b/p"])
            #expect(run.status == 2 && run.stderr.contains("--retain-days must be a positive"), "\(run)")
        }
    }
}
