import Foundation
import Testing

@testable import StrataReplication

/// The S3 server the tests talk to, when one is configured (`Scripts/s3-server start` prints
/// the environment; `.ci/run` starts one and runs these suites with it).
enum S3TestServer {
    static let configuration: S3Configuration? = try? S3Configuration.fromEnvironment()
    static var isAvailable: Bool { configuration != nil }

    /// A client of the server and a bucket of the test's own.
    static func bucket(_ name: String = #function) throws -> (S3Client, String) {
        let client = S3Client(try #require(configuration))
        let bucket = "strata-\(UUID().uuidString.lowercased().prefix(18))"
        try client.createBucket(bucket)
        return (client, bucket)
    }
}

/// The S3 client's pieces that need no server: URLs as SigV4 canonicalises them, the XML
/// answers, the configuration from the environment.
@Suite struct S3ClientOfflineTests {
    @Test func keysAndQueriesArePercentEncodedAsSigV4Canonicalises() {
        let client = S3Client(S3Configuration(endpoint: URL(string: "http://127.0.0.1:7480/")!, region: "default", accessKeyID: "a", secretAccessKey: "b"))
        #expect(client.url(bucket: "b", key: "a/b c+d/é.seg", query: []) == "http://127.0.0.1:7480/b/a/b%20c%2Bd/%C3%A9.seg")
        #expect(client.url(bucket: "b", key: nil, query: [("prefix", "x/y"), ("list-type", "2")]) == "http://127.0.0.1:7480/b?list-type=2&prefix=x%2Fy")
    }

