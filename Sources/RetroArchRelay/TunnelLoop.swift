import CEpoll
import Foundation
import IPv4Sockets
import NetplayWire
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

#if os(Linux)
/// Listening sockets.
enum TunnelSockets {
    /// A non-blocking IPv4 listening socket on `host:port` (port 0: any), and the port bound.
    static func listen(host: String, port: UInt16) throws -> (Int32, UInt16) {
        do {
            let socket = try IPv4Socket.bound(.stream, host: host, port: port, reuseAddress: true, nonBlocking: true, listenBacklog: 512)
            return (socket.descriptor, socket.port)
        } catch where error.step == .address {
            throw TunnelServerError("cannot listen for RetroArch on \(host):\(port): not an IPv4 address (RetroArch reaches relays over IPv4)")
        } catch {
            throw TunnelServerError("cannot listen for RetroArch on \(host):\(port): \(error)")
        }
    }
}

/// The tunnel's thread: the epoll loop, the connections and the core. Confined to that thread.
final class TunnelLoop: TunnelTransport {
    /// One accepted connection.
    final class Connection {
        let fd: Int32
        let key: TunnelConnection
        /// Bytes queued towards it, from `sent` on.
        var queue: [UInt8] = []
        var sent = 0
        var watchingWrites = false
        var reading = true
        /// Connections whose reading waits for this one's queue to drain.
        var holding: Set<UInt64> = []
        /// Closed by the tunnel; the socket goes once its queue is written (or at `closeBy`).
        var closeBy: UInt64?

        init(fd: Int32, key: TunnelConnection) {
            self.fd = fd
            self.key = key
        }

        var queued: Int { queue.count - sent }
    }

    static let wakeToken: UInt64 = 1 << 63
    static let listenerToken: UInt64 = 1 << 62
    static let readChunk = 65_536
    static let readsPerWakeup = 4
    static let highWater = 256 << 10
    static let lowWater = 64 << 10
    static let maxQueued = 8 << 20
    static let lingerMs: UInt64 = 2_000
    static let tickMs: UInt64 = 250
    /// The snapshot is rebuilt at most this often for a change (a session opened or closed, a
    /// client linked): it holds every session's report, and a stranger opening and closing
    /// sessions in a loop rebuilt it twice per connection, on the thread every session shares.
    static let publishEveryMs: UInt64 = 50
    /// How long a listener rests when no descriptor is free even to shed a connection.
    static let listenerRestMs: UInt64 = 100

    let configuration: TunnelConfiguration
    private let epoll: Int32
    private let wakeRead: Int32
    private let onEvent: @Sendable (TunnelEvent) -> Void
    private var core: TunnelCore!
    private var listeners: [Int: Int32] = [:]
    private var listenerPorts: [Int: UInt16] = [:]
    private var nextListener = 1
    private var connections: [UInt64: Connection] = [:]
    private var lingering: [UInt64: Connection] = [:]
    private var nextId: UInt64 = 1
    private var reading: UInt64?
    private var buffer = [UInt8](repeating: 0, count: TunnelLoop.readChunk)
    private var publish: ((TunnelSnapshot) -> Void)?
    private var stopping = false
    /// Kept open to be given up when the process runs out of descriptors (``shedOne(_:listener:)``).
    private var spareFd: Int32 = -1
    /// A change the published snapshot does not show yet, and when one was last published.
    private var snapshotDue = false
    private var lastPublishMs: UInt64 = 0
    private var published: UInt64 = 0
    /// Listeners taken off the wait, each until when: out of descriptors with no spare either,
    /// a level-triggered listener would wake the loop on every wait.
    private var restingListeners: [Int: UInt64] = [:]

    init(configuration: TunnelConfiguration, mainListener: Int32, wakeRead: Int32, wallClockMs: @escaping @Sendable () -> UInt64,
         onEvent: @escaping @Sendable (TunnelEvent) -> Void) throws {
        self.configuration = configuration
        self.wakeRead = wakeRead
        self.onEvent = onEvent
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epoll >= 0 else {
            Glibc.close(mainListener)
            throw TunnelServerError("cannot make the RetroArch tunnel's epoll: errno \(errno)")
        }
        core = TunnelCore(configuration: configuration, transport: self, wallClockMs: wallClockMs)
        listeners[0] = mainListener
        listenerPorts[0] = configuration.port
        watchListener(0, fd: mainListener, op: EPOLL_CTL_ADD, events: UInt32(EPOLLIN.rawValue))
        watch(wakeRead, token: Self.wakeToken, events: UInt32(EPOLLIN.rawValue))
        spareFd = open("/dev/null", O_RDONLY | O_CLOEXEC)
    }

