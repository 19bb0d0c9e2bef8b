import Foundation
import Logging
import Synchronization
import ZeroMQ

/// libzmq's ZAP handler (RFC 27) for a context: every CurveZMQ handshake on a bound socket of that
/// context asks it whether the client's public key may connect, and under which user id.
///
/// Sockets say which policy applies through their ZAP domain: a control domain admits only the
/// keys of its ``TrustStore`` and tags each connection `cluster:<kind>/<instance>` or
/// `operator:<name>` (read back from each message's `User-Id`); ``publicDomain`` (and the empty
/// domain) admits any key. Unknown domains are refused. The handler runs on its own thread, so a
/// handshake never waits for a busy reactor.
public enum ZAPAuthenticator {
    /// The domain of public endpoints that are encrypted but open to anyone.
    public static let publicDomain = "netplay.public"

    private final class Registry: Sendable {
        let domains = Mutex<[String: TrustStore]>([:])
        let counter = Atomic<Int>(0)
    }

    private static let registries = Mutex<[UInt: Registry]>([:])
    private static let logger = Logger(label: "netplay.zap")
    private static let warnings = WarningBudget(perSeconds: 1)

    private static func warn(_ message: Logger.Message, _ metadata: Logger.Metadata) {
        let budget = warnings.take()
        guard budget.allowed else { return }
        var metadata = metadata
        if budget.suppressed > 0 { metadata["suppressed"] = "\(budget.suppressed)" }
        logger.warning(message, metadata: metadata)
    }

    /// Registers `store` as the policy of a new control domain in `context` (starting the
    /// context's handler on first use) and returns the domain to set on control sockets.
    public static func controlDomain(for store: TrustStore, in context: Context) throws -> String {
        let registry = try handler(for: context)
        let number = registry.counter.wrappingAdd(1, ordering: .relaxed).newValue
        let domain = "netplay.control.\(number)"
        registry.domains.withLock { $0[domain] = store }
        return domain
    }

    /// Forgets a control domain (its sockets are closed).
    public static func release(domain: String, in context: Context) {
        let registry = registries.withLock { $0[context.identifier] }
        _ = registry?.domains.withLock { $0.removeValue(forKey: domain) }
    }

    /// Parses a `User-Id` the handler set back into a ``Caller``.
    public static func caller(fromUserId userId: String?) -> Caller {
        guard let userId else { return .anonymous }
        if userId.hasPrefix("operator:") { return .operator(name: String(userId.dropFirst(9))) }
        if userId.hasPrefix("cluster:") {
            let rest = userId.dropFirst(8)
            guard let slash = rest.firstIndex(of: "/") else { return .anonymous }
            return .cluster(kind: String(rest[..<slash]), instance: String(rest[rest.index(after: slash)...]))
        }
        return .anonymous
    }

    static func userId(for caller: Caller) -> String {
        switch caller {
        case .anonymous: ""
        case .cluster(let kind, let instance): "cluster:\(kind)/\(instance)"
        case .operator(let name): "operator:\(name)"
        }
    }

    private static func handler(for context: Context) throws -> Registry {
        try registries.withLock { registries -> Registry in
            if let existing = registries[context.identifier] { return existing }
            let registry = Registry()
            let socket = try context.socket(.rep)
            try socket.set(.linger(milliseconds: 0))
            try socket.bind("inproc://zeromq.zap.01")
            let box = SocketBox(socket)
            let thread = Thread { serve(box.take(), registry: registry) }
            thread.name = "zap-handler"
            thread.start()
            registries[context.identifier] = registry
            return registry
        }
    }

    /// Hands the bound socket to the handler thread, which alone uses it from then on.
    private final class SocketBox: @unchecked Sendable {
        private var socket: Socket?
        init(_ socket: Socket) { self.socket = socket }
        func take() -> Socket { defer { socket = nil }; return socket! }
    }

    private static func serve(_ socket: Socket, registry: Registry) {
        while true {
            let frames: [[UInt8]]
            do { frames = try socket.receiveMultipart() } catch {
                if error == .terminated { socket.close(); return }
                continue
            }
            let reply = answer(frames, registry: registry)
            do { try socket.sendMultipart(reply) } catch {
                if error == .terminated { socket.close(); return }
            }
        }
    }

    /// The reply to one ZAP request: [version, request id, status, text, user id, metadata].
    private static func answer(_ frames: [[UInt8]], registry: Registry) -> [[UInt8]] {
        // Request: version, request id, domain, address, routing id, mechanism, credentials...
        guard frames.count >= 6, String(decoding: frames[0], as: UTF8.self) == "1.0" else {
            return [Array("1.0".utf8), frames.count > 1 ? frames[1] : [], Array("500".utf8),
                    Array("malformed ZAP request".utf8), [], []]
        }
        let requestId = frames[1]
        let domain = String(decoding: frames[2], as: UTF8.self)
        let address = String(decoding: frames[3], as: UTF8.self)
        let mechanism = String(decoding: frames[5], as: UTF8.self)
        func reply(_ status: String, _ text: String, user: String = "") -> [[UInt8]] {
            [Array("1.0".utf8), requestId, Array(status.utf8), Array(text.utf8), Array(user.utf8), []]
        }
        if domain.isEmpty || domain == publicDomain { return reply("200", "OK") }
        guard let store = registry.domains.withLock({ $0[domain] }) else {
            return reply("400", "unknown domain")
        }
        guard mechanism == "CURVE", frames.count >= 7, frames[6].count == 32 else {
            warn("control connection refused: not CurveZMQ", ["peer": "\(address)", "mechanism": "\(mechanism)"])
            return reply("400", "CurveZMQ with a cluster or operator key is required")
        }
        guard let caller = store.caller(forPublicKey: frames[6]) else {
            warn("control connection refused: key not in the trust store",
                 ["peer": "\(address)", "key": "\(Z85.encode(frames[6]) ?? "?")"])
            return reply("400", "key not in the trust store")
        }
        return reply("200", "OK", user: userId(for: caller))
    }
}
