import CEpoll
import CZeroMQ
import Foundation
import ZeroMQ

/// Keeps what peers can make a public socket hold within bounds.
///
/// libzmq keeps every frame of a multipart message until its last frame arrives, with no limit
/// (`ZMQ_MAXMSGSIZE` caps one frame), and the service sees nothing of it until then: one
/// connection sending 1 MiB frames marked "more" grew a service by 1.5 GB in seconds. The guard
/// compares, per connection, the bytes libzmq read (the kernel's `tcpi_bytes_received` less what
/// waits in the receive queue) with the bytes of the frames the service was handed
/// (``InboundLedger``). A connection holding more than ``Limits/perConnectionDrained`` while the
/// socket has no whole message waiting, more than ``Limits/perConnection`` at any time, or the
/// largest while all of them hold more than ``Limits/total``, is shut down: libzmq drops its
/// half-received message and frees it. Only TCP connections are watched (ipc and inproc are this machine's own).
///
/// Bytes a peer sends that are no message (handshake, subscriptions, heartbeats) cannot be told
/// from a message's frames by the kernel's count, so each connection is allowed
/// ``Limits/allowance`` and ``Limits/allowancePerSecond`` of its age besides: a peer can hold
/// that much too, without limit in time (5.5 MB a day).
///
/// A public PUB socket is guarded the same way: what subscribers send it (subscriptions) is
/// never handed to the service, and libzmq keeps an unfinished message from them as well.
final class InboundGuard {
    /// How much unhanded input the guard lets connections hold.
    struct Limits {
        /// Per connection, once the socket holds no whole message for the service (so what libzmq
        /// holds of the connection is at most the message it is receiving): a whole message
        /// (``SocketDefaults/maxMessageBytes``) and more. Tight, because an unfinished message of
        /// empty frames costs libzmq about 64 bytes a frame against 2 on the wire without
        /// CurveZMQ.
        var perConnectionDrained = 2 << 20
        /// Per connection, whatever the socket holds: a burst of whole messages waiting for the
        /// reactor, and more.
        var perConnection = 64 << 20
        /// Over every connection of the socket.
        var total = 256 << 20
        /// The handshake and subscriptions, which are never handed to the service.
        var allowance = 256 << 10
        /// Heartbeats (ZMTP PING and PONG, wrapped by CurveZMQ: about 42 bytes a second at our
        /// clients' 2 s interval), per second of a connection's age: never handed to the
        /// service either.
        var allowancePerSecond = 64
    }

    /// A connection the guard shut down.
    struct Cut {
        let peer: String
        let held: Int
        let reason: String
    }

    private let ledger = InboundLedger()
    private let monitor: SocketMonitor
    /// The guarded socket.
    let socket: Socket
    private let limits: Limits
    /// Open TCP connections by descriptor: the peer's address and when the guard saw it open.
    private var connections: [Int32: (peer: String, since: ContinuousClock.Instant)] = [:]

    /// Watches `socket`'s connections (the caller polls ``events`` and calls ``check()``).
    init(_ socket: Socket, limits: Limits = Limits()) throws {
        self.limits = limits
        self.socket = socket
        socket.inboundLedger = ledger
        monitor = try socket.monitor(events: ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CLOSED)
    }

    /// The socket that receives the connection events.
    var events: Socket { monitor.socket }

    /// Stops watching (before the socket and its context close).
    func close() { monitor.close() }

    /// Takes the connection events waiting.
    func drainEvents() {
        for _ in 0 ..< 1_024 {
            guard let event = try? monitor.next(timeout: 0) else { return }
            let fd = Int32(bitPattern: event.value)
            switch event.kind {
            case .accepted:
                guard Self.byteCounts(fd) != nil else { continue }
                ledger.reset(fd: fd)
                connections[fd] = (Self.peerAddress(fd), .now)
            case .disconnected, .closed:
                connections[fd] = nil
            default:
                break
            }
        }
    }

    /// Shuts down the connections over the limits, asking the socket whether it holds a whole
    /// message the service has not read; returns them.
    func check() -> [Cut] {
        check(drained: !((try? socket.readiness.readable) ?? true))
    }

    /// Shuts down the connections over the limits; returns them. `drained`: the socket holds no
    /// whole message the service has not read (`ZMQ_EVENTS` without POLLIN), so a connection's
    /// bytes held by libzmq are the message it is receiving.
    func check(drained: Bool, now: ContinuousClock.Instant = .now) -> [Cut] {
        drainEvents()
        var held: [(fd: Int32, bytes: Int)] = []
        var total = 0
        var cuts: [Cut] = []
        for (fd, connection) in connections {
            guard let (received, unread) = Self.byteCounts(fd) else { continue }
            let age = Int((now - connection.since).components.seconds)
            let allowance = limits.allowance + max(0, age) * limits.allowancePerSecond
            // What libzmq read from the connection and has not handed out.
            let bytes = max(0, Int(received - unread) - ledger.delivered(fd: fd) - allowance)
            if drained && bytes > limits.perConnectionDrained {
                cuts.append(cut(fd, held: bytes, reason: "over \(limits.perConnectionDrained) bytes of a message that does not end"))
            } else if bytes > limits.perConnection {
                cuts.append(cut(fd, held: bytes, reason: "over \(limits.perConnection) bytes received and not yet a message"))
            } else if bytes > 0 {
                held.append((fd, bytes))
                total += bytes
            }
        }
        held.sort { $0.bytes > $1.bytes }
        for connection in held where total > limits.total {
            cuts.append(cut(connection.fd, held: connection.bytes,
                            reason: "the largest while connections hold over \(limits.total) bytes not yet messages"))
            total -= connection.bytes
        }
        return cuts
    }

    private func cut(_ fd: Int32, held: Int, reason: String) -> Cut {
        let peer = connections.removeValue(forKey: fd)?.peer ?? "?"
        shutdown(fd, Int32(SHUT_RDWR))  // libzmq reads the end, closes the connection and frees its frames
        return Cut(peer: peer, held: held, reason: reason)
    }

    /// What the kernel received on TCP connection `fd`, and how much of it waits unread in the
    /// receive queue; nil for no TCP socket, or off Linux (the services run on Linux; elsewhere
    /// nothing is watched).
    static func byteCounts(_ fd: Int32) -> (received: Int64, unread: Int64)? {
        #if os(Linux)
        let received = Int64(cepoll_tcp_bytes_received(fd)), unread = Int64(cepoll_tcp_unread_bytes(fd))
        return received >= 0 && unread >= 0 ? (received, unread) : nil
        #else
        return nil
        #endif
    }

    /// `fd`'s peer as `address:port` (numeric, either family), or "?".
    static func peerAddress(_ fd: Int32) -> String {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST)), service = [CChar](repeating: 0, count: Int(NI_MAXSERV))
        let named = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                getpeername(fd, address, &length) == 0
                    && getnameinfo(address, length, &host, socklen_t(host.count), &service, socklen_t(service.count),
                                   NI_NUMERICHOST | NI_NUMERICSERV) == 0
            }
        }
        guard named else { return "?" }
        let text = { (characters: [CChar]) in String(decoding: characters.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        let address = text(host)
        return address.contains(":") ? "[\(address)]:\(text(service))" : "\(address):\(text(service))"
    }
}
