import Dispatch
import Foundation
import NetplayWire
import Synchronization
import ZeroMQ

/// A stand-in for a service that lies, floods, stalls or loses requests, to show how a client
/// copes with one. Its request endpoint (a ROUTER) answers each arrival as its script says and
/// logs it; while `publish` is set, its events endpoint (a PUB) publishes what `publish(n)`
/// returns for n = 1, 2, ... without pause. Plain tcp on loopback.
public final class LyingService: @unchecked Sendable {
    /// One request as it arrived.
    public struct Arrival: Sendable {
        /// How many requests have arrived, this one included.
        public let served: Int
        /// How many copies of this request id have arrived, this one included (a client resends
        /// a request whose answer is late under the same id).
        public let copy: Int
        /// The request.
        public let request: Envelope
        /// The ROUTER identity of the connection it came on.
        public let connection: [UInt8]

        /// The request's id.
        public var requestId: UInt64 { request.requestId }
    }

    /// What the service does with one arrival.
    public enum Answer: Sendable {
        /// Answers at once with this body.
        case reply(Envelope.Body)
        /// Answers with this body after a while (later arrivals are served meanwhile).
        case replyAfter(milliseconds: Int, Envelope.Body)
        /// Never answers.
        case silence

        /// An empty room list: the plainest answer there is.
        public static let emptyRoomList = Answer.reply(.listRoomsResponse(ListRoomsResponse()))

        /// A refusal with `code`.
        public static func refuse(_ code: ErrorCode, _ message: String = "scripted") -> Answer {
            .reply(.error(ErrorReply(code: code, message: message)))
        }
    }

    /// The ROUTER endpoint requests go to.
    public let requests: String
    /// The PUB endpoint events come from.
    public let events: String
    private let router: Socket
    private let publisher: Socket
    private let stopped = Atomic<Bool>(false)
    private let arrivals = Mutex<[Arrival]>([])
    private let finished = DispatchGroup()

    /// Binds both endpoints and starts answering with `script` (and publishing, with `publish`).
    public init(script: @escaping @Sendable (Arrival) -> Answer,
                publish: (@Sendable (_ sequence: UInt64) -> (topic: String, body: Envelope.Body))? = nil) throws {
        router = try Context.shared.socket(.router)
        try router.set(.receiveTimeout(milliseconds: 50))
        try router.bind("tcp://127.0.0.1:*")
        requests = try router.lastEndpoint
        publisher = try Context.shared.socket(.pub)
        try publisher.bind("tcp://127.0.0.1:*")
        events = try publisher.lastEndpoint
        finished.enter()
        Thread.detachNewThread { [self] in
            defer { router.close(); finished.leave() }
            serve(script)
        }
        finished.enter()
        Thread.detachNewThread { [self] in
            defer { publisher.close(); finished.leave() }
            guard let publish else { return }
            var sequence: UInt64 = 0
            while !stopped.load(ordering: .relaxed) {
                sequence += 1
                let (topic, body) = publish(sequence)
                guard let bytes = try? Envelope(body: body).encoded() else { continue }
                try? publisher.sendMultipart([Array(topic.utf8), bytes])
            }
        }
    }

    /// Binds both endpoints and answers the `served`-th request with `answer(served, request)`,
    /// at once.
    public convenience init(answer: @escaping @Sendable (_ served: Int, _ request: Envelope) -> Envelope.Body,
                            publish: (@Sendable (_ sequence: UInt64) -> (topic: String, body: Envelope.Body))? = nil) throws {
        try self.init(script: { .reply(answer($0.served, $0.request)) }, publish: publish)
    }

    /// Every request that has arrived, in order.
    public var log: [Arrival] { arrivals.withLock { $0 } }

    /// Stops answering and publishing and closes both endpoints (answers still held back are
    /// never sent).
    public func stop() {
        stopped.store(true, ordering: .relaxed)
        finished.wait()
    }

    private func serve(_ script: (Arrival) -> Answer) {
        var copies: [UInt64: Int] = [:]
        var held: [(due: ContinuousClock.Instant, frames: [[UInt8]])] = []
        while !stopped.load(ordering: .relaxed) {
            let now = ContinuousClock.now
            for reply in held where reply.due <= now { _ = try? router.sendMultipart(reply.frames) }
            held.removeAll { $0.due <= now }
            guard let frames = try? router.receiveMultipart(), frames.count == 2,
                  let request = try? Envelope(decoding: frames[1]) else { continue }
            copies[request.requestId, default: 0] += 1
            let arrival = arrivals.withLock { log in
                log.append(Arrival(served: log.count + 1, copy: copies[request.requestId] ?? 1, request: request, connection: frames[0]))
                return log[log.count - 1]
            }
            let body: Envelope.Body, wait: Int
            switch script(arrival) {
            case .silence: continue
            case .reply(let answer): (body, wait) = (answer, 0)
            case .replyAfter(let milliseconds, let answer): (body, wait) = (answer, milliseconds)
            }
            // A body the wire refuses to encode goes out as an empty frame: a malformed reply.
            let reply = (try? Envelope(requestId: request.requestId, body: body).encoded()) ?? []
            if wait == 0 {
                _ = try? router.sendMultipart([frames[0], reply])
            } else {
                held.append((now + .milliseconds(wait), [frames[0], reply]))
            }
        }
    }
}