    @Test func listingsAndErrorsParse() throws {
        let page = try #require(ListPage(Data("""
            <?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name>\
            <IsTruncated>true</IsTruncated><NextContinuationToken>t1</NextContinuationToken>\
            <Contents><Key>a/1</Key><Size>6</Size><ETag>&quot;x1&quot;</ETag></Contents>\
            <Contents><Key>a/2</Key><Size>0</Size><ETag>"x2"</ETag></Contents></ListBucketResult>
            """.utf8)))
        #expect(page.objects == [S3ObjectInfo(key: "a/1", size: 6, etag: "x1"), S3ObjectInfo(key: "a/2", size: 0, etag: "x2")])
        #expect(page.truncated && page.nextToken == "t1")
        #expect(ListPage(Data("<Error><Code>NoSuchBucket</Code></Error>".utf8)) == nil)
        #expect(ListPage(Data("not xml".utf8)) == nil)
        #expect(ErrorBody(Data("<Error><Code>NoSuchKey</Code><Message/></Error>".utf8))?.code == "NoSuchKey")
    }

    @Test func theConfigurationComesFromTheUsualVariables() throws {
        let configuration = try S3Configuration.fromEnvironment([
            "STRATA_S3_ENDPOINT": "http://127.0.0.1:9000", "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s",
        ])
        #expect(configuration.endpoint.absoluteString == "http://127.0.0.1:9000" && configuration.region == "us-east-1")
        let missing = try #require(throws: S3Error.self) { try S3Configuration.fromEnvironment(["STRATA_S3_ENDPOINT": "http://x"]) }
        #expect(missing.kind == .configuration && missing.message.contains("AWS_ACCESS_KEY_ID"))
        let wrong = try #require(throws: S3Error.self) {
            try S3Configuration.fromEnvironment(["STRATA_S3_ENDPOINT": "ftp://x", "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"])
        }
        #expect(wrong.kind == .configuration && wrong.message.contains("ftp://x"))
    }

    // Nothing listens: the request is retried, then the transport error names the target.
    @Test func aServerThatDoesNotAnswerIsATransportErrorAfterTheRetries() throws {
        var configuration = S3Configuration(endpoint: URL(string: "http://127.0.0.1:9")!, region: "default", accessKeyID: "a", secretAccessKey: "b")
        configuration.maxAttempts = 3
        configuration.initialBackoff = .milliseconds(1)
        let error = try #require(throws: S3Error.self) { try S3Client(configuration).get(bucket: "b", key: "k") }
        #expect(error.kind == .transport && error.target == "b/k" && error.message.contains("after 3 attempts"), "\(error)")
    }
}

/// The S3 client against a real S3 server (radosgw).
@Suite(.enabled(if: S3TestServer.isAvailable, "no S3 server: run Scripts/s3-server start and export what it prints"))
struct S3ClientTests {
    @Test func objectsRoundTrip() throws {
        let (client, bucket) = try S3TestServer.bucket()
        var random = SystemRandomNumberGenerator()
        let large = Data((0..<(5 << 20)).map { _ in UInt8.random(in: 0...255, using: &random) })
        let objects: [(String, Data)] = [("a/empty", Data()), ("a/small", Data("hello".utf8)), ("b/large.seg", large), ("c/odd key+é/x", Data([0, 1, 2]))]
        for (key, data) in objects { try client.put(data, bucket: bucket, key: key) }
        for (key, data) in objects {
            #expect(try client.get(bucket: bucket, key: key) == data, "\(key)")
            let info = try #require(try client.head(bucket: bucket, key: key))
            #expect(info.size == data.count)
        }
        #expect(try client.list(bucket: bucket, prefix: "").map(\.key) == objects.map(\.0).sorted())
        #expect(try client.list(bucket: bucket, prefix: "a/").map(\.size) == [0, 5])
        try client.put(Data("replaced".utf8), bucket: bucket, key: "a/small")
        #expect(try client.get(bucket: bucket, key: "a/small") == Data("replaced".utf8))
        try client.delete(bucket: bucket, key: "a/small")
        #expect(try client.head(bucket: bucket, key: "a/small") == nil)
        try client.delete(bucket: bucket, key: "a/small")
    }

    // An object larger than a part goes up in parts and reads back whole, metadata and all.
    @Test func largeObjectsGoUpInParts() throws {
        let (client, bucket) = try S3TestServer.bucket()
        var random = SystemRandomNumberGenerator()
        let data = Data((0..<(11 << 20) + 12_345).map { _ in UInt8.random(in: 0...255, using: &random) })
        try client.putLarge(data, bucket: bucket, key: "big/object.seg", metadata: ["crc32c": "42"], partSize: 5 << 20)
        #expect(try client.get(bucket: bucket, key: "big/object.seg") == data)
        let info = try #require(try client.head(bucket: bucket, key: "big/object.seg"))
        #expect(info.size == data.count && info.metadata["crc32c"] == "42")
        #expect(try client.list(bucket: bucket, prefix: "big/").map(\.key) == ["big/object.seg"])
        // Smaller than a part: one put.
        try client.putLarge(Data("small".utf8), bucket: bucket, key: "big/small", partSize: 5 << 20)
        #expect(try client.get(bucket: bucket, key: "big/small") == Data("small".utf8))
    }

    @Test func listingsFollowContinuationTokens() throws {
        let (client, bucket) = try S3TestServer.bucket()
        let keys = (0..<25).map { String(format: "p/%03d", $0) }
        for key in keys { try client.put(Data(key.utf8), bucket: bucket, key: key) }
        #expect(try client.list(bucket: bucket, prefix: "p/", pageSize: 7).map(\.key) == keys)
    }

    @Test func aMissingObjectIsNotFound() throws {
        let (client, bucket) = try S3TestServer.bucket()
        let error = try #require(throws: S3Error.self) { try client.get(bucket: bucket, key: "nothing/here") }
        #expect(error.kind == .notFound && error.target == "\(bucket)/nothing/here" && error.message == "NoSuchKey", "\(error)")
        let noBucket = try #require(throws: S3Error.self) { try client.list(bucket: bucket + "-none", prefix: "") }
        #expect(noBucket.kind == .notFound && noBucket.message == "NoSuchBucket")
    }

    @Test func aWrongSecretIsRefusedByTheServer() throws {
        var configuration = try #require(S3TestServer.configuration)
        configuration.secretAccessKey += "x"
        let error = try #require(throws: S3Error.self) { try S3Client(configuration).list(bucket: "strata-any", prefix: "") }
        #expect(error.kind == .server(status: 403, code: "SignatureDoesNotMatch"), "\(error)")
    }
}
