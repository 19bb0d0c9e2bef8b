import Foundation
import NetplayWire
import ZeroMQ

/// A synchronous request/reply client for command-line tools, tests and NetplayKit's lobby: one
/// DEALER, one request at a time, a timeout per request (or per try, see
/// ``requestEnvelope(_:tries:resending:)``). Used by one thread at a time, like its socket; it may
/// move to another thread behind a lock (NetplayKit's lobby keeps its connections that way).
public final class BlockingClient {
    /// The service endpoint.
    public let endpoint: String
    /// Seconds to wait for each reply.
    public var timeout: Double
    private let socket: Socket
    private var nextId = UInt64.random(in: 1...(1 << 40))

    /// Replies queued here at most (libzmq then stops reading the connection; nothing is lost,
    /// the service holds the rest): a client waits for one reply at a time, and the service
    /// default of 10,000 messages of up to 1 MiB let whatever answers at an endpoint (a player
    /// may use a cluster it does not run) queue about 10 GiB of unasked replies in an app.
    public static let receiveQueueMessages: Int32 = 16

    /// Connects to `endpoint`. With `serverKey` (and optionally `keys`) the connection is
    /// CurveZMQ-encrypted; without `keys` a fresh client key pair is generated.
    public init(endpoint: String, timeout: Double = 2, serverKey: [UInt8]? = nil, keys: CurveKeyPair? = nil,
                context: Context = .shared) throws {
        try EndpointValidator.validate(endpoint, name: "endpoint")
        self.endpoint = endpoint
        self.timeout = timeout
        socket = try SocketDefaults.connectedClient(.dealer, to: endpoint, serverKey: serverKey, keys: keys, context: context) {
            try $0.set(.receiveHighWaterMark(Self.receiveQueueMessages))
        }
    }

    /// Closes the connection now (it closes anyway when the client goes away); a request after
    /// it fails with a transport error.
    public func close() {
        socket.close()
    }

    /// Sends `body` and returns the reply's body; an `Error` reply throws ``ClientError/remote(_:)``.
    public func request(_ body: Envelope.Body) throws(ClientError) -> Envelope.Body {
        let reply = try requestEnvelope(body)
        if case .error(let error) = reply.body { throw .remote(error) }
        return reply.body
    }

    /// ``request(_:)`` for a read the service rate-limits per address (discovery's pages): a
    /// `RATE_LIMITED` refusal is waited out (see ``paced(patience:_:)``); past that it is thrown.
    public func pacedRead(_ body: Envelope.Body, patience: Double = 5) throws(ClientError) -> Envelope.Body {
        let reply = try Self.paced(patience: patience) { () throws(ClientError) -> Envelope in try requestEnvelope(body) }
        if case .error(let error) = reply.body { throw .remote(error) }
        return reply.body
    }

    /// Asks with `ask` until the reply is not a `RATE_LIMITED` refusal, waiting the time each
    /// refusal names (at least 20 ms, at most 1 s at a time and `patience` seconds in all); the
    /// last reply, refusal or not, is returned. The one rule for every paced read (NetplayKit's
    /// lobby, discovery's watcher, netplayctl).
    public static func paced<Failure: Error>(patience: Double, _ ask: () throws(Failure) -> Envelope) throws(Failure) -> Envelope {
        var reply = try ask()
        var waited = 0.0
        while case .error(let error) = reply.body, error.code == .rateLimited, waited < patience {
            let pause = min(max(Double(error.retryAfterMs) / 1000, 0.02), 1, patience - waited)
            Thread.sleep(forTimeInterval: pause)
            waited += pause
            reply = try ask()
        }
        return reply
    }

    /// Sends `body` and returns the whole reply envelope (Error replies included).
    public func requestEnvelope(_ body: Envelope.Body) throws(ClientError) -> Envelope {
        try requestEnvelope(body, tries: 1, resending: false)
    }

