import NetplayWire
import ZeroMQ

/// A DEALER connection from one service to another, driven by the calling service's reactor:
/// requests complete through callbacks on the reactor thread, matched to replies by request id,
/// with a timeout each. Messages that answer no pending request go to ``onUnsolicited``.
public final class ServiceClient {
    /// The endpoint this client connects to.
    public let endpoint: String
    /// Called for messages that are not replies to a pending request (pushes from a relay, ...).
    public var onUnsolicited: ((Envelope) -> Void)?

    private let socket: Socket
    private unowned let runtime: ServiceRuntime
    private var pending: [UInt64: (deadline: ContinuousClock.Instant, completion: (Result<Envelope.Body, ClientError>) -> Void)] = [:]
    private var nextId = UInt64.random(in: 1...(1 << 40))
    private var watcher: Watcher?
    private var sweeper: TimerID?

    init(runtime: ServiceRuntime, endpoint: String, serverKey: [UInt8]?, keys: CurveKeyPair?) throws {
        self.runtime = runtime
        self.endpoint = endpoint
        try EndpointValidator.validate(endpoint, name: "service endpoint")
        socket = try SocketDefaults.client(.dealer, context: runtime.context, curve: keys, serverKey: serverKey)
        try socket.set(.linger(milliseconds: 0))
        try socket.connect(endpoint)
        watcher = runtime.watch(socket) { [weak self] _ in self?.drain() }
        sweeper = runtime.every(seconds: 0.05) { [weak self] _ in self?.expire() }
    }

    /// Number of requests awaiting a reply.
    public var pendingCount: Int { pending.count }

    /// Sends `body` and calls `completion` on the reactor thread with the reply body, or with
    /// ``ClientError/remote(_:)`` for an Error reply, or ``ClientError/timeout(endpoint:seconds:)``.
    public func request(_ body: Envelope.Body, timeout seconds: Double = 2,
                        _ completion: @escaping (Result<Envelope.Body, ClientError>) -> Void) {
        nextId &+= 1
        let id = nextId
        do {
            try socket.send(try Envelope(requestId: id, body: body).encoded(), flags: .dontWait)
        } catch let error as WireError {
            completion(.failure(.wire(error)))
            return
        } catch let error as ZMQError {
            completion(.failure(error == .wouldBlock ? .timeout(endpoint: endpoint, seconds: 0) : .transport(error)))
            return
        } catch {
            completion(.failure(.unexpectedReply("\(error)")))
            return
        }
        pending[id] = (.now + .milliseconds(Int(seconds * 1000)), completion)
    }

    /// Sends a one-way message (no reply expected). Returns false when it could not be queued.
    @discardableResult
    public func send(_ body: Envelope.Body) -> Bool {
        do {
            try socket.send(try Envelope(body: body).encoded(), flags: .dontWait)
            return true
        } catch {
            return false
        }
    }

    /// Fails every pending request and stops watching the socket.
    public func close() {
        if let watcher { runtime.unwatch(watcher) }
        if let sweeper { runtime.cancel(sweeper) }
        watcher = nil
        sweeper = nil
        let failed = pending
        pending.removeAll()
        for (_, entry) in failed { entry.completion(.failure(.transport(.terminated))) }
        socket.close()
    }

    /// Takes up to 1,024 messages a turn: a service pushing without pause cannot hold the
    /// reactor (the socket stays readable, so the rest come next turn).
    private func drain() {
        for _ in 0 ..< 1_024 {
            guard let frame = try? socket.receive(flags: .dontWait) else { return }
            guard let envelope = try? Envelope(decoding: frame) else {
                runtime.logger.debug("undecodable reply", metadata: ["from": "\(endpoint)"])
                continue
            }
            if let entry = pending.removeValue(forKey: envelope.requestId) {
                if case .error(let reply) = envelope.body {
                    entry.completion(.failure(.remote(reply)))
                } else {
                    entry.completion(.success(envelope.body))
                }
            } else {
                onUnsolicited?(envelope)
            }
        }
    }

    private func expire() {
        let now = ContinuousClock.now
        let expired = pending.filter { $0.value.deadline <= now }
        for (id, entry) in expired {
            pending.removeValue(forKey: id)
            entry.completion(.failure(.timeout(endpoint: endpoint, seconds: 0)))
        }
    }
}
