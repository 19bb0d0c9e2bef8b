import MemberwiseInit

/// How one direction of a simulated link behaves.
@PublicMemberwiseInit
public struct LinkConditions: Sendable, Hashable {
    /// Base one-way latency in milliseconds.
    public var latencyMs: Int = 0
    /// Extra latency drawn uniformly from `0 ... jitterMs` per message (which also reorders).
    public var jitterMs: Int = 0
    /// Probability that a message is lost.
    public var lossRate: Double = 0
    /// Probability that a message is delivered twice.
    public var duplicateRate: Double = 0
    /// Probability that a message is held back by `reorderDelayMs` extra, overtaking-style reordering.
    public var reorderRate: Double = 0
    /// The hold-back for reordered messages.
    public var reorderDelayMs: Int = 30

    /// No latency, no loss.
    public static let perfect = LinkConditions()

    /// A link that drops everything (a cut cable).
    public static let down = LinkConditions(lossRate: 1)
}

/// A message the simulator delivers.
public struct SimulatedDelivery<Message> {
    /// The sender.
    public var from: PeerID
    /// The receiver.
    public var to: PeerID
    /// The message.
    public var message: Message
    /// When it arrives (milliseconds).
    public var deliverAtMs: UInt64
}

extension SimulatedDelivery: Sendable where Message: Sendable {}

/// A deterministic, seeded network between endpoints: latency, jitter, loss, reordering and
/// duplication per directed link. The same seed and the same sends give the same deliveries,
/// so a failing property test can be replayed exactly.
public struct NetworkSimulator<Message> {
    private struct Pending {
        var delivery: SimulatedDelivery<Message>
        var sequence: UInt64
        func before(_ other: Pending) -> Bool {
            delivery.deliverAtMs != other.delivery.deliverAtMs
                ? delivery.deliverAtMs < other.delivery.deliverAtMs : sequence < other.sequence
        }
    }

    private var random: SeededRandom
    private var heap: [Pending] = []
    private var sequence: UInt64 = 0
    private var links: [Link: LinkConditions] = [:]
    /// Conditions of every link without an override.
    public var defaultConditions: LinkConditions
    /// Messages handed to ``send(_:from:to:now:)``.
    public private(set) var sentCount = 0
    /// Messages lost.
    public private(set) var droppedCount = 0
    /// Extra copies delivered.
    public private(set) var duplicatedCount = 0
    /// Messages delivered.
    public private(set) var deliveredCount = 0

    private struct Link: Hashable {
        var from: PeerID
        var to: PeerID
    }

    /// A network whose every random choice follows `seed`.
    public init(seed: UInt64, conditions: LinkConditions = .perfect) {
        random = SeededRandom(seed: seed)
        defaultConditions = conditions
    }

    /// Overrides the conditions from `from` to `to` (one direction).
    public mutating func setConditions(_ conditions: LinkConditions, from: PeerID, to: PeerID) {
        links[Link(from: from, to: to)] = conditions
    }

    /// Overrides both directions between `a` and `b`.
    public mutating func setConditions(_ conditions: LinkConditions, between a: PeerID, and b: PeerID) {
        setConditions(conditions, from: a, to: b)
        setConditions(conditions, from: b, to: a)
    }

    /// The conditions from `from` to `to`.
    public func conditions(from: PeerID, to: PeerID) -> LinkConditions {
        links[Link(from: from, to: to)] ?? defaultConditions
    }

    /// Messages in flight.
    public var inFlight: Int { heap.count }

    /// Sends a message at `now`; it may be lost, delayed, reordered or duplicated.
    public mutating func send(_ message: Message, from: PeerID, to: PeerID, now: UInt64) {
        sentCount += 1
        let link = conditions(from: from, to: to)
        if random.chance(link.lossRate) {
            droppedCount += 1
            return
        }
        schedule(message, from: from, to: to, now: now, link: link)
        if random.chance(link.duplicateRate) {
            duplicatedCount += 1
            schedule(message, from: from, to: to, now: now, link: link)
        }
    }

    private mutating func schedule(_ message: Message, from: PeerID, to: PeerID, now: UInt64, link: LinkConditions) {
        var delay = UInt64(max(0, link.latencyMs))
        if link.jitterMs > 0 { delay += random.below(UInt64(link.jitterMs) + 1) }
        if random.chance(link.reorderRate) { delay += UInt64(max(0, link.reorderDelayMs)) }
        sequence += 1
        push(Pending(delivery: SimulatedDelivery(from: from, to: to, message: message, deliverAtMs: now + delay),
                     sequence: sequence))
    }

    /// Removes and returns every message due at or before `now`, earliest first.
    public mutating func deliver(now: UInt64) -> [SimulatedDelivery<Message>] {
        var out: [SimulatedDelivery<Message>] = []
        while let first = heap.first, first.delivery.deliverAtMs <= now {
            out.append(pop().delivery)
        }
        deliveredCount += out.count
        return out
    }

    private mutating func push(_ item: Pending) {
        heap.append(item)
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].before(heap[parent]) else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func pop() -> Pending {
        let top = heap[0]
        let last = heap.removeLast()
        if !heap.isEmpty {
            heap[0] = last
            var parent = 0
            while true {
                let left = 2 * parent + 1
                let right = left + 1
                var smallest = parent
                if left < heap.count && heap[left].before(heap[smallest]) { smallest = left }
                if right < heap.count && heap[right].before(heap[smallest]) { smallest = right }
                if smallest == parent { break }
                heap.swapAt(parent, smallest)
                parent = smallest
            }
        }
        return top
    }
}
