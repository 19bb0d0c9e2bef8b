import Foundation
import NetplayService

/// An HTTP request as the telemetry server sees it (GET and HEAD only).
public struct HTTPRequest: Sendable {
    /// `GET` or `HEAD` (others are answered 405 before reaching a handler).
    public var method: String
    /// The path without the query, percent-decoded.
    public var path: String
    /// Query parameters (last value wins).
    public var query: [String: String]
    /// Header fields, lower-cased names.
    public var headers: [String: String]

    /// Parses the request head (up to the blank line); nil when it is not HTTP/1.x.
    public static func parse(_ head: String) -> HTTPRequest? {
        let lines = head.components(separatedBy: "\r\n")
        let parts = lines.first?.split(separator: " ") ?? []
        guard parts.count == 3, parts[2].hasPrefix("HTTP/1.") else { return nil }
        let target = String(parts[1])
        let pathPart = target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? "/"
        var query: [String: String] = [:]
        if let queryText = target.split(separator: "?", maxSplits: 1).dropFirst().first {
            for pair in queryText.split(separator: "&") {
                let kv = pair.split(separator: "=", maxSplits: 1).map(String.init)
                let key = (kv[0].replacingOccurrences(of: "+", with: " ")).removingPercentEncoding ?? kv[0]
                let value = kv.count > 1 ? ((kv[1].replacingOccurrences(of: "+", with: " ")).removingPercentEncoding ?? kv[1]) : ""
                query[key] = value
            }
        }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return HTTPRequest(method: String(parts[0]), path: pathPart.removingPercentEncoding ?? pathPart, query: query, headers: headers)
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
        case 413: return "Request Header Fields Too Large"
        case 500: return "Internal Server Error"
        case 503: return "Service Unavailable"
        default: return "Status"
        }
    }
}

/// A small HTTP/1.1 server that lives on a service's reactor: the listening socket and every
/// connection are non-blocking descriptors polled by `zmq_poll` with the service's sockets, so
/// handlers run on the reactor thread and read its state without locks. One request per
/// connection (`Connection: close`), heads up to 16 KiB, GET and HEAD only; slow clients are
/// dropped after a timeout, and a response that does not fit the socket buffer is flushed by a
/// timer instead of blocking the reactor.
public final class HTTPServer {
    /// The address actually bound, `HOST:PORT`.
    public let boundAddress: String
    private let listener: Int32
    private weak var runtime: ServiceRuntime?
    private let handler: (HTTPRequest) -> HTTPResponse
    private var listenWatcher: Watcher?
    private var connections: [Int32: Connection] = [:]
    private var sweeper: TimerID?
    /// Requests answered since start.
    public private(set) var requestsServed: UInt64 = 0
    /// Most connections open at once.
    public let maxConnections = 128
    /// Seconds a connection may take to send its request or receive its response.
    public var timeout: Double = 5

    final class Connection {
        let fd: Int32
        var input: [UInt8] = []
        var output: [UInt8] = []
        var written = 0
        var watcher: Watcher?
        let opened = ContinuousClock.now
        init(fd: Int32) { self.fd = fd }
    }

    /// Binds `address` (`HOST:PORT`, `tcp://HOST:PORT` or `http://HOST:PORT`; HOST an IPv4
    /// address, `localhost` or `*`) and serves with `handler`. Throws a one-line reason.
    public init(address: String, runtime: ServiceRuntime, handler: @escaping (HTTPRequest) -> HTTPResponse) throws {
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
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw RuntimeStartError("cannot create the HTTP socket: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let bound = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0, listen(fd, 128) == 0 else {
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
        listenWatcher = runtime.watch(fileDescriptor: fd) { [weak self] _ in self?.acceptAll() }
        sweeper = runtime.every(seconds: 0.25) { [weak self] _ in self?.sweep() }
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
            let fd = accept(listener, nil, nil)
            if fd < 0 { return }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            if connections.count >= maxConnections {
                Foundation.close(fd)
                continue
            }
            let connection = Connection(fd: fd)
            connections[fd] = connection
            connection.watcher = runtime?.watch(fileDescriptor: fd) { [weak self, weak connection] _ in
                guard let self, let connection else { return }
                self.readable(connection)
            }
        }
    }

    private func readable(_ connection: Connection) {
        var buffer = [UInt8](repeating: 0, count: 8192)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(connection.fd, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                connection.input += buffer[0..<count]
                if connection.input.count > 16384 {
                    respond(connection, .error(413, "request head too large"), headOnly: false)
                    return
                }
                continue
            }
            if count == 0 { drop(connection); return }  // peer closed before a full request
            if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { break }
            drop(connection)
            return
        }
        guard connection.output.isEmpty, let end = Self.headEnd(connection.input) else { return }
        let head = String(decoding: connection.input[..<end], as: UTF8.self)
        guard let request = HTTPRequest.parse(head) else {
            respond(connection, .error(400, "malformed HTTP request"), headOnly: false)
            return
        }
        guard request.method == "GET" || request.method == "HEAD" else {
            var response = HTTPResponse.error(405, "only GET and HEAD are supported")
            response.headers.append("Allow: GET, HEAD")
            respond(connection, response, headOnly: false)
            return
        }
        let response = handler(request)
        requestsServed += 1
        respond(connection, response, headOnly: request.method == "HEAD")
    }

    static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4) where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index
        }
        return nil
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
            Foundation.close(connection.fd)
        }
    }

    private func sweep() {
        let limit = Duration.milliseconds(Int(timeout * 1000))
        let now = ContinuousClock.now
        for connection in connections.values where now - connection.opened > limit { drop(connection) }
    }
}
