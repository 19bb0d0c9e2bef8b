import Foundation
import Logging
import NetplayService
import ZeroMQ

/// The tunnel's sockets: ZeroMQ `STREAM` sockets (raw TCP inside libzmq) on the main port and on
/// each session's plain port, polled by the service's reactor. It turns what they read into
/// ``TunnelCore`` events and carries out the core's sends and closes.
///
/// A STREAM socket reads `[routing id][bytes]`; an empty `bytes` frame is a connection opening
/// (the first time an id is seen) or closing (after). Sending `[routing id][]` closes a
/// connection once what was queued before it is written.
public final class TunnelListener: TunnelTransport {
    /// The core the sockets feed.
    public private(set) var core: TunnelCore!
    /// The main port actually bound.
    public private(set) var boundPort: UInt16 = 0
    private let configuration: TunnelConfiguration
    private var logger: Logger
    private let onEvent: (TunnelEvent) -> Void
    private unowned(unsafe) var runtime: ServiceRuntime?
    private var sockets: [Int: Socket] = [:]
    private var watchers: [Int: Watcher] = [:]
    private var ports: [Int: UInt16] = [:]
    private var nextListener = 1
    /// Connections the tunnel closed itself, by listener: a later empty frame for them is not news.
    private var closing: [TunnelConnection: UInt64] = [:]
    private var open: Set<TunnelConnection> = []
    /// Messages a readable socket is drained of before the reactor serves others.
    static let readBudget = 512

    /// A listener for `configuration`; `onEvent` hears what the tunnel did (on the reactor thread).
    public init(configuration: TunnelConfiguration, logger: Logger, onEvent: @escaping (TunnelEvent) -> Void) {
        self.configuration = configuration
        self.logger = logger
        self.onEvent = onEvent
    }

    /// Binds the main port and starts polling it on `runtime`'s reactor. Throws with a one-line
    /// reason (e.g. the port is taken).
    public func start(runtime: ServiceRuntime) throws {
        self.runtime = runtime
        core = TunnelCore(configuration: configuration, transport: self, wallClockMs: { UInt64(Date().timeIntervalSince1970 * 1000) })
        let socket = try makeSocket(runtime)
        do {
            try socket.bind("tcp://\(configuration.bindHost):\(configuration.port)")
        } catch {
            socket.close()
            throw TunnelListenerError("cannot listen for RetroArch on \(configuration.bindHost):\(configuration.port): \(error)")
        }
        boundPort = Self.port(of: (try? socket.lastEndpoint) ?? "") ?? configuration.port
        add(socket, listener: 0, port: boundPort, runtime: runtime)
        runtime.every(seconds: 0.25) { [unowned(unsafe) self] runtime in
            let now = runtime.uptimeMs
            self.core.tick(nowMs: now)
            self.closing = self.closing.filter { now < $0.value + 60_000 }
        }
    }

    /// Closes every connection and socket.
    public func stop() {
        core?.shutdown()
        for (listener, socket) in sockets {
            if let watcher = watchers[listener] { runtime?.unwatch(watcher) }
            socket.close()
        }
        sockets.removeAll()
        watchers.removeAll()
    }

    private func makeSocket(_ runtime: ServiceRuntime) throws -> Socket {
        let socket = try runtime.context.socket(.stream)
        try socket.set([.linger(milliseconds: 0), .sendHighWaterMark(configuration.sendQueueChunks),
                        .receiveHighWaterMark(configuration.sendQueueChunks), .tcpKeepalive(true)])
        return socket
    }

    private func add(_ socket: Socket, listener: Int, port: UInt16, runtime: ServiceRuntime) {
        sockets[listener] = socket
        ports[listener] = port
        watchers[listener] = runtime.watch(socket) { [unowned(unsafe) self] runtime in self.drain(listener, runtime: runtime) }
    }

    static func port(of endpoint: String) -> UInt16? {
        endpoint.split(separator: ":").last.flatMap { UInt16($0) }
    }

