import MemberwiseInit
import NetplayWire
import ZeroMQ

/// One event received from a service's PUB socket.
public struct ReceivedEvent: Sendable {
    /// The topic frame, e.g. `rooms.added`.
    public let topic: String
    /// The decoded envelope, or the reason it could not be decoded.
    public let envelope: Result<Envelope, WireError>
}

/// Subscribes to a service's events (`netplayctl tap`, watchers, tests). Thread-confined.
public final class EventSubscriber {
    private let socket: Socket
    /// The PUB endpoint.
    public let endpoint: String

    /// How much a subscriber lets a publisher queue at it: events at most (past them the
    /// publisher drops what it sends this subscriber) and the largest event taken (a larger one
    /// ends the connection for good: libzmq does not reconnect after a protocol error).
    @PublicMemberwiseInit
    public struct QueueLimits: Sendable {
        /// Events queued at most.
        public var events: Int32
        /// The largest event, in bytes.
        public var eventBytes: Int64
    }

    /// Connects to `endpoint` and subscribes to topics starting with any of `prefixes`
    /// (`[""]`: everything). `limits`: how much the publisher may queue here (nil: the sockets'
    /// defaults, 10,000 events of up to 1 MiB).
    public init(endpoint: String, prefixes: [String] = [""], serverKey: [UInt8]? = nil, keys: CurveKeyPair? = nil,
                context: Context = .shared, limits: QueueLimits? = nil) throws {
        try EndpointValidator.validate(endpoint, name: "endpoint")
        self.endpoint = endpoint
        socket = try SocketDefaults.connectedClient(.sub, to: endpoint, serverKey: serverKey, keys: keys, context: context) { socket in
            if let limits {
                try socket.set(.receiveHighWaterMark(limits.events))
                try socket.set(.maxMessageSize(bytes: limits.eventBytes))
            }
            for prefix in prefixes { try socket.set(.subscribe(Array(prefix.utf8))) }
        }
    }

    /// The most events one ``drain(waitingUpTo:limit:)`` takes by default: a publisher that never
    /// pauses still lets its reader get on with its work (a snapshot page, a stop).
    public static let batchLimit = 4_096

    /// Waits up to `milliseconds` for an event, then takes every one already queued, `limit` at
    /// most (the rest wait for the next call). Empty when none came in time; a receive error ends
    /// the batch early.
    public func drain(waitingUpTo milliseconds: Int = 0, limit: Int = EventSubscriber.batchLimit) -> [ReceivedEvent] {
        var events: [ReceivedEvent] = []
        var wait = milliseconds
        while events.count < limit, let event = try? next(timeout: wait) {
            events.append(event)
            wait = 0
        }
        return events
    }

    /// The next event, or nil when none arrives within `milliseconds` (-1 waits forever).
    public func next(timeout milliseconds: Int) throws(ZMQError) -> ReceivedEvent? {
        let poller = Poller()
        poller.add(socket)
        guard try poller.poll(timeout: milliseconds) > 0 else { return nil }
        let frames = try socket.receiveMultipart(flags: .dontWait)
        let topic = String(decoding: frames[0], as: UTF8.self)
        guard frames.count == 2 else {
            return ReceivedEvent(topic: topic, envelope: .failure(.notProtobuf))
        }
        return ReceivedEvent(topic: topic,
                             envelope: Result { () throws(WireError) -> Envelope in try Envelope(decoding: frames[1]) })
    }
}
