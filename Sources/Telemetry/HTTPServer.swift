import Foundation
import Logging
import NetplayService

/// Why a request head was refused: the status to answer and a one-line reason.
public struct HTTPRequestError: Error, Equatable, Sendable {
    /// 400 (malformed) or 431 (head too large).
    public var status: Int
    /// What was wrong, for the error body.
    public var message: String

    /// Creates an error.
    public init(_ status: Int, _ message: String) {
        self.status = status
        self.message = message
    }

    static func bad(_ message: String) -> HTTPRequestError { HTTPRequestError(400, message) }
}

/// An HTTP request as the telemetry server sees it (GET and HEAD only).
public struct HTTPRequest: Sendable, Equatable {
    /// The method, e.g. `GET` (anything but `GET` and `HEAD` is answered 405 before reaching a handler).
    public var method: String
    /// The path without the query, percent-decoded.
    public var path: String
    /// Query parameters, percent-decoded with `+` as space (last value wins; `?=` is the empty key).
    public var query: [String: String]
    /// Header fields, lower-cased names (last value wins).
    public var headers: [String: String]

    /// Largest request head accepted, in bytes.
    public static let maxHeadBytes = 16_384
    /// Most header lines accepted.
    public static let maxHeaders = 100
    /// Most query parameters accepted.
    public static let maxQueryParameters = 64

    /// Parses a request head given as text (see ``parse(head:)``); nil when it is malformed.
    public static func parse(_ head: String) -> HTTPRequest? {
        try? parse(head: Array(head.utf8)[...])
    }

    /// Parses a request head: the bytes before the blank line that ends it (the request line and
    /// the header lines, separated by CRLF). A pure function that never traps, whatever the
    /// bytes: anything that is not a well-formed HTTP/1.0 or 1.1 origin-form request is refused
    /// with 400 (431 when the head is too large).
    public static func parse(head: ArraySlice<UInt8>) throws(HTTPRequestError) -> HTTPRequest {
        guard head.count <= maxHeadBytes else { throw HTTPRequestError(431, "request head larger than \(maxHeadBytes) bytes") }
        var lines: [ArraySlice<UInt8>] = []
        var lineStart = head.startIndex
        var index = head.startIndex
        while index < head.endIndex {
            let byte = head[index]
            if byte == 13 {
                let next = head.index(after: index)
                guard next < head.endIndex, head[next] == 10 else { throw .bad("bare CR in the request head") }
                lines.append(head[lineStart..<index])
                index = head.index(after: next)
                lineStart = index
                continue
            }
            if byte == 10 { throw .bad("bare LF in the request head") }
            index = head.index(after: index)
        }
        lines.append(head[lineStart..<head.endIndex])
        guard lines.count - 1 <= maxHeaders else { throw HTTPRequestError(431, "more than \(maxHeaders) header lines") }

        // Request line: METHOD SP TARGET SP VERSION.
        let requestLine = lines[0]
        let parts = requestLine.split(separator: 32, maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .bad("the request line must be METHOD TARGET VERSION") }
        let method = parts[0], target = parts[1], version = parts[2]
        guard !method.isEmpty, method.count <= 32, method.allSatisfy(isTokenByte) else { throw .bad("malformed method") }
        guard version.elementsEqual("HTTP/1.1".utf8) || version.elementsEqual("HTTP/1.0".utf8) else {
            throw .bad("only HTTP/1.0 and HTTP/1.1 are supported")
        }
        guard target.first == UInt8(ascii: "/") else { throw .bad("the request target must be a path starting with /") }
        guard target.allSatisfy({ $0 > 32 && $0 < 127 && $0 != UInt8(ascii: "#") }) else {
            throw .bad("the request target holds a character that must be percent-encoded")
        }
        let question = target.firstIndex(of: UInt8(ascii: "?"))
        let rawPath = target[target.startIndex..<(question ?? target.endIndex)]
        guard let path = decode(rawPath, plusIsSpace: false) else { throw .bad("the path has a bad percent-encoding or is not UTF-8") }

        var query: [String: String] = [:]
        if let question {
            let rawQuery = target[target.index(after: question)...]
            var count = 0
            for pair in rawQuery.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
                count += 1
                guard count <= maxQueryParameters else { throw .bad("more than \(maxQueryParameters) query parameters") }
                let equals = pair.firstIndex(of: UInt8(ascii: "="))
                let rawKey = pair[pair.startIndex..<(equals ?? pair.endIndex)]
                let rawValue = equals.map { pair[pair.index(after: $0)...] } ?? pair[pair.endIndex...]
                guard let key = decode(rawKey, plusIsSpace: true), let value = decode(rawValue, plusIsSpace: true) else {
                    throw .bad("a query parameter has a bad percent-encoding or is not UTF-8")
                }
                query[key] = value
            }
        }

        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let first = line.first else { throw .bad("empty line inside the request head") }
            guard first != 32, first != 9 else { throw .bad("folded header lines are not supported") }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { throw .bad("a header line has no colon") }
            let name = line[line.startIndex..<colon]
            guard !name.isEmpty, name.allSatisfy(isTokenByte) else { throw .bad("malformed header name") }
            var value = line[line.index(after: colon)...]
            guard value.allSatisfy({ $0 == 9 || ($0 >= 32 && $0 != 127) }) else { throw .bad("a header value holds a control character") }
            while let byte = value.first, byte == 32 || byte == 9 { value = value.dropFirst() }
            while let byte = value.last, byte == 32 || byte == 9 { value = value.dropLast() }
            headers[String(decoding: name, as: UTF8.self).lowercased()] = String(decoding: value, as: UTF8.self)
        }
        return HTTPRequest(method: String(decoding: method, as: UTF8.self), path: path, query: query, headers: headers)
    }

    /// RFC 9110 `tchar`.
    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): return true
        default: return Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// Percent-decodes `bytes`; nil on a bad escape, invalid UTF-8 or a decoded control character.
    static func decode(_ bytes: ArraySlice<UInt8>, plusIsSpace: Bool) -> String? {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                guard bytes.distance(from: index, to: bytes.endIndex) >= 3,
                      let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2]) else { return nil }
                out.append(high << 4 | low)
                index += 3
                continue
            }
            out.append(plusIsSpace && byte == UInt8(ascii: "+") ? 32 : byte)
            index += 1
        }
        guard !out.contains(where: { $0 < 32 || $0 == 127 }) else { return nil }
        let text = String(decoding: out, as: UTF8.self)
        guard text.utf8.elementsEqual(out) else { return nil }  // replacement characters: not UTF-8
        return text
    }
}

