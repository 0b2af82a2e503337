import CCurl
import Foundation

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// Where objects go: an S3-compatible endpoint (path-style addressing, as radosgw and MinIO
/// serve it), its region, the credentials, and how hard to retry.
public struct S3Configuration: Sendable {
    /// The endpoint, such as `http://127.0.0.1:7480`; buckets are its first path component.
    public var endpoint: URL
    /// The region requests are signed for (radosgw's default zone group answers `default`).
    public var region: String
    /// The access key ID.
    public var accessKeyID: String
    /// The secret access key.
    public var secretAccessKey: String
    /// Attempts per request before a transport error, a 5xx or a 429 is thrown (at least 1).
    public var maxAttempts: Int = 5
    /// The wait before the second attempt; it doubles before each later one.
    public var initialBackoff: Duration = .milliseconds(50)
    /// How long one attempt may take, connection included.
    public var timeout: Duration = .seconds(30)

    /// A configuration with the default retries.
    public init(endpoint: URL, region: String, accessKeyID: String, secretAccessKey: String) {
        self.endpoint = endpoint
        self.region = region
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
    }

    /// The configuration the usual environment variables give: `AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, `AWS_REGION` (else `AWS_DEFAULT_REGION`, else `us-east-1`) and
    /// the endpoint from `STRATA_S3_ENDPOINT` (else `AWS_ENDPOINT_URL`).
    ///
    /// - Throws: ``S3Error`` naming the variable that is missing or not a URL.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws(S3Error) -> S3Configuration {
        func value(_ names: String...) throws(S3Error) -> String {
            for name in names { if let value = environment[name], !value.isEmpty { return value } }
            throw S3Error(.configuration, operation: "configure", message: "\(names.joined(separator: " or ")) is not set")
        }
        let endpointText = try value("STRATA_S3_ENDPOINT", "AWS_ENDPOINT_URL")
        guard let endpoint = URL(string: endpointText), let scheme = endpoint.scheme, ["http", "https"].contains(scheme), endpoint.host != nil else {
            throw S3Error(.configuration, operation: "configure", message: "the endpoint \(endpointText) is not an http(s) URL")
        }
        return S3Configuration(
            endpoint: endpoint, region: environment["AWS_REGION"] ?? environment["AWS_DEFAULT_REGION"] ?? "us-east-1",
            accessKeyID: try value("AWS_ACCESS_KEY_ID"), secretAccessKey: try value("AWS_SECRET_ACCESS_KEY"))
    }
}

/// A failed S3 request: what was asked, of which key, and what the server or the transport said.
public struct S3Error: Error, Sendable, CustomStringConvertible {
    /// What went wrong.
    public enum Kind: Sendable, Equatable {
        /// The object (or bucket) does not exist.
        case notFound
        /// The server refused the request: its HTTP status and S3 error code.
        case server(status: Int, code: String)
        /// No answer: the connection failed or timed out (curl's error text).
        case transport
        /// The configuration is incomplete or wrong.
        case configuration
        /// The server answered something that is not what S3 answers.
        case malformedResponse
    }

    /// What went wrong.
    public let kind: Kind
    /// The operation, such as `put` or `list`.
    public let operation: String
    /// The bucket and key (or prefix) asked for, when there is one.
    public let target: String?
    /// The details.
    public let message: String

    /// An error of `kind` for `operation` on `target`.
    public init(_ kind: Kind, operation: String, target: String? = nil, message: String) {
        self.kind = kind
        self.operation = operation
        self.target = target
        self.message = message
    }

    /// `S3 <operation> <target>: <message>`.
    public var description: String { "S3 \(operation)\(target.map { " " + $0 } ?? ""): \(message)" }
}

