import Foundation
import Logging
import NetplayWire
import ZeroMQ

// ServiceRuntime: timers, watched sockets and descriptors, and clients of other services.
extension ServiceRuntime {
    // MARK: Timers and watchers

    /// Runs `action` every `seconds` on the reactor thread until cancelled.
    @discardableResult
    public func every(seconds: Double, _ action: @escaping (ServiceRuntime) -> Void) -> TimerID {
        timers.add(after: seconds, repeating: seconds, action)
    }

    /// Runs `action` once after `seconds`.
    @discardableResult
    public func after(seconds: Double, _ action: @escaping (ServiceRuntime) -> Void) -> TimerID {
        timers.add(after: seconds, repeating: nil, action)
    }

    /// Cancels a timer (no effect if it already ran or was cancelled).
    public func cancel(_ timer: TimerID) {
        timers.cancel(timer)
    }

    /// Calls `onReadable` whenever `socket` has input. The socket must belong to this thread.
    @discardableResult
    public func watch(_ socket: Socket, onReadable: @escaping (ServiceRuntime) -> Void) -> Watcher {
        watch(.socket(socket), onReadable: onReadable)
    }

    /// Calls `onReadable` whenever the file descriptor `fd` (a UDP socket, a pipe) is readable.
    @discardableResult
    public func watch(fileDescriptor fd: Int32, onReadable: @escaping (ServiceRuntime) -> Void) -> Watcher {
        watch(.descriptor(fd), onReadable: onReadable)
    }

    /// Polls `source` from the next loop on.
    private func watch(_ source: Watcher.Source, onReadable: @escaping (ServiceRuntime) -> Void) -> Watcher {
        let watcher = Watcher(source: source, onReadable: onReadable)
        watchers.append(watcher)
        pollerDirty = true
        return watcher
    }

    /// Stops watching.
    public func unwatch(_ watcher: Watcher) {
        watcher.cancelled = true
        pollerDirty = true
    }

    /// A socket for the service to bind that admits cluster and operator keys only (CurveZMQ
    /// with this instance's identity; each message's `User-Id` names the sender, see
    /// ``ZAPAuthenticator/caller(fromUserId:)``). Without a trust store, a plain server socket.
    public func controlServerSocket(_ type: SocketType) throws -> Socket {
        guard let identity, let controlDomain else {
            return try SocketDefaults.server(type, context: context, curve: configuration.curve)
        }
        return try Self.controlServer(type, context: context, identity: identity, domain: controlDomain)
    }

    /// A server socket on the public plane: with the cluster's key, encrypted and let through
    /// the public ZAP domain (anyone with the key; the plane decides what they may ask).
    static func publicServer(_ type: SocketType, context: Context, curve: CurveKeyPair?) throws(ZMQError) -> Socket {
        let socket = try SocketDefaults.server(type, context: context, curve: curve)
        if curve != nil { try socket.set(.zapDomain(ZAPAuthenticator.publicDomain)) }
        return socket
    }

    /// A server socket on the control plane: this member's identity, and only the trust store's
    /// members and operators through the ZAP domain `domain`.
    static func controlServer(_ type: SocketType, context: Context, identity: CurveKeyPair, domain: String) throws(ZMQError) -> Socket {
        let socket = try SocketDefaults.server(type, context: context, curve: identity)
        try socket.set(.zapDomain(domain))
        return socket
    }

    /// A client (DEALER) to another service's public endpoint, driven by this reactor.
    public func client(to endpoint: String, serverKey: [UInt8]? = nil) throws -> ServiceClient {
        try ServiceClient(runtime: self, endpoint: endpoint, serverKey: serverKey, keys: configuration.curve)
    }

    /// A client (DEALER) to a cluster member's control endpoint, authenticated with this
    /// instance's identity. Nil when the control plane is off or the member has no control endpoint.
    public func controlClient(to member: TrustStore.Member) throws -> ServiceClient? {
        guard let identity, let endpoint = member.control else { return nil }
        return try ServiceClient(runtime: self, endpoint: endpoint, serverKey: member.publicKey, keys: identity)
    }

    /// A control-plane client to the member of kind `kind` (the one at `endpoint`, a public or
    /// control endpoint, when several are known). Nil until the member's key is in the trust store.
    public func controlClient(kind: String, endpoint: String? = nil) throws -> ServiceClient? {
        guard let trust else { return nil }
        let candidates = trust.members(kind: kind)
        let member = endpoint.flatMap { wanted in candidates.first { $0.endpoint == wanted || $0.control == wanted } }
            ?? (candidates.count == 1 ? candidates[0] : nil)
        guard let member else { return nil }
        return try controlClient(to: member)
    }
}

/// Something the reactor polls for a service: a socket or a file descriptor.
public final class Watcher {
    enum Source {
        case socket(Socket)
        case descriptor(Int32)
    }
    let source: Source
    let onReadable: (ServiceRuntime) -> Void
    var cancelled = false

    init(source: Source, onReadable: @escaping (ServiceRuntime) -> Void) {
        self.source = source
        self.onReadable = onReadable
    }
}
