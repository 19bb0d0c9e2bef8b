import NetplayWire

/// What happened to the sessions a relay serves that the coordinator must hear about (docs/relay.md,
/// "Lifecycle"): a match started, a participant gone for good (detached on purpose, or not back
/// within the disconnect grace), a session the relay ended by itself (every player left, idle).
///
/// Facts wait here until a refresh carrying them succeeds (``take(limit:)`` then
/// ``acknowledge(through:)``): one lost on the way is sent again, and the coordinator applies
/// them idempotently. Confined to the reactor thread, as the ``RelayCore`` that owns it.
public final class LifecycleFacts {
    /// One fact, numbered in the order it happened.
    struct Fact {
        let sequence: UInt64
        let body: Body
    }

    /// What a fact says.
    enum Body: Equatable {
        case started(sessionId: String)
        case gone(ParticipantGone)
        case ended(RelaySessionEnd)
    }

    /// Facts the coordinator has not acknowledged yet, oldest first.
    private(set) var pending: [Fact] = []
    private var nextSequence: UInt64 = 1
    /// Whether facts are kept at all (only a relay that registers with a coordinator keeps them).
    public var enabled: Bool
    /// At most this many facts wait (beyond, the oldest are dropped: a coordinator away that
    /// long has dropped the relay, and its sessions move on renewal).
    public let capacity: Int
    /// Called after each fact recorded (the service refreshes soon).
    public var onRecord: (() -> Void)?

    /// Creates an empty queue.
    public init(enabled: Bool = true, capacity: Int = 30_000) {
        self.enabled = enabled
        self.capacity = capacity
    }

    /// How many facts wait.
    public var count: Int { pending.count }

    func record(_ body: Body) {
        guard enabled else { return }
        pending.append(Fact(sequence: nextSequence, body: body))
        nextSequence += 1
        if pending.count > capacity { pending.removeFirst(pending.count - capacity) }
        onRecord?()
    }

    /// A match started in `sessionId`.
    public func started(_ sessionId: String) { record(.started(sessionId: sessionId)) }

    /// `participantId` left `sessionId` for good (`timedOut`: its disconnect grace expired).
    public func gone(_ sessionId: String, participantId: String, timedOut: Bool) {
        record(.gone(ParticipantGone(sessionId: sessionId, participantId: participantId, timedOut: timedOut)))
    }

    /// The relay ended `sessionId` by itself.
    public func ended(_ sessionId: String, reason: String) {
        record(.ended(RelaySessionEnd(sessionId: sessionId, reason: String(reason.prefix(256)))))
    }

    /// The oldest waiting facts, at most `limit` of each kind, as a refresh carries them, and
    /// the sequence to acknowledge once that refresh succeeded.
    public func take(limit: Int = 1_000) -> (started: [String], gone: [ParticipantGone], ended: [RelaySessionEnd], through: UInt64) {
        var started: [String] = [], gone: [ParticipantGone] = [], ended: [RelaySessionEnd] = []
        var through: UInt64 = 0
        for fact in pending {
            switch fact.body {
            case .started(let id):
                guard started.count < limit else { return (started, gone, ended, through) }
                started.append(id)
            case .gone(let departure):
                guard gone.count < limit else { return (started, gone, ended, through) }
                gone.append(departure)
            case .ended(let end):
                guard ended.count < limit else { return (started, gone, ended, through) }
                ended.append(end)
            }
            through = fact.sequence
        }
        return (started, gone, ended, through)
    }

    /// A refresh carrying every fact up to `sequence` succeeded: they are no longer kept.
    public func acknowledge(through sequence: UInt64) {
        guard sequence > 0 else { return }
        pending.removeAll { $0.sequence <= sequence }
    }
}