/// An object listed in a bucket.
public struct S3ObjectInfo: Sendable, Equatable {
    /// The object's key.
    public var key: String
    /// Its size in bytes.
    public var size: Int
    /// Its entity tag, without quotes.
    public var etag: String
    /// Its user metadata (`x-amz-meta-*`, names lowercased, without the prefix), as
    /// ``S3Client/head(bucket:key:)`` reads it; empty in listings.
    public var metadata: [String: String] = [:]

    /// An object's description.
    public init(key: String, size: Int, etag: String, metadata: [String: String] = [:]) {
        self.key = key
        self.size = size
        self.etag = etag
        self.metadata = metadata
    }
}

/// A client of an S3-compatible object store, through libcurl, which signs each request with
/// AWS Signature Version 4 itself (`CURLOPT_AWS_SIGV4`); payloads are sent unsigned
/// (`UNSIGNED-PAYLOAD`) and checked by the caller (size, and a checksum of its own).
///
/// Requests are synchronous; a transport error, a 5xx or a 429 is retried with exponential
/// backoff up to ``S3Configuration/maxAttempts``. The client holds no mutable state and may be
/// used from any thread.
public final class S3Client: Sendable {
    /// The configuration.
    public let configuration: S3Configuration

    /// A client for `configuration`.
    public init(_ configuration: S3Configuration) {
        _ = Self.curlReady
        self.configuration = configuration
    }

    /// libcurl's global initialisation, once per process, before any handle is made.
    private static let curlReady: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    // MARK: Operations

    /// Creates `bucket`; one that exists and is this user's already is fine.
    public func createBucket(_ bucket: String) throws(S3Error) {
        let response = try request("createBucket", method: "PUT", bucket: bucket, key: nil)
        if response.status == 200 || response.errorCode == "BucketAlreadyOwnedByYou" { return }
        throw response.error(operation: "createBucket", target: bucket)
    }

    /// Stores `data` at `key` of `bucket` with user `metadata` (ASCII names and values),
    /// replacing what was there.
    public func put(_ data: Data, bucket: String, key: String, metadata: [String: String] = [:]) throws(S3Error) {
        let headers = metadata.sorted { $0.key < $1.key }.map { "x-amz-meta-\($0.key.lowercased()): \($0.value)" }
        let response = try request("put", method: "PUT", bucket: bucket, key: key, body: data, headers: headers)
        guard response.status == 200 else { throw response.error(operation: "put", target: bucket + "/" + key) }
    }

    /// Stores `data` at `key` of `bucket` as ``put(_:bucket:key:metadata:)`` does, in parts of
    /// `partSize` bytes (at least 5 MiB, S3's smallest part but the last) through a multipart
    /// upload when it is larger than one part; a failed part is retried as any request is, and
    /// an upload that fails is aborted, leaving no object and no parts.
    public func putLarge(
        _ data: Data, bucket: String, key: String, metadata: [String: String] = [:], partSize: Int = 16 << 20
    ) throws(S3Error) {
        let partSize = max(partSize, 5 << 20)
        guard data.count > partSize else { return try put(data, bucket: bucket, key: key, metadata: metadata) }
        let target = bucket + "/" + key
        let headers = metadata.sorted { $0.key < $1.key }.map { "x-amz-meta-\($0.key.lowercased()): \($0.value)" }
        let initiated = try request("multipart", method: "POST", bucket: bucket, key: key, query: [("uploads", "")], body: Data(), headers: headers)
        guard initiated.status == 200 else { throw initiated.error(operation: "multipart", target: target) }
        guard let upload = XMLAnswer(initiated.body), upload.root == "InitiateMultipartUploadResult", let uploadID = upload.fields["UploadId"] else {
            throw S3Error(.malformedResponse, operation: "multipart", target: target, message: "no UploadId in the answer to the upload's start")
        }
        do throws(S3Error) {
            var parts: [(number: Int, etag: String)] = []
            var offset = 0
            while offset < data.count {
                let number = parts.count + 1
                let part = data.subdata(in: offset..<min(offset + partSize, data.count))
                let response = try request(
                    "multipart", method: "PUT", bucket: bucket, key: key, query: [("partNumber", String(number)), ("uploadId", uploadID)], body: part)
                guard response.status == 200, let etag = response.headers["etag"] else {
                    throw response.error(operation: "multipart part \(number)", target: target)
                }
                parts.append((number, etag))
                offset += part.count
            }
            let list = parts.map { "<Part><PartNumber>\($0.number)</PartNumber><ETag>\($0.etag)</ETag></Part>" }.joined()
            let completed = try request(
                "multipart", method: "POST", bucket: bucket, key: key, query: [("uploadId", uploadID)],
                body: Data("<CompleteMultipartUpload>\(list)</CompleteMultipartUpload>".utf8))
            // S3 may answer 200 with an error in the body once the parts are joined.
            guard completed.status == 200, XMLAnswer(completed.body)?.root == "CompleteMultipartUploadResult" else {
                throw completed.error(operation: "multipart completion", target: target)
            }
        } catch {
            _ = try? request("multipart abort", method: "DELETE", bucket: bucket, key: key, query: [("uploadId", uploadID)])
            throw error
        }
    }

