import Dispatch
import Synchronization

/// Lets a warning about what strangers send through at most once per interval, counting the
/// rest, so a flood of refused requests or handshakes cannot flood the log (or the disk) too.
/// Thread-safe.
public final class WarningBudget: Sendable {
    private struct State {
        var nextAllowedNs: UInt64 = 0
        var suppressed = 0
    }

    private let intervalNs: UInt64
    private let state = Mutex(State())

    /// At most one warning per `seconds`.
    public init(perSeconds seconds: Double = 1) {
        intervalNs = UInt64(seconds * 1e9)
    }

    /// Whether to log now, and how many warnings were held back since the last one logged.
    public func take(now: UInt64 = DispatchTime.now().uptimeNanoseconds) -> (allowed: Bool, suppressed: Int) {
        state.withLock { state in
            guard now >= state.nextAllowedNs else {
                state.suppressed += 1
                return (false, 0)
            }
            let held = state.suppressed
            state.suppressed = 0
            state.nextAllowedNs = now + intervalNs
            return (true, held)
        }
    }
}
