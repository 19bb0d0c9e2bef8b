import NetplayWire
import Rollback

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