    /// The bytes at `key` of `bucket`.
    ///
    /// - Throws: ``S3Error/Kind-swift.enum/notFound`` when there is no such object.
    public func get(bucket: String, key: String) throws(S3Error) -> Data {
        try getWithInfo(bucket: bucket, key: key).data
    }

    /// The bytes at `key` of `bucket` with the object's description (size, entity tag,
    /// metadata), both from one GET.
    ///
    /// - Throws: ``S3Error/Kind-swift.enum/notFound`` when there is no such object.
    public func getWithInfo(bucket: String, key: String) throws(S3Error) -> (data: Data, info: S3ObjectInfo) {
        let response = try request("get", method: "GET", bucket: bucket, key: key)
        guard response.status == 200 else { throw response.error(operation: "get", target: bucket + "/" + key) }
        return (response.body, try Self.info(of: response, key: key, operation: "get", target: bucket + "/" + key))
    }

    /// The size and entity tag of the object at `key`, or `nil` when there is none.
    public func head(bucket: String, key: String) throws(S3Error) -> S3ObjectInfo? {
        let response = try request("head", method: "HEAD", bucket: bucket, key: key)
        if response.status == 404 { return nil }
        guard response.status == 200 else { throw response.error(operation: "head", target: bucket + "/" + key) }
        return try Self.info(of: response, key: key, operation: "head", target: bucket + "/" + key)
    }

    /// The description of the object a GET or HEAD `response` answered for.
    private static func info(of response: Response, key: String, operation: String, target: String) throws(S3Error) -> S3ObjectInfo {
        guard let length = response.headers["content-length"].flatMap({ Int($0) }) else {
            throw S3Error(.malformedResponse, operation: operation, target: target, message: "no Content-Length")
        }
        var metadata: [String: String] = [:]
        for (name, value) in response.headers where name.hasPrefix("x-amz-meta-") { metadata[String(name.dropFirst(11))] = value }
        return S3ObjectInfo(key: key, size: length, etag: unquoted(response.headers["etag"] ?? ""), metadata: metadata)
    }

    /// Every object of `bucket` whose key starts with `prefix`, in key order (all pages of
    /// ListObjectsV2).
    public func list(bucket: String, prefix: String) throws(S3Error) -> [S3ObjectInfo] {
        try list(bucket: bucket, prefix: prefix, pageSize: nil)
    }