    // MARK: Reading

    private func drain(_ listener: Int, runtime: ServiceRuntime) {
        guard let socket = sockets[listener] else { return }
        let now = runtime.uptimeMs
        for _ in 0..<Self.readBudget {
            let id: UInt64
            do {
                let frame = try socket.receiveBorrowed(flags: .dontWait)
                guard frame.more else { continue }
                id = Self.key(frame.bytes)
                let data = try socket.receiveBorrowed(flags: .dontWait)
                let connection = TunnelConnection(listener: listener, id: id)
                if data.bytes.isEmpty {
                    if open.remove(connection) != nil {
                        core.closedByPeer(connection, nowMs: now)
                    } else if closing.removeValue(forKey: connection) == nil {
                        open.insert(connection)
                        let address = socket.propertyOfLastFrame("Peer-Address").map(TunnelWire.addressBytes) ?? []
                        core.opened(connection, address: address, nowMs: now)
                    }
                } else if open.contains(connection) {
                    core.received(data.bytes, on: connection, nowMs: now)
                }
            } catch {
                return
            }
        }
    }

    /// A STREAM routing id (5 bytes in libzmq) as a number.
    static func key(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var value: UInt64 = 0
        for byte in bytes.prefix(8) { value = value << 8 | UInt64(byte) }
        return value
    }

    /// The 5-byte routing id of `key`.
    static func routingId(_ key: UInt64) -> [UInt8] {
        (0..<5).map { UInt8(truncatingIfNeeded: key >> (8 * (4 - $0))) }
    }

    // MARK: TunnelTransport

    public func send(_ bytes: UnsafeRawBufferPointer, to connection: TunnelConnection) -> Bool {
        guard let socket = sockets[connection.listener], open.contains(connection) else { return false }
        let id = Self.routingId(connection.id)
        return id.withUnsafeBytes { idBytes in
            do {
                try socket.sendRouted(to: idBytes, delimited: false, payload: bytes)
                return true
            } catch {
                return false
            }
        }
    }

    public func close(_ connection: TunnelConnection) {
        guard open.remove(connection) != nil else { return }
        closing[connection] = runtime?.uptimeMs ?? 0
        guard let socket = sockets[connection.listener] else { return }
        let id = Self.routingId(connection.id)
        id.withUnsafeBytes { idBytes in
            _ = try? socket.sendRouted(to: idBytes, delimited: false, payload: UnsafeRawBufferPointer(start: nil, count: 0))
        }
    }

    public func openSessionPort(for session: TunnelID) -> (listener: Int, port: UInt16)? {
        guard let range = configuration.sessionPorts, let runtime else { return nil }
        let taken = Set(ports.values)
        for port in range where !taken.contains(port) {
            guard let socket = try? makeSocket(runtime) else { return nil }
            do {
                try socket.bind("tcp://\(configuration.bindHost):\(port)")
            } catch {
                socket.close()
                continue
            }
            let listener = nextListener
            nextListener += 1
            add(socket, listener: listener, port: port, runtime: runtime)
            return (listener, port)
        }
        logger.warning("no free RetroArch session port", metadata: ["range": "\(range)", "session": "\(session)"])
        return nil
    }

    public func closeSessionPort(listener: Int) {
        guard listener != 0, let socket = sockets.removeValue(forKey: listener) else { return }
        if let watcher = watchers.removeValue(forKey: listener) { runtime?.unwatch(watcher) }
        ports[listener] = nil
        open = open.filter { $0.listener != listener }
        closing = closing.filter { $0.key.listener != listener }
        socket.close()
    }

    public func tunnelEvent(_ event: TunnelEvent) {
        onEvent(event)
    }
}

/// The tunnel listener could not start.
public struct TunnelListenerError: Error, CustomStringConvertible {
    /// The one-line reason.
    public let description: String

    init(_ description: String) { self.description = description }
}