    static func nowMs() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1000 + UInt64(time.tv_nsec) / 1_000_000
    }

    // MARK: The loop

    func run(publishing publish: @escaping (TunnelSnapshot) -> Void) {
        self.publish = publish
        var events = [epoll_event](repeating: epoll_event(), count: 256)
        var lastTick = Self.nowMs()
        while !stopping {
            let count = epoll_wait(epoll, &events, Int32(events.count), snapshotDue || !restingListeners.isEmpty ? 50 : 100)
            for index in 0..<max(0, Int(count)) {
                let token = cepoll_token(&events[index])
                let flags = events[index].events
                if token == Self.wakeToken {
                    stopping = true
                } else if token & Self.listenerToken != 0 {
                    accept(listener: Int(token & ~Self.listenerToken))
                } else if let connection = connections[token] {
                    if flags & UInt32(EPOLLOUT.rawValue) != 0 { flush(connection) }
                    let gone = flags & (UInt32(EPOLLHUP.rawValue) | UInt32(EPOLLERR.rawValue) | UInt32(EPOLLRDHUP.rawValue)) != 0
                    if gone, !connection.reading, connections[token] != nil {
                        // Held (not read) and reset or hung up: a reset is reported whatever the
                        // mask (level-triggered, on every wait: 100 % CPU), and a hang-up would
                        // not be seen until the connection is read again, which may be never.
                        hungUp(connection)
                    } else if flags & UInt32(EPOLLIN.rawValue) != 0 || gone, connections[token] != nil {
                        read(connection)
                    }
                } else if let connection = lingering[token] {
                    flushLingering(connection, flags: flags)
                }
            }
            let now = Self.nowMs()
            if now >= lastTick + Self.tickMs {
                lastTick = now
                core.tick(nowMs: now)
                for connection in Array(lingering.values) where now >= connection.closeBy ?? 0 { release(connection) }
                publishSnapshot()
            } else if snapshotDue, now >= lastPublishMs + Self.publishEveryMs {
                publishSnapshot()
            }
            for (listener, until) in restingListeners where now >= until {
                restingListeners[listener] = nil
                if let fd = listeners[listener] { watchListener(listener, fd: fd, op: EPOLL_CTL_MOD, events: UInt32(EPOLLIN.rawValue)) }
            }
        }
        core.shutdown()
        for connection in Array(lingering.values) { release(connection) }
        for connection in Array(connections.values) { release(connection) }
        for fd in listeners.values { Glibc.close(fd) }
        Glibc.close(wakeRead)
        Glibc.close(epoll)
        if spareFd >= 0 { Glibc.close(spareFd) }
        publishSnapshot()
    }

    private func publishSnapshot() {
        snapshotDue = false
        lastPublishMs = Self.nowMs()
        var snapshot = TunnelSnapshot()
        snapshot.reports = core.reports()
        snapshot.closes = core.closes
        snapshot.bytesPiped = core.bytesPiped
        snapshot.sessions = core.sessionCount
        snapshot.links = core.linkCount
        snapshot.connections = core.connectionCount
        snapshot.generation = published
        published += 1
        publish?(snapshot)
    }

    private func watch(_ fd: Int32, token: UInt64, events: UInt32) {
        var event = epoll_event()
        event.events = events
        cepoll_set_token(&event, token)
        epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event)
    }

    private func watchListener(_ listener: Int, fd: Int32, op: Int32, events: UInt32) {
        var event = epoll_event()
        event.events = events
        cepoll_set_token(&event, Self.listenerToken | UInt64(listener))
        epoll_ctl(epoll, op, fd, &event)
    }

    private func rewatch(_ connection: Connection) {
        var event = epoll_event()
        // A hang-up is watched for while the connection is open, also when it is held (not
        // read); a closing one (its queue still being written) waits for writability only.
        let hangUps = connection.closeBy == nil ? UInt32(EPOLLRDHUP.rawValue) : 0
        event.events = (connection.reading ? UInt32(EPOLLIN.rawValue) : 0) | (connection.watchingWrites ? UInt32(EPOLLOUT.rawValue) : 0) | hangUps
        cepoll_set_token(&event, connection.key.id)
        epoll_ctl(epoll, EPOLL_CTL_MOD, connection.fd, &event)
    }

    // MARK: Accepting and reading

    private func accept(listener: Int) {
        guard let listenFd = listeners[listener] else { return }
        for _ in 0..<64 {
            var address = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let fd = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    cepoll_accept(listenFd, $0, &length)
                }
            }
            guard fd >= 0 else {
                if errno == EMFILE || errno == ENFILE { shedOne(listenFd, listener: listener) }
                return
            }
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, socklen_t(MemoryLayout<Int32>.size))
            let id = nextId
            nextId += 1
            let connection = Connection(fd: fd, key: TunnelConnection(listener: listener, id: id))
            connections[id] = connection
            watch(fd, token: id, events: UInt32(EPOLLIN.rawValue) | UInt32(EPOLLRDHUP.rawValue))
            core.opened(connection.key, address: Self.addressBytes(address), nowMs: Self.nowMs())
        }
    }

    /// Out of file descriptors: the connection stays in the listen backlog and, level-triggered,
    /// the listener is reported again at once, for good. The spare descriptor kept for this lets
    /// it be accepted and closed at once (refused as `connection_limit`), and is taken back.
    private func shedOne(_ listenFd: Int32, listener: Int) {
        // Another thread (the reactor, libzmq) may have taken the descriptor the last shedding
        // freed before it was taken back: try again, and failing that, rest the listener.
        if spareFd < 0 { spareFd = open("/dev/null", O_RDONLY | O_CLOEXEC) }
        guard spareFd >= 0 else {
            watchListener(listener, fd: listenFd, op: EPOLL_CTL_MOD, events: 0)
            restingListeners[listener] = Self.nowMs() + Self.listenerRestMs
            return
        }
        Glibc.close(spareFd)
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let fd = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { cepoll_accept(listenFd, $0, &length) }
        }
        if fd >= 0 {
            Glibc.close(fd)
            core.shedByTransport(address: Self.addressBytes(address))
        }
        spareFd = open("/dev/null", O_RDONLY | O_CLOEXEC)
    }

    static func addressBytes(_ storage: sockaddr_storage) -> [UInt8] {
        var storage = storage
        switch Int32(storage.ss_family) {
        case AF_INET:
            return withUnsafeBytes(of: &storage) { raw in
                raw.baseAddress!.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { pointer in
                    var address = pointer.pointee.sin_addr
                    return withUnsafeBytes(of: &address) { Array($0) }
                }
            }
        case AF_INET6:
            return withUnsafeBytes(of: &storage) { raw in
                raw.baseAddress!.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { pointer in
                    var address = pointer.pointee.sin6_addr
                    return withUnsafeBytes(of: &address) { Array($0) }
                }
            }
        default:
            return []
        }
    }

    private func read(_ connection: Connection) {
        let id = connection.key.id
        for _ in 0..<Self.readsPerWakeup {
            guard connection.reading, connections[id] != nil else { return }
            let got = buffer.withUnsafeMutableBytes { Glibc.read(connection.fd, $0.baseAddress, $0.count) }
            if got > 0 {
                reading = id
                buffer.withUnsafeBytes { core.received(UnsafeRawBufferPointer(rebasing: $0[0..<got]), on: connection.key, nowMs: Self.nowMs()) }
                reading = nil
                if got < Self.readChunk { return }
            } else if got < 0 && (errno == EAGAIN || errno == EINTR) {
                return
            } else {
                hungUp(connection)
                return
            }
        }
    }

    /// Hung up (read 0) or reset: the core forgets it and closes what depends on it.
    private func hungUp(_ connection: Connection) {
        connections[connection.key.id] = nil
        core.closedByPeer(connection.key, nowMs: Self.nowMs())
        release(connection)
    }

    // MARK: Writing, back-pressure

    private func flush(_ connection: Connection) {
        while connection.queued > 0 {
            let written = connection.queue.withUnsafeBytes {
                Glibc.send(connection.fd, $0.baseAddress! + connection.sent, connection.queued, Int32(MSG_NOSIGNAL))
            }
            if written > 0 {
                connection.sent += written
            } else if written < 0 && errno == EINTR {
                continue
            } else {
                break
            }
        }
        if connection.queued == 0 {
            connection.queue.removeAll(keepingCapacity: connection.queue.capacity <= Self.highWater)
            connection.sent = 0
            if connection.watchingWrites {
                connection.watchingWrites = false
                rewatch(connection)
            }
        } else if connection.sent >= Self.highWater {
            connection.queue.removeFirst(connection.sent)
            connection.sent = 0
        }
        if connection.queued < Self.lowWater, !connection.holding.isEmpty { releaseHeld(by: connection) }
    }

    /// Lets the connections `connection` held back read again.
    private func releaseHeld(by connection: Connection) {
        for id in connection.holding {
            guard let held = connections[id], !held.reading else { continue }
            held.reading = true
            rewatch(held)
        }
        connection.holding.removeAll()
    }

    func send(_ bytes: UnsafeRawBufferPointer, to key: TunnelConnection) -> Bool {
        guard let connection = connections[key.id] else { return false }
        var offset = 0
        if connection.queued == 0 {
            while offset < bytes.count {
                // send, not write: a peer's reset must not raise SIGPIPE in a process that
                // embeds the relay without ignoring it.
                let written = Glibc.send(connection.fd, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
                if written > 0 {
                    offset += written
                } else if written < 0 && errno == EINTR {
                    continue
                } else if written < 0 && errno == EAGAIN {
                    break
                } else {
                    return true  // the peer is gone: its hang-up is read next
                }
            }
            if offset == bytes.count { return true }
        }
        guard connection.queued + bytes.count - offset <= Self.maxQueued else { return false }
        connection.queue.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[offset...]))
        if !connection.watchingWrites {
            connection.watchingWrites = true
            rewatch(connection)
        }
        // Back-pressure: whoever is filling this queue stops reading until it drains; a host
        // whose own control requests fill its queue with answers it does not read stops too.
        if connection.queued > Self.highWater, let source = reading, let writer = connections[source], writer.reading {
            writer.reading = false
            rewatch(writer)
            connection.holding.insert(source)
        }
        return true
    }

    func close(_ key: TunnelConnection) {
        guard let connection = connections.removeValue(forKey: key.id) else { return }
        releaseHeld(by: connection)
        if connection.queued > 0 {
            // Its queue is written first (a client's last bytes, an "out of date" answer).
            connection.closeBy = Self.nowMs() + Self.lingerMs
            connection.reading = false
            lingering[key.id] = connection
            rewatch(connection)
        } else {
            release(connection)
        }
    }

    private func flushLingering(_ connection: Connection, flags: UInt32) {
        if flags & (UInt32(EPOLLHUP.rawValue) | UInt32(EPOLLERR.rawValue)) != 0 {
            release(connection)
            return
        }
        flush(connection)
        if connection.queued == 0 { release(connection) }
    }

    /// Closes the socket for good.
    private func release(_ connection: Connection) {
        lingering[connection.key.id] = nil
        connections[connection.key.id] = nil
        epoll_ctl(epoll, EPOLL_CTL_DEL, connection.fd, nil)
        Glibc.close(connection.fd)
    }

    // MARK: Session ports and events

    func openSessionPort(for session: TunnelID) -> (listener: Int, port: UInt16)? {
        guard let range = configuration.sessionPorts else { return nil }
        let taken = Set(listenerPorts.values)
        for port in range where !taken.contains(port) {
            guard let (fd, bound) = try? TunnelSockets.listen(host: configuration.bindHost, port: port) else { continue }
            let listener = nextListener
            nextListener += 1
            listeners[listener] = fd
            listenerPorts[listener] = bound
            watchListener(listener, fd: fd, op: EPOLL_CTL_ADD, events: UInt32(EPOLLIN.rawValue))
            return (listener, bound)
        }
        return nil
    }

    func closeSessionPort(listener: Int) {
        guard listener != 0, let fd = listeners.removeValue(forKey: listener) else { return }
        restingListeners[listener] = nil
        listenerPorts[listener] = nil
        epoll_ctl(epoll, EPOLL_CTL_DEL, fd, nil)
        Glibc.close(fd)
    }

    func tunnelEvent(_ event: TunnelEvent) {
        switch event {
        case .sessionOpened, .clientLinked, .sessionClosed: snapshotDue = true  // published within publishEveryMs
        case .refused: break
        }
        onEvent(event)
    }
}
#endif