    /// ``list(bucket:prefix:)`` with at most `pageSize` keys a page (the server's default, 1,000
    /// in S3, when `nil`).
    func list(bucket: String, prefix: String, pageSize: Int?) throws(S3Error) -> [S3ObjectInfo] {
        var objects: [S3ObjectInfo] = []
        var token: String?
        repeat {
            var query = [("list-type", "2"), ("prefix", prefix)]
            if let pageSize { query.append(("max-keys", String(pageSize))) }
            if let token { query.append(("continuation-token", token)) }
            let response = try request("list", method: "GET", bucket: bucket, key: nil, query: query)
            guard response.status == 200 else { throw response.error(operation: "list", target: bucket + "/" + prefix) }
            guard let page = ListPage(response.body) else {
                throw S3Error(.malformedResponse, operation: "list", target: bucket + "/" + prefix, message: "the listing does not parse")
            }
            objects += page.objects
            token = page.truncated ? page.nextToken : nil
            if page.truncated && token == nil {
                throw S3Error(.malformedResponse, operation: "list", target: bucket + "/" + prefix, message: "a truncated listing without a continuation token")
            }
        } while token != nil
        return objects
    }

    /// Deletes the object at `key` of `bucket`; deleting one that is not there is fine, as in S3.
    public func delete(bucket: String, key: String) throws(S3Error) {
        let response = try request("delete", method: "DELETE", bucket: bucket, key: key)
        guard response.status == 204 || response.status == 200 || response.status == 404 else {
            throw response.error(operation: "delete", target: bucket + "/" + key)
        }
    }

    // MARK: Requests

    /// What a request answered.
    struct Response {
        var status: Int
        var body: Data
        var headers: [String: String]

        /// The S3 error code of an error body (`<Error><Code>…`), if any.
        var errorCode: String? { ErrorBody(body)?.code }

        /// The error this response is for `operation` on `target`.
        func error(operation: String, target: String) -> S3Error {
            let code = errorCode ?? "HTTP \(status)"
            if status == 404 { return S3Error(.notFound, operation: operation, target: target, message: code) }
            return S3Error(.server(status: status, code: code), operation: operation, target: target, message: "\(status) \(code)")
        }
    }

    /// Sends one request, retrying a transport error, a 5xx or a 429 with backoff.
    func request(
        _ operation: String, method: String, bucket: String, key: String?, query: [(String, String)] = [], body: Data? = nil,
        headers: [String] = []
    ) throws(S3Error) -> Response {
        let target = bucket + (key.map { "/" + $0 } ?? "")
        let url = url(bucket: bucket, key: key, query: query)
        var wait = configuration.initialBackoff
        var attempt = 1
        while true {
            let outcome = perform(method: method, url: url, body: body, headers: headers)
            switch outcome {
            case .success(let response) where response.status < 500 && response.status != 429:
                return response
            case .success(let response) where attempt >= configuration.maxAttempts:
                return response
            case .failure(let message) where attempt >= configuration.maxAttempts:
                throw S3Error(.transport, operation: operation, target: target, message: "\(message) (after \(attempt) attempts)")
            default:
                Thread.sleep(forTimeInterval: Double(wait.components.seconds) + Double(wait.components.attoseconds) / 1e18)
                wait = wait * 2
                attempt += 1
            }
        }
    }

    /// The path-style URL of `key` in `bucket` (each key segment percent-encoded as SigV4
    /// canonicalises it) with `query` sorted by name, as the canonical request orders it.
    func url(bucket: String, key: String?, query: [(String, String)]) -> String {
        var text = configuration.endpoint.absoluteString
        while text.hasSuffix("/") { text.removeLast() }
        text += "/" + Self.encode(bucket)
        if let key { text += "/" + key.split(separator: "/", omittingEmptySubsequences: false).map { Self.encode(String($0)) }.joined(separator: "/") }
        if !query.isEmpty {
            text += "?" + query.sorted { $0.0 < $1.0 }.map { Self.encode($0.0) + "=" + Self.encode($0.1) }.joined(separator: "&")
        }
        return text
    }

