/// Identifies a timer set with ``ServiceRuntime/every(seconds:_:)`` or ``ServiceRuntime/after(seconds:_:)``.
public struct TimerID: Hashable, Sendable {
    let value: UInt64
}

/// The reactor's timers: one-shot and repeating, on the monotonic clock.
struct TimerQueue {
    private struct Entry {
        let id: TimerID
        var deadline: ContinuousClock.Instant
        let interval: Duration?
        let action: (ServiceRuntime) -> Void
    }

    private var entries: [Entry] = []
    private var nextId: UInt64 = 0

    mutating func add(after seconds: Double, repeating: Double?, _ action: @escaping (ServiceRuntime) -> Void) -> TimerID {
        nextId += 1
        let id = TimerID(value: nextId)
        entries.append(Entry(id: id, deadline: .now + Self.duration(seconds),
                             interval: repeating.map(Self.duration), action: action))
        return id
    }

    mutating func cancel(_ id: TimerID) {
        entries.removeAll { $0.id == id }
    }

    /// Milliseconds until the earliest deadline, at most `cap` (0 when one is already due).
    func millisecondsUntilNext(cap: Int) -> Int {
        // A loop, not map + min: this runs on every poll (an array per message batch).
        guard var earliest = entries.first?.deadline else { return cap }
        for entry in entries where entry.deadline < earliest { earliest = entry.deadline }
        let remaining = earliest - .now
        if remaining <= .zero { return 0 }
        let ms = remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000 + 1
        return Int(min(Int64(cap), ms))
    }

    /// Takes the actions of every due timer; repeating ones are rescheduled from their previous
    /// deadline (skipping missed beats rather than bursting). The caller runs the actions after
    /// this returns, so an action may add or cancel timers.
    mutating func takeDue() -> [(ServiceRuntime) -> Void] {
        let now = ContinuousClock.now
        var actions: [(ServiceRuntime) -> Void] = []
        var index = 0
        while index < entries.count {
            guard entries[index].deadline <= now else { index += 1; continue }
            actions.append(entries[index].action)
            if let interval = entries[index].interval {
                var next = entries[index].deadline + interval
                if next <= now { next = now + interval }
                entries[index].deadline = next
                index += 1
            } else {
                entries.remove(at: index)
            }
        }
        return actions
    }

    private static func duration(_ seconds: Double) -> Duration {
        .nanoseconds(Int64(max(0, seconds) * 1e9))
    }
}
