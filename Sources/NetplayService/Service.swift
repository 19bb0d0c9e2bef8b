import NetplayWire

/// Where a request came from: the ROUTER routing id of the peer, and whether it framed the
/// request REQ-style (with an empty delimiter) so the reply is framed the same way.
public struct PeerAddress: Hashable, Sendable, CustomStringConvertible {
    // The routing id, up to 16 bytes inline (libzmq assigns 5), so receiving, hashing and
    // replying allocate nothing; longer ids (up to 255 bytes) live in `heap`. An id is always
    // stored the same way for its length, so equality and hashing are exact. They compare and
    // hash the inline words and look at `heap` only for a long id (`isLong`), so the hot path
    // (the relay's peer lookup on every input) never touches a reference count.
    private var low: UInt64 = 0
    private var high: UInt64 = 0
    private var count: UInt8 = 0
    private var isLong = false
    private var heap: [UInt8]?
    /// True for REQ peers, which expect `[id, "", payload]`.
    public let delimited: Bool
    /// True for a peer of the control endpoint (answered there), false for the public one.
    public let viaControl: Bool

    private static let inlineCapacity = 16

    /// Creates an address.
    public init(routingId: [UInt8], delimited: Bool = false, viaControl: Bool = false) {
        self.delimited = delimited
        self.viaControl = viaControl
        if routingId.count <= Self.inlineCapacity {
            routingId.withUnsafeBytes { store($0) }
        } else {
            heap = routingId
            isLong = true
        }
    }

    /// Creates an address from borrowed bytes (the receive path; no allocation for short ids).
    public init(routingId: UnsafeRawBufferPointer, delimited: Bool = false, viaControl: Bool = false) {
        self.delimited = delimited
        self.viaControl = viaControl
        if routingId.count <= Self.inlineCapacity {
            store(routingId)
        } else {
            heap = Array(routingId)
            isLong = true
        }
    }

    private mutating func store(_ bytes: UnsafeRawBufferPointer) {
        var words: (UInt64, UInt64) = (0, 0)
        withUnsafeMutableBytes(of: &words) { target in
            if let base = bytes.baseAddress, bytes.count > 0 {
                target.baseAddress!.copyMemory(from: base, byteCount: bytes.count)
            }
        }
        low = words.0
        high = words.1
        count = UInt8(bytes.count)
    }

    /// The ROUTER routing id (libzmq assigns 5 bytes unless the peer set its own).
    public var routingId: [UInt8] {
        withRoutingId { Array($0) }
    }

    /// Calls `body` with the routing id's bytes, without copying them to the heap.
    @inline(__always)
    public func withRoutingId<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        if isLong, let heap { return try heap.withUnsafeBytes(body) }
        var words = (low, high)
        let count = Int(count)
        return try withUnsafeBytes(of: &words) { try body(UnsafeRawBufferPointer(rebasing: $0[0 ..< count])) }
    }

    /// The same peer, talking REQ (`[id, "", payload]`).
    var delimitedCopy: PeerAddress { framed(delimited: true) }

    /// The same peer, talking DEALER (`[id, payload]`): one key for both framings.
    var undelimited: PeerAddress { delimited ? framed(delimited: false) : self }

    private func framed(delimited: Bool) -> PeerAddress {
        var copy = PeerAddress(routingId: UnsafeRawBufferPointer(start: nil, count: 0), delimited: delimited, viaControl: viaControl)
        copy.low = low
        copy.high = high
        copy.count = count
        copy.isLong = isLong
        copy.heap = heap
        return copy
    }

    public static func == (lhs: PeerAddress, rhs: PeerAddress) -> Bool {
        guard lhs.low == rhs.low, lhs.high == rhs.high, lhs.count == rhs.count, lhs.isLong == rhs.isLong,
              lhs.delimited == rhs.delimited, lhs.viaControl == rhs.viaControl else { return false }
        return !lhs.isLong || lhs.heap == rhs.heap
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(low)
        hasher.combine(high)
        hasher.combine(count)
        hasher.combine(delimited)
        hasher.combine(viaControl)
        if isLong, let heap { hasher.combine(heap) }
    }

    public var description: String { Hex.encode(routingId) }
}

/// Who sent a request, as its credential proves it: never what the message itself claims.
public enum Caller: Sendable, Hashable, CustomStringConvertible {
    /// Anyone: a request that arrived on a public endpoint.
    case anonymous
    /// A cluster member whose key is in the trust store: its service kind and instance name.
    case cluster(kind: String, instance: String)
    /// An operator whose key is in the trust store.
    case `operator`(name: String)

    /// True for a cluster member.
    public var isCluster: Bool { if case .cluster = self { true } else { false } }
    /// True for an operator.
    public var isOperator: Bool { if case .operator = self { true } else { false } }
    /// The instance name of a cluster member, else nil.
    public var clusterInstance: String? { if case .cluster(_, let instance) = self { instance } else { nil } }

    public var description: String {
        switch self {
        case .anonymous: "anonymous"
        case .cluster(let kind, let instance): "cluster:\(kind)/\(instance)"
        case .operator(let name): "operator:\(name)"
        }
    }
}