    /// `text` with every byte but the unreserved ones (`A-Z a-z 0-9 - . _ ~`) percent-encoded.
    static func encode(_ text: String) -> String {
        var encoded = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                encoded.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                encoded += String(format: "%%%02X", byte)
            }
        }
        return encoded
    }

    static func unquoted(_ etag: String) -> String { etag.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) }

    /// The buffers one transfer reads from and writes into, reached from curl's callbacks.
    private final class Transfer {
        var upload: Data
        var uploaded = 0
        var body = Data()
        var headerLines: [String] = []
        init(upload: Data) { self.upload = upload }
    }

    /// One attempt: the response, or curl's error text.
    private func perform(method: String, url: String, body: Data?, headers extra: [String]) -> Result<Response, TransportFailure> {
        guard let handle = curl_easy_init() else { return .failure(TransportFailure("curl_easy_init failed")) }
        defer { curl_easy_cleanup(handle) }
        let transfer = Transfer(upload: body ?? Data())
        let context = Unmanaged.passRetained(transfer)
        defer { context.release() }
        var headers: UnsafeMutablePointer<curl_slist>? = nil
        headers = curl_slist_append(headers, "x-amz-content-sha256: UNSIGNED-PAYLOAD")
        for header in extra { headers = curl_slist_append(headers, header) }
        // (An empty "Expect:" to skip the 100-continue round trip would be signed as a header
        // curl then does not send: radosgw answers SignatureDoesNotMatch.)
        defer { curl_slist_free_all(headers) }
        var errorBuffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        let code: CURLcode = errorBuffer.withUnsafeMutableBufferPointer { errors in
            _ = strata_curl_setopt_string(handle, CURLOPT_URL, url)
            _ = strata_curl_setopt_string(handle, CURLOPT_AWS_SIGV4, "aws:amz:\(configuration.region):s3")
            _ = strata_curl_setopt_string(handle, CURLOPT_USERNAME, configuration.accessKeyID)
            _ = strata_curl_setopt_string(handle, CURLOPT_PASSWORD, configuration.secretAccessKey)
            _ = strata_curl_setopt_pointer(handle, CURLOPT_HTTPHEADER, headers)
            _ = strata_curl_setopt_pointer(handle, CURLOPT_ERRORBUFFER, errors.baseAddress)
            _ = strata_curl_setopt_long(handle, CURLOPT_NOSIGNAL, 1)
            _ = strata_curl_setopt_long(handle, CURLOPT_TIMEOUT_MS, Int(configuration.timeout.components.seconds * 1000))
            _ = strata_curl_setopt_long(handle, CURLOPT_TCP_NODELAY, 1)
            _ = strata_curl_setopt_pointer(handle, CURLOPT_WRITEDATA, context.toOpaque())
            _ = strata_curl_setopt_callback(handle, CURLOPT_WRITEFUNCTION) { data, size, count, context in
                guard let data, let context else { return 0 }
                let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
                transfer.body.append(UnsafeRawPointer(data).assumingMemoryBound(to: UInt8.self), count: size * count)
                return size * count
            }
            _ = strata_curl_setopt_pointer(handle, CURLOPT_HEADERDATA, context.toOpaque())
            _ = strata_curl_setopt_callback(handle, CURLOPT_HEADERFUNCTION) { data, size, count, context in
                guard let data, let context else { return 0 }
                let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
                let line = String(decoding: UnsafeRawBufferPointer(start: data, count: size * count), as: UTF8.self)
                transfer.headerLines.append(line)
                return size * count
            }
            switch method {
            case "GET": break
            case "HEAD": _ = strata_curl_setopt_long(handle, CURLOPT_NOBODY, 1)
            case "PUT", "POST":
                // A body (empty for a POST without one) read from the transfer's buffer.
                if method == "POST" { _ = strata_curl_setopt_string(handle, CURLOPT_CUSTOMREQUEST, "POST") }
                _ = strata_curl_setopt_long(handle, CURLOPT_UPLOAD, 1)
                _ = strata_curl_setopt_offset(handle, CURLOPT_INFILESIZE_LARGE, curl_off_t(transfer.upload.count))
                _ = strata_curl_setopt_pointer(handle, CURLOPT_READDATA, context.toOpaque())
                _ = strata_curl_setopt_callback(handle, CURLOPT_READFUNCTION) { buffer, size, count, context in
                    guard let buffer, let context else { return 0 }
                    let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
                    let length = min(size * count, transfer.upload.count - transfer.uploaded)
                    transfer.upload.withUnsafeBytes { source in
                        if let base = source.baseAddress, length > 0 {
                            UnsafeMutableRawPointer(buffer).copyMemory(from: base + transfer.uploaded, byteCount: length)
                        }
                    }
                    transfer.uploaded += length
                    return length
                }
            default: _ = strata_curl_setopt_string(handle, CURLOPT_CUSTOMREQUEST, method)
            }
            return curl_easy_perform(handle)
        }
        guard code == CURLE_OK else {
            let detail = String(decoding: errorBuffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            return .failure(TransportFailure(detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail))
        }
        var status = 0
        _ = strata_curl_response_code(handle, &status)
        var fields: [String: String] = [:]
        for line in transfer.headerLines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespacesAndNewlines)
        }
        return .success(Response(status: status, body: transfer.body, headers: fields))
    }

    /// curl's description of a failed transfer.
    private struct TransportFailure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}