/// An HTTP response.
public struct HTTPResponse: Sendable {
    /// Status code.
    public var status: Int
    /// Content-Type.
    public var contentType: String
    /// Body bytes.
    public var body: [UInt8]
    /// Extra header lines (`Name: value`).
    public var headers: [String] = []

    /// Creates a response.
    public init(status: Int = 200, contentType: String, body: [UInt8], headers: [String] = []) {
        self.status = status
        self.contentType = contentType
        self.body = body
        self.headers = headers
    }

    /// A text response.
    public static func text(_ text: String, status: Int = 200, contentType: String = "text/plain; charset=utf-8") -> HTTPResponse {
        HTTPResponse(status: status, contentType: contentType, body: Array(text.utf8))
    }

    /// A JSON response.
    public static func json(_ value: JSONValue, status: Int = 200) -> HTTPResponse {
        HTTPResponse(status: status, contentType: "application/json", body: Array(value.rendered().utf8))
    }

    /// A JSON error: `{"error": "..."}`.
    public static func error(_ status: Int, _ message: String) -> HTTPResponse {
        .json(["error": .string(message), "status": .number(status)], status: status)
    }

    func serialized(headOnly: Bool) -> [UInt8] {
        var head = "HTTP/1.1 \(status) \(Self.reason(status))\r\n"
        head += "Content-Type: \(contentType)\r\nContent-Length: \(body.count)\r\n"
        head += "Cache-Control: no-store\r\nConnection: close\r\nX-Content-Type-Options: nosniff\r\n"
        for header in headers { head += header + "\r\n" }
        head += "\r\n"
        return Array(head.utf8) + (headOnly ? [] : body)
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: return "OK"
        case 400: return "Bad Request"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 431: return "Request Header Fields Too Large"
        case 500: return "Internal Server Error"
        case 503: return "Service Unavailable"
        default: return "Status"
        }
    }
}