/// One decoded request handed to a ``Service``.
public struct Request: Sendable {
    /// The envelope as received.
    public let envelope: Envelope
    /// Who sent it (the ROUTER routing id to answer).
    public let peer: PeerAddress
    /// The sender's network address as the socket saw it (an IP for TCP; "" when unknown): the
    /// key for per-source limits and what warnings name.
    public let source: String
    /// Who the sender proved to be.
    public let caller: Caller
    /// The request's body.
    public var body: Envelope.Body { envelope.body }
    /// The request id to echo in the reply.
    public var id: UInt64 { envelope.requestId }

    /// Creates a request (the runtime does this; tests may too).
    public init(envelope: Envelope, peer: PeerAddress, source: String = "", caller: Caller = .anonymous) {
        self.envelope = envelope
        self.peer = peer
        self.source = source
        self.caller = caller
    }
}

/// What a handler did with a request.
public enum HandlerOutcome: Sendable {
    /// Send this body back now, under the request's id.
    case reply(Envelope.Body)
    /// The handler keeps the ``Request`` and answers later with ``ServiceRuntime/reply(to:with:)``.
    case deferred
    /// No reply is due (one-way messages such as heartbeats or input batches).
    case none
}

/// A failure a handler reports; the runtime turns it into an `Error` reply.
public struct ServiceError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The machine-readable code.
    public var code: ErrorCode
    /// One human sentence.
    public var message: String
    /// For BAD_REQUEST: the offending field.
    public var field: String
    /// For RATE_LIMITED and friends: when to retry.
    public var retryAfterMs: UInt32

    /// Creates an error.
    public init(_ code: ErrorCode, _ message: String, field: String = "", retryAfterMs: UInt32 = 0) {
        self.code = code
        self.message = message
        self.field = field
        self.retryAfterMs = retryAfterMs
    }

    /// The wire form.
    public var reply: ErrorReply {
        ErrorReply(code: code, message: String(message.prefix(1024)), retryAfterMs: min(retryAfterMs, 3_600_000),
                   field: String(field.prefix(128)))
    }

    public var description: String { "\(code): \(message)" }
}

/// The logic of one service, run by ``ServiceHost`` on its reactor thread.
///
/// Every method is called on the reactor thread, one at a time, so a service needs no locks for
/// its own state. Health, introspection envelopes, pings, heartbeats, metrics pushing and
/// graceful shutdown come from the runtime; a service implements only what is its own.
public protocol Service: AnyObject {
    /// Called once after the sockets are bound, before the first request: open storage,
    /// register timers, connect to other services. Throwing aborts start-up with that reason.
    func start(runtime: ServiceRuntime) throws

    /// Handles one request that is not Health, Introspect or Ping.
    func handle(_ request: Request, runtime: ServiceRuntime) throws(ServiceError) -> HandlerOutcome

    /// True once the service can serve (reported in Health and heartbeats).
    var isReady: Bool { get }

    /// A one-line human status for Health ("ok", "waiting for coordinator").
    var status: String { get }

    /// Facts for Health beside the runtime's own (dependency reachability, counts), as
    /// key/value pairs.
    var healthDetails: [(key: String, value: String)] { get }

    /// The service's state for `netplayctl introspect` (`section` may narrow it; "" = all).
    func introspect(section: String) -> JSONValue

    /// Graceful stop has begun: stop taking new work and finish what is in flight.
    func drain(runtime: ServiceRuntime)

    /// True while drained work is still finishing; the runtime waits (up to its drain timeout).
    var isDraining: Bool { get }

    /// Last call before the sockets close: flush files, close storage.
    func stop(runtime: ServiceRuntime)

    /// Whether `Pong` messages reach ``handle(_:runtime:)`` (a service that pings its own peers,
    /// as the relay measures round trips). Otherwise the runtime drops them, like every reply
    /// sent to it unasked.
    var receivesPongs: Bool { get }
}

extension Service {
    public var isReady: Bool { true }
    public var status: String { isReady ? "ok" : "starting" }
    public var healthDetails: [(key: String, value: String)] { [] }
    public func introspect(section: String) -> JSONValue { [:] }
    public func drain(runtime: ServiceRuntime) {}
    public var isDraining: Bool { false }
    public func stop(runtime: ServiceRuntime) {}
    public var receivesPongs: Bool { false }
}

/// A ``Service`` with a hot path that takes some request frames before the runtime decodes them
/// (its own wire parsing for per-frame traffic). Everything it declines is decoded and dispatched
/// as usual, malformed frames included.
public protocol RawFrameService: Service {
    /// Handles one complete request frame from `peer`, still encoded; returns false to let the
    /// runtime decode and dispatch it normally. Called on the reactor thread (not while the
    /// service drains); `frame` is valid only during the call.
    func handleRawFrame(_ frame: UnsafeRawBufferPointer, from peer: PeerAddress, runtime: ServiceRuntime) -> Bool

    /// The runtime is about to read the requests waiting on its socket, one after another
    /// without waiting (at most a few thousand); ``readBatchDidEnd(runtime:)`` follows once they
    /// are handled, before any timer runs. A service may hold output per request until then and
    /// send it coalesced.
    func readBatchWillBegin(runtime: ServiceRuntime)

    /// The requests read since ``readBatchWillBegin(runtime:)`` are handled.
    func readBatchDidEnd(runtime: ServiceRuntime)
}

extension RawFrameService {
    /// Nothing to do by default.
    public func readBatchWillBegin(runtime: ServiceRuntime) {}
    /// Nothing to do by default.
    public func readBatchDidEnd(runtime: ServiceRuntime) {}
}