// MARK: - XML answers

/// One page of a ListObjectsV2 answer.
struct ListPage {
    var objects: [S3ObjectInfo] = []
    var truncated = false
    var nextToken: String?

    /// The page `xml` holds, or `nil` when it is not a listing.
    init?(_ xml: Data) {
        let parser = ElementCollector(xml)
        guard parser.parse(), parser.rootName == "ListBucketResult" else { return nil }
        for contents in parser.contents {
            guard let key = contents["Key"], let size = contents["Size"].flatMap({ Int($0) }) else { return nil }
            objects.append(S3ObjectInfo(key: key, size: size, etag: S3Client.unquoted(contents["ETag"] ?? "")))
        }
        truncated = parser.topLevel["IsTruncated"] == "true"
        nextToken = parser.topLevel["NextContinuationToken"]
    }
}

/// An S3 answer's root element and the text of the elements directly under it.
struct XMLAnswer {
    var root: String
    var fields: [String: String]

    init?(_ xml: Data) {
        let parser = ElementCollector(xml)
        guard parser.parse(), let root = parser.rootName else { return nil }
        self.root = root
        fields = parser.topLevel
    }
}

/// The code of an S3 error answer (`<Error><Code>NoSuchKey</Code>…`).
struct ErrorBody {
    var code: String

    init?(_ xml: Data) {
        guard !xml.isEmpty else { return nil }
        let parser = ElementCollector(xml)
        guard parser.parse(), parser.rootName == "Error", let code = parser.topLevel["Code"] else { return nil }
        self.code = code
    }
}

/// Collects an S3 answer's text elements: those directly under the root, and those of each
/// `Contents` element.
private final class ElementCollector: NSObject, XMLParserDelegate {
    private let parser: XMLParser
    private(set) var rootName: String?
    private(set) var topLevel: [String: String] = [:]
    private(set) var contents: [[String: String]] = []
    private var path: [String] = []
    private var text = ""

    init(_ data: Data) {
        parser = XMLParser(data: data)
        super.init()
        parser.delegate = self
    }

    func parse() -> Bool { parser.parse() }

    func parser(
        _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]
    ) {
        if path.isEmpty { rootName = name }
        if path.count == 1, name == "Contents" { contents.append([:]) }
        path.append(name)
        text = ""
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }

    func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
        if path.count == 2 { topLevel[name] = text }
        if path.count == 3, path[1] == "Contents", !contents.isEmpty { contents[contents.count - 1][name] = text }
        path.removeLast()
        text = ""
    }
}