/// Connection limits of an ``HTTPServer``.
public struct HTTPLimits: Sendable {
    /// Most connections open at once; a new one evicts the oldest still waiting for its head.
    public var maxConnections: Int
    /// Most connections open at once from one peer address; a new one evicts that address's
    /// oldest connection still waiting for its head.
    public var maxPerAddress: Int
    /// Seconds a connection has to deliver its complete request head.
    public var headTimeout: Double
    /// Seconds a connection has, after its head, to take its response.
    public var responseTimeout: Double

    /// Creates limits.
    public init(maxConnections: Int = 128, maxPerAddress: Int = 16, headTimeout: Double = 5, responseTimeout: Double = 10) {
        self.maxConnections = max(1, maxConnections)
        self.maxPerAddress = max(1, maxPerAddress)
        self.headTimeout = headTimeout
        self.responseTimeout = responseTimeout
    }
}

/// A small HTTP/1.1 server that lives on a service's reactor: the listening socket and every
/// connection are non-blocking descriptors polled by `zmq_poll` with the service's sockets, so
/// handlers run on the reactor thread and read its state without locks. One request per
/// connection (`Connection: close`, no keep-alive), heads up to 16 KiB, GET and HEAD only.
/// Bounded against slow and idle clients (``HTTPLimits``): a connection must deliver its head
/// within the head timeout; each peer address and the server as a whole have a connection cap,
/// and a connection over a cap evicts the oldest one still waiting for its head. A response
/// that does not fit the socket buffer is flushed by a timer instead of blocking the reactor.
public final class HTTPServer {
    /// The address actually bound, `HOST:PORT`.
    public let boundAddress: String
    /// The connection limits.
    public let limits: HTTPLimits
    private let listener: Int32
    private weak var runtime: ServiceRuntime?
    private let handler: (HTTPRequest) -> HTTPResponse
    private var listenWatcher: Watcher?
    private var connections: [Int32: Connection] = [:]
    private var perAddress: [String: Int] = [:]
    private var sweeper: TimerID?
    private var dropped: [String: Counter] = [:]
    private var lastCapWarning: ContinuousClock.Instant?
    /// Requests answered since start.
    public private(set) var requestsServed: UInt64 = 0
    /// Connections open now.
    public var openConnections: Int { connections.count }

    final class Connection {
        let fd: Int32
        let address: String
        let serial: UInt64
        var input: [UInt8] = []
        var output: [UInt8] = []
        var written = 0
        var watcher: Watcher?
        let opened = ContinuousClock.now
        var headDone: ContinuousClock.Instant?
        init(fd: Int32, address: String, serial: UInt64) {
            self.fd = fd
            self.address = address
            self.serial = serial
        }
    }
    private var serial: UInt64 = 0

