import Foundation
import IPv4Sockets
import Logging
import NetplayService

/// A small HTTP/1.1 server that lives on a service's reactor: the listening socket and every
/// connection are non-blocking descriptors polled by `zmq_poll` with the service's sockets, so
/// handlers run on the reactor thread and read its state without locks. One request per
/// connection (`Connection: close`, no keep-alive), heads up to 16 KiB, GET and HEAD only.
/// Bounded against slow and idle clients (``HTTPLimits``): a connection must deliver its head
/// within the head timeout; each peer address and the server as a whole have a connection cap,
/// and a connection over a cap evicts the oldest one still waiting for its head or whose
/// response has stalled. A response that does not fit the socket buffer is flushed by a timer
/// (backing off while the client reads nothing) instead of blocking the reactor.
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
        /// Its response: the head, then the body (shared with every connection sent the same page).
        var output: (head: [UInt8], body: [UInt8]) = ([], [])
        /// Bytes of the head, then of the body, sent so far.
        var written = 0
        var outputCount: Int { output.head.count + output.body.count }
        var watcher: Watcher?
        let opened = ContinuousClock.now
        var headDone: ContinuousClock.Instant?
        /// When its whole response was sent (its end then shut): what the client still sends is
        /// read and dropped until it closes (``HTTPServer/lingerSeconds`` at most).
        var finished: ContinuousClock.Instant?
        /// When its response last moved (its head, then each write that took bytes).
        var progressed = ContinuousClock.now
        /// The wait before the next write when the socket took nothing (5 ms, doubling to 200 ms).
        var retryDelay = HTTPServer.firstRetry

        /// A client whose response has not moved for a second (it does not read): like one that
        /// has not sent its head, it is evicted before anyone is refused.
        func isStalled(at now: ContinuousClock.Instant) -> Bool {
            guard headDone != nil else { return false }
            return written < outputCount && now - progressed > .seconds(1)
        }
        init(fd: Int32, address: String, serial: UInt64) {
            self.fd = fd
            self.address = address
            self.serial = serial
        }
    }
    private var serial: UInt64 = 0
    static let firstRetry = 0.005
    /// Seconds a connection whose response was sent waits for the client to close, reading
    /// what it sends (``lingerBytes`` at most).
    static let lingerSeconds = 1.0
    static let lingerBytes = 64 << 10

    /// Binds `address` (`HOST:PORT`, `tcp://HOST:PORT` or `http://HOST:PORT`; HOST an IPv4
    /// address, `localhost` or `*`) and serves with `handler`. Throws a one-line reason.
    public init(address: String, runtime: ServiceRuntime, limits: HTTPLimits = HTTPLimits(),
                handler: @escaping (HTTPRequest) -> HTTPResponse) throws {
        let addr = try Self.socketAddress(address)
        let host = Self.hostText(addr)
        let port = UInt16(bigEndian: addr.sin_port)
        let fd: Int32
        do {
            let socket = try IPv4Socket.bound(.stream, to: addr, reuseAddress: true, nonBlocking: true, listenBacklog: 1024)
            fd = socket.descriptor
            boundAddress = "\(host):\(socket.port)"
        } catch where error.step == .socket {
            throw RuntimeStartError("cannot create the HTTP socket: \(error)")
        } catch {
            throw RuntimeStartError("cannot bind HTTP \(host):\(port): \(error.reason.lowercased())")
        }
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
        guard let addr = IPv4Socket.address(host: host, port: port) else {
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

    /// The oldest connection (from `address`, or from anyone) that has not delivered its head,
    /// or whose response has stalled. Only those were evictable once: clients asking for a large
    /// page and then never reading held every place for the response timeout, and Prometheus's
    /// scrapes were refused.
    private func oldestWaiting(from address: String?) -> Connection? {
        let now = ContinuousClock.now
        var oldest: Connection?
        for connection in connections.values where (connection.headDone == nil || connection.finished != nil || connection.isStalled(at: now))
            && (address == nil || connection.address == address) {
            if oldest == nil || connection.serial < oldest!.serial { oldest = connection }
        }
        return oldest
    }

    private func evict(_ connection: Connection, reason: String) {
        // One already answered (lingering for its client to close) goes without a count or a
        // warning: nobody was refused anything.
        if connection.finished != nil { drop(connection); return }
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
                // A whole head: nothing after it is read (a client streaming bytes behind its
                // head would otherwise keep the reactor here).
                if Self.headEnd(connection.input, from: searched) != nil { break }
                if connection.input.count > HTTPRequest.maxHeadBytes + 4 {
                    connection.headDone = ContinuousClock.now
                    dropped["malformed"]?.increment()
                    respond(connection, .error(431, "request head larger than \(HTTPRequest.maxHeadBytes) bytes"), headOnly: false)
                    return
                }
                continue
            }
            if count == 0 {
                // The peer closed its side: answered if its head came whole (`printf ... | nc -N`),
                // else dropped.
                if Self.headEnd(connection.input, from: searched) == nil { drop(connection); return }
                break
            }
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
        connection.progressed = ContinuousClock.now
        flush(connection)
    }

    private func flush(_ connection: Connection) {
        let before = connection.written
        while connection.written < connection.outputCount {
            let inHead = connection.written < connection.output.head.count
            let offset = inHead ? connection.written : connection.written - connection.output.head.count
            let count = (inHead ? connection.output.head : connection.output.body).withUnsafeBytes { buffer in
                send(connection.fd, buffer.baseAddress! + offset, buffer.count - offset, Int32(MSG_NOSIGNAL))
            }
            if count > 0 { connection.written += count; continue }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
                // Sooner while the client reads, backing off while it does not: a few stalled
                // clients polled every 5 ms were thousands of failing sends a second.
                if connection.written > before {
                    connection.progressed = ContinuousClock.now
                    connection.retryDelay = Self.firstRetry
                } else {
                    connection.retryDelay = min(0.2, connection.retryDelay * 2)
                }
                runtime?.after(seconds: connection.retryDelay) { [weak self, weak connection] _ in
                    guard let self, let connection, self.connections[connection.fd] === connection else { return }
                    self.flush(connection)
                }
                return
            }
            break
        }
        linger(connection)
    }

    /// Ends a connection whose response was sent: its end is shut at once, and it is closed once
    /// the client closes, after reading what the client still sends. Closing with bytes unread
    /// (a second request sent behind the first, a body) makes the kernel reset the connection,
    /// and a reset empties the client's receive queue: the response it had not read yet was lost.
    private func linger(_ connection: Connection) {
        shutdown(connection.fd, Int32(SHUT_WR))
        connection.finished = ContinuousClock.now
        var drained = 0
        if discardInput(connection, drained: &drained) { drop(connection); return }
        connection.watcher = runtime?.watch(fileDescriptor: connection.fd) { [weak self, weak connection] _ in
            guard let self, let connection, self.connections[connection.fd] === connection else { return }
            if self.discardInput(connection, drained: &drained) { self.drop(connection) }
        }
    }

    /// Reads and drops what `connection` sent; true once it closed, failed or sent more than
    /// ``lingerBytes`` since it was answered.
    private func discardInput(_ connection: Connection, drained: inout Int) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 8192)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(connection.fd, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                drained += count
                if drained > Self.lingerBytes { return true }
                continue
            }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) { return false }
            return true
        }
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
        let linger = Duration.milliseconds(Int(Self.lingerSeconds * 1000))
        for connection in connections.values {
            if let finished = connection.finished {
                if now - finished > linger { drop(connection) }
            } else if let done = connection.headDone {
                if now - done > response { dropped["response_timeout"]?.increment(); drop(connection) }
            } else if now - connection.opened > head {
                dropped["head_timeout"]?.increment()
                drop(connection)
            }
        }
    }
}
