import Foundation
import NetplayService
import NetplayWire
import Rollback
import ZeroMQ

/// Exponential backoff with jitter for reconnecting: attempt `n` waits a random time between
/// half and all of `min(cap, base * 2^n)`, so many clients losing the same relay do not return
/// in lockstep.
public struct Backoff: Sendable {
    /// The first delay, milliseconds.
    public var baseMs: Int
    /// The longest delay, milliseconds.
    public var capMs: Int
    /// Attempts before giving up.
    public var maxAttempts: Int
    private var random: SeededRandom

    /// A backoff starting at `baseMs`, capped at `capMs`, giving up after `maxAttempts`.
    public init(baseMs: Int = 100, capMs: Int = 4_000, maxAttempts: Int = 12, seed: UInt64 = UInt64.random(in: 1 ... .max)) {
        self.baseMs = baseMs
        self.capMs = capMs
        self.maxAttempts = maxAttempts
        random = SeededRandom(seed: seed)
    }

    /// The delay before attempt `attempt` (0-based).
    public mutating func delayMs(attempt: Int) -> Int {
        let ceiling = min(capMs, baseMs << min(attempt, 20))
        let half = ceiling / 2
        return half + Int(random.below(UInt64(max(ceiling - half, 1))))
    }
}

/// Applies ``NetworkConditions`` to one peer's traffic: every message waits half the round trip;
/// input traffic (batches, broadcasts, pings) also gets jitter and loss; everything else keeps
/// its order and is never lost (ZeroMQ itself is reliable; losing control messages would test
/// nothing the relay promises). An outage drops everything both ways.
struct LinkConditioner {
    private struct Held {
        var dueMs: UInt64
        var sequence: UInt64
        var envelope: Envelope
    }

    let conditions: NetworkConditions
    private var random: SeededRandom
    private var sequence: UInt64 = 0
    private var held: [Held] = []
    private var lastOrderedDueMs: UInt64 = 0
    /// While set, everything is dropped (a cut cable).
    var outageUntilMs: UInt64 = 0
    private(set) var dropped = 0

    init(conditions: NetworkConditions, salt: UInt64) {
        self.conditions = conditions
        random = SeededRandom(seed: SeededRandom.hash(conditions.seed, salt))
    }

    static func isInputTraffic(_ body: Envelope.Body) -> Bool {
        switch body {
        case .inputBatch, .inputBroadcast, .ping, .pong, .timeSyncHint: true
        default: false
        }
    }

    /// Takes `envelope` at `now`; it comes out of ``due(now:)`` when its delay passed (or never).
    mutating func admit(_ envelope: Envelope, now: UInt64) {
        if now < outageUntilMs {
            dropped += 1
            return
        }
        let base = UInt64(conditions.rttMs / 2)
        var due = now + base
        if Self.isInputTraffic(envelope.body) {
            if conditions.loss > 0 && random.chance(conditions.loss) {
                dropped += 1
                return
            }
            if conditions.jitterMs > 0 { due += random.below(UInt64(conditions.jitterMs) + 1) }
        } else {
            due = max(due, lastOrderedDueMs)
            lastOrderedDueMs = due
        }
        sequence += 1
        held.append(Held(dueMs: due, sequence: sequence, envelope: envelope))
    }

    /// Messages whose time came, in delivery order.
    mutating func due(now: UInt64) -> [Envelope] {
        guard !held.isEmpty else { return [] }
        var ready: [Held] = []
        held.removeAll { item in
            guard item.dueMs <= now else { return false }
            ready.append(item)
            return true
        }
        if now < outageUntilMs {
            dropped += ready.count
            return []
        }
        ready.sort { $0.dueMs != $1.dueMs ? $0.dueMs < $1.dueMs : $0.sequence < $1.sequence }
        return ready.map(\.envelope)
    }

    /// Messages still held.
    var pending: Int { held.count }
}

/// The client's connection to a relay: one DEALER socket (replaced on reconnect), envelope
/// encoding and decoding, and the simulated network conditions. Confined to one thread.
final class RelayLink {
    let endpoint: String
    private let context: Context
    private let serverKey: [UInt8]?
    private var socket: Socket?
    private var outbound: LinkConditioner?
    private var inbound: LinkConditioner?
    private(set) var sentMessages = 0
    private(set) var receivedMessages = 0
    private(set) var undecodable = 0

    init(endpoint: String, conditions: NetworkConditions, serverKey: [UInt8]? = nil, context: Context = .shared) throws {
        self.endpoint = endpoint
        self.context = context
        self.serverKey = serverKey
        if !conditions.isPerfect {
            outbound = LinkConditioner(conditions: conditions, salt: 1)
            inbound = LinkConditioner(conditions: conditions, salt: 2)
        }
        try open()
    }

    deinit { socket?.close() }

    /// Opens a fresh connection (a new routing identity: the relay sees a new peer).
    func open() throws {
        socket?.close()
        let dealer = try SocketDefaults.client(.dealer, context: context, curve: nil)
        if let serverKey { try dealer.makeCurveClient(serverKey: serverKey, keys: try CurveKeyPair.generate()) }
        try dealer.set(.linger(milliseconds: 0))
        try dealer.set(.immediate(true))
        try dealer.connect(endpoint)
        socket = dealer
    }

    /// Closes the connection; with `linger`, what is queued (a last Detach) still goes out.
    func close(lingerMilliseconds linger: Int32 = 0) {
        if linger > 0 { try? socket?.set(.linger(milliseconds: linger)) }
        socket?.close()
        socket = nil
    }

    /// Cuts the simulated link until `untilMs` (everything both ways is dropped).
    func simulateOutage(untilMs: UInt64) {
        if outbound == nil {
            outbound = LinkConditioner(conditions: NetworkConditions(), salt: 1)
            inbound = LinkConditioner(conditions: NetworkConditions(), salt: 2)
        }
        outbound?.outageUntilMs = untilMs
        inbound?.outageUntilMs = untilMs
    }

    /// Whether a simulated outage is on at `now`.
    func inOutage(now: UInt64) -> Bool { now < (outbound?.outageUntilMs ?? 0) }

    /// Sends (possibly after the simulated delay).
    func send(_ body: Envelope.Body, requestId: UInt64 = 0, now: UInt64) {
        let envelope = Envelope(requestId: requestId, body: body)
        if outbound != nil {
            outbound!.admit(envelope, now: now)
            flush(now: now)
        } else {
            transmit(envelope)
        }
    }

    private func transmit(_ envelope: Envelope) {
        guard let socket, let bytes = try? envelope.encoded() else { return }
        if (try? socket.send(bytes, flags: .dontWait)) != nil { sentMessages += 1 }
    }

    /// Sends whatever the simulated delay released.
    func flush(now: UInt64) {
        guard outbound != nil else { return }
        for envelope in outbound!.due(now: now) { transmit(envelope) }
    }

    /// Everything received and released by the simulated delay, in order.
    func receive(now: UInt64) -> [Envelope] {
        flush(now: now)
        var out: [Envelope] = []
        if let socket {
            var budget = 10_000
            while budget > 0, let frame = try? socket.receive(flags: .dontWait) {
                budget -= 1
                guard let envelope = try? Envelope(decoding: frame) else {
                    undecodable += 1
                    continue
                }
                receivedMessages += 1
                if inbound != nil { inbound!.admit(envelope, now: now) } else { out.append(envelope) }
            }
        }
        if inbound != nil { out += inbound!.due(now: now) }
        return out
    }

    /// Messages dropped by the simulated link so far.
    var simulatedDrops: Int { (outbound?.dropped ?? 0) + (inbound?.dropped ?? 0) }
}