    /// Binds `address` (`HOST:PORT`, `tcp://HOST:PORT` or `http://HOST:PORT`; HOST an IPv4
    /// address, `localhost` or `*`) and serves with `handler`. Throws a one-line reason.
    public init(address: String, runtime: ServiceRuntime, limits: HTTPLimits = HTTPLimits(),
                handler: @escaping (HTTPRequest) -> HTTPResponse) throws {
        var addr = try Self.socketAddress(address)
        let host = Self.hostText(addr)
        let port = UInt16(bigEndian: addr.sin_port)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw RuntimeStartError("cannot create the HTTP socket: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let bound = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0, listen(fd, 1024) == 0 else {
            let reason = String(cString: strerror(errno))
            Foundation.close(fd)
            throw RuntimeStartError("cannot bind HTTP \(host):\(port): \(reason.lowercased())")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        boundAddress = "\(host):\(UInt16(bigEndian: actual.sin_port))"
        listener = fd
        self.runtime = runtime
        self.handler = handler
        self.limits = limits
        for reason in ["per_address_cap", "connection_cap", "head_timeout", "response_timeout", "malformed"] {
            dropped[reason] = runtime.metrics.counter("netplay_http_connections_dropped_total",
                                                      help: "HTTP connections closed by the server's limits or for a malformed request.",
                                                      labels: ["reason": reason])
        }
        listenWatcher = runtime.watch(fileDescriptor: fd) { [weak self] _ in self?.acceptAll() }
        sweeper = runtime.every(seconds: 0.25) { [weak self] _ in self?.sweep() }
    }

    /// Parses an HTTP listen address (`HOST:PORT`, `tcp://HOST:PORT` or `http://HOST:PORT`;
    /// HOST an IPv4 address, `localhost` or `*`); throws a one-line reason.
    public static func socketAddress(_ address: String) throws -> sockaddr_in {
        var text = address
        for scheme in ["tcp://", "http://"] where text.hasPrefix(scheme) { text.removeFirst(scheme.count) }
        if text.hasSuffix("/") { text.removeLast() }
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else {
            throw RuntimeStartError("--http must look like HOST:PORT (e.g. 127.0.0.1:9400); got '\(address)'")
        }
        var host = String(text[..<colon])
        if host == "localhost" { host = "127.0.0.1" }
        if host == "*" || host.isEmpty { host = "0.0.0.0" }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        guard inet_pton(AF_INET, host, &addr.sin_addr) == 1 else {
            throw RuntimeStartError("--http host must be an IPv4 address, localhost or *; got '\(host)'")
        }
        return addr
    }

    static func hostText(_ addr: sockaddr_in) -> String {
        var copy = addr.sin_addr
        var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
        guard inet_ntop(AF_INET, &copy, &text, socklen_t(text.count)) != nil else { return "?" }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Closes the listener and every connection.
    public func close() {
        if let listenWatcher { runtime?.unwatch(listenWatcher) }
        listenWatcher = nil
        if let sweeper { runtime?.cancel(sweeper) }
        sweeper = nil
        for connection in connections.values { drop(connection) }
        Foundation.close(listener)
    }

    private func acceptAll() {
        while true {
            var peer = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let fd = withUnsafeMutablePointer(to: &peer) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                accept(listener, $0, &length) } }
            if fd < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                return
            }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            let address = Self.hostText(peer)
            if perAddress[address, default: 0] >= limits.maxPerAddress {
                guard let victim = oldestWaiting(from: address) else { refuse(fd, reason: "per_address_cap", address: address); continue }
                evict(victim, reason: "per_address_cap")
            }
            if connections.count >= limits.maxConnections {
                guard let victim = oldestWaiting(from: nil) else { refuse(fd, reason: "connection_cap", address: address); continue }
                evict(victim, reason: "connection_cap")
            }
            serial += 1
            let connection = Connection(fd: fd, address: address, serial: serial)
            connections[fd] = connection
            perAddress[address, default: 0] += 1
            connection.watcher = runtime?.watch(fileDescriptor: fd) { [weak self, weak connection] _ in
                guard let self, let connection, self.connections[connection.fd] === connection else { return }
                self.readable(connection)
            }
        }
    }

    /// The oldest connection (from `address`, or from anyone) that has not delivered its head.
    private func oldestWaiting(from address: String?) -> Connection? {
        var oldest: Connection?
        for connection in connections.values where connection.headDone == nil && (address == nil || connection.address == address) {
            if oldest == nil || connection.serial < oldest!.serial { oldest = connection }
        }
        return oldest
    }

    private func evict(_ connection: Connection, reason: String) {
        dropped[reason]?.increment()
        warnCap(reason: reason, address: connection.address)
        drop(connection)
    }

    private func refuse(_ fd: Int32, reason: String, address: String) {
        dropped[reason]?.increment()
        warnCap(reason: reason, address: address)
        Foundation.close(fd)
    }

    /// At most one warning a minute about connection caps.
    private func warnCap(reason: String, address: String) {
        let now = ContinuousClock.now
        if let last = lastCapWarning, now - last < .seconds(60) { return }
        lastCapWarning = now
        runtime?.logger.warning("HTTP connection cap reached; closing the oldest idle connection (further ones are counted in netplay_http_connections_dropped_total)",
                                metadata: ["reason": "\(reason)", "peer": "\(address)", "open": "\(connections.count)",
                                           "max_per_address": "\(limits.maxPerAddress)", "max_connections": "\(limits.maxConnections)"])
    }

    private func readable(_ connection: Connection) {
        var buffer = [UInt8](repeating: 0, count: 8192)
        let searched = max(0, connection.input.count - 3)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(connection.fd, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                connection.input += buffer[0..<count]
                if connection.input.count > HTTPRequest.maxHeadBytes + 4, Self.headEnd(connection.input, from: searched) == nil {
                    connection.headDone = ContinuousClock.now
                    dropped["malformed"]?.increment()
                    respond(connection, .error(431, "request head larger than \(HTTPRequest.maxHeadBytes) bytes"), headOnly: false)
                    return
                }
                continue
            }
            if count == 0 { drop(connection); return }  // peer closed before a full request
            if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { break }
            drop(connection)
            return
        }
        guard connection.headDone == nil, let end = Self.headEnd(connection.input, from: searched) else { return }
        connection.headDone = ContinuousClock.now
        let response = respond(to: connection.input[..<end])
        if response.status == 400 || response.status == 431 { dropped["malformed"]?.increment() }
        respond(connection, response.response, headOnly: response.headOnly)
    }

    /// The whole request handling for one complete head, as a function of its bytes.
    func respond(to head: ArraySlice<UInt8>) -> (response: HTTPResponse, status: Int, headOnly: Bool) {
        let request: HTTPRequest
        do {
            request = try HTTPRequest.parse(head: head)
        } catch {
            return (.error(error.status, error.message), error.status, false)
        }
        guard request.method == "GET" || request.method == "HEAD" else {
            var response = HTTPResponse.error(405, "only GET and HEAD are supported")
            response.headers.append("Allow: GET, HEAD")
            return (response, 405, false)
        }
        let response = handler(request)
        requestsServed += 1
        return (response, response.status, request.method == "HEAD")
    }

    /// Where the blank line ending the head starts (the index of its CRLFCRLF), nil while
    /// incomplete; the search starts at `from` (bytes before it were searched already).
    public static func headEnd(_ bytes: [UInt8], from: Int = 0) -> Int? {
        bytes.withUnsafeBufferPointer { buffer in
            guard buffer.count >= 4 else { return nil }
            var index = max(0, from)
            while index <= buffer.count - 4 {
                if buffer[index + 3] != 10 { index += buffer[index + 3] == 13 ? 1 : 4; continue }
                if buffer[index] == 13 && buffer[index + 1] == 10 && buffer[index + 2] == 13 { return index }
                index += 1
            }
            return nil
        }
    }

    private func respond(_ connection: Connection, _ response: HTTPResponse, headOnly: Bool) {
        if let watcher = connection.watcher { runtime?.unwatch(watcher) }
        connection.watcher = nil
        connection.output = response.serialized(headOnly: headOnly)
        connection.written = 0
        flush(connection)
    }

    private func flush(_ connection: Connection) {
        while connection.written < connection.output.count {
            let count = connection.output.withUnsafeBytes { buffer in
                send(connection.fd, buffer.baseAddress! + connection.written, buffer.count - connection.written, Int32(MSG_NOSIGNAL))
            }
            if count > 0 { connection.written += count; continue }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
                runtime?.after(seconds: 0.005) { [weak self, weak connection] _ in
                    guard let self, let connection, self.connections[connection.fd] === connection else { return }
                    self.flush(connection)
                }
                return
            }
            break
        }
        shutdown(connection.fd, Int32(SHUT_WR))
        drop(connection)
    }

    private func drop(_ connection: Connection) {
        if let watcher = connection.watcher { runtime?.unwatch(watcher) }
        connection.watcher = nil
        if connections[connection.fd] === connection {
            connections.removeValue(forKey: connection.fd)
            let left = perAddress[connection.address, default: 1] - 1
            perAddress[connection.address] = left > 0 ? left : nil
            Foundation.close(connection.fd)
        }
    }

    private func sweep() {
        let now = ContinuousClock.now
        let head = Duration.milliseconds(Int(limits.headTimeout * 1000))
        let response = Duration.milliseconds(Int(limits.responseTimeout * 1000))
        for connection in connections.values {
            if let done = connection.headDone {
                if now - done > response { dropped["response_timeout"]?.increment(); drop(connection) }
            } else if now - connection.opened > head {
                dropped["head_timeout"]?.increment()
                drop(connection)
            }
        }
    }
}