    /// Sends `body` and waits for its reply for up to `tries` times ``timeout``: a path that
    /// loses packets can hold a request (and the handshakes before it) past one timeout, and TCP
    /// still delivers it. With `resending` (for a request that does the same when it arrives
    /// twice: a read, or a create or join carrying an idempotency key) the request goes out
    /// again, under the same request id, each time a timeout passes with no reply at all, which
    /// makes good a copy lost with a broken connection; any other request is sent once (again
    /// only if that send itself timed out) and waited for longer. A success is returned as it
    /// comes. An Error reply while another copy is still unanswered is held, in case that copy
    /// succeeds (a copy refused for its rate limit while the first is being served); it is
    /// returned when every copy has answered or the time is up. With no reply at all, the error
    /// is a timeout of the whole wait.
    public func requestEnvelope(_ body: Envelope.Body, tries: Int, resending: Bool) throws(ClientError) -> Envelope {
        nextId &+= 1
        let id = nextId
        let payload: [UInt8]
        do { payload = try Envelope(requestId: id, body: body).encoded() } catch { throw .wire(error) }
        let tries = max(tries, 1)
        var (sent, answered) = (0, 0)
        var heldError: Envelope?
        for _ in 1 ... tries {
            let deadline = ContinuousClock.now + .milliseconds(timeoutMilliseconds)
            if sent == 0 || (resending && answered == 0) {
                do {
                    try sendRaw(payload)
                    sent += 1
                } catch .timeout {
                    continue
                }
            }
            while let reply = try awaitReply(to: id, until: deadline) {
                answered += 1
                guard case .error = reply.body else { return reply }
                // Every copy answered with a refusal: the first one is the service's word.
                guard answered < sent else { return heldError ?? reply }
                heldError = heldError ?? reply
            }
        }
        if let heldError { return heldError }
        throw .timeout(endpoint: endpoint, seconds: timeout * Double(tries))
    }

    /// The next reply to request `id` before `deadline`, skipping late replies to earlier,
    /// timed-out requests; nil when none came.
    private func awaitReply(to id: UInt64, until deadline: ContinuousClock.Instant) throws(ClientError) -> Envelope? {
        while true {
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else { return nil }
            let frame: [UInt8]
            // A poll cut short (a signal) comes back empty before the deadline: wait again.
            do { frame = try receiveRaw(within: left) } catch .timeout { continue }
            let envelope: Envelope
            do { envelope = try Envelope(decoding: frame) } catch { throw .wire(error) }
            if envelope.requestId == id { return envelope }
        }
    }

    /// ``timeout`` in whole milliseconds, rounded up (a negative one is 0).
    private var timeoutMilliseconds: Int { Int((max(timeout, 0) * 1000).rounded(.up)) }

    /// Sends raw bytes as one frame (tests use this to send malformed frames).
    public func sendRaw(_ bytes: [UInt8]) throws(ClientError) {
        try boundedSend { () throws(ZMQError) in _ = try socket.send(bytes) }
    }

    /// Sends raw frames as one multipart message.
    public func sendRawMultipart(_ frames: [[UInt8]]) throws(ClientError) {
        try boundedSend { () throws(ZMQError) in try socket.sendMultipart(frames) }
    }

    /// A send waits at most ``timeout``: a DEALER with no connection to queue on blocks in
    /// `zmq_send`, and libzmq drops the connection for good after a failed handshake (a CurveZMQ
    /// server refusing a plain or badly keyed client), so without the bound a request sent after
    /// that moment would never return. It times out like an unanswered request.
    private func boundedSend(_ send: () throws(ZMQError) -> Void) throws(ClientError) {
        do {
            try socket.set(.sendTimeout(milliseconds: Int32(clamping: timeoutMilliseconds)))
            try send()
        } catch .wouldBlock {
            throw .timeout(endpoint: endpoint, seconds: timeout)
        } catch {
            throw .transport(error)
        }
    }

    /// Receives one frame within the timeout.
    public func receiveRaw() throws(ClientError) -> [UInt8] {
        try receiveRaw(within: .milliseconds(Int(timeout * 1000)))
    }

    private func receiveRaw(within wait: Duration) throws(ClientError) -> [UInt8] {
        let poller = Poller()
        poller.add(socket)
        let milliseconds = Int(wait.components.seconds) * 1000 + Int((wait.components.attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
        do {
            guard try poller.poll(timeout: milliseconds) > 0 else {
                throw ClientError.timeout(endpoint: endpoint, seconds: timeout)
            }
            return try socket.receive(flags: .dontWait)
        } catch let error as ClientError {
            throw error
        } catch let error as ZMQError {
            throw .transport(error)
        } catch {
            throw .unexpectedReply("\(error)")
        }
    }
}
