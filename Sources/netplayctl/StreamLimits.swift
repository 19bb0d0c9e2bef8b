import ArgumentParser
import Foundation

/// `--count` and `--duration`: when a command that prints a stream (`tap`, `rooms watch`) stops.
struct StreamLimits: ParsableArguments {
    @Option(help: "Stop after this many events (tap) or changes after the snapshot (rooms watch); 0: never.") var count = 0
    @Option(help: "Stop after this many seconds (0: never).") var duration: Double = 0

    /// The longest `--duration`, seconds (about 31 years): longer ones, and `inf` or `nan`,
    /// are refused rather than overflowing the deadline.
    static let longestDuration: Double = 1e9

    func validate() throws {
        guard count >= 0, !(duration < 0) else { throw ValidationError("--count and --duration must not be negative") }
        guard (0 ... Self.longestDuration).contains(duration) else {
            throw ValidationError("--duration must be a number of seconds from 0 to \(Int(Self.longestDuration)), got \(duration)")
        }
    }

    /// The limits' clock, started now.
    func start() -> StreamStop {
        StreamStop(count: count, deadline: duration > 0 ? ContinuousClock.now + .milliseconds(Int64(duration * 1000)) : nil)
    }
}

/// One run of a stream against its ``StreamLimits``: how many items it printed and when it ends.
struct StreamStop {
    let count: Int
    /// When `--duration` is over, on the monotonic clock (nil: never).
    let deadline: ContinuousClock.Instant?
    /// Items printed so far.
    var seen = 0

    /// Whether the stream goes on: fewer items than `--count` and `--duration` not over.
    var goesOn: Bool { (count == 0 || seen < count) && (deadline.map { ContinuousClock.now < $0 } ?? true) }

    /// How long to wait for the next item: at most `cap` milliseconds, and not past the deadline.
    func waitMs(cap: Int) -> Int {
        guard let deadline else { return cap }
        let left = ContinuousClock.now.duration(to: deadline).components
        let leftMs = Double(left.seconds) * 1000 + Double(left.attoseconds) / 1e15
        return Int(min(Double(cap), max(1, leftMs)))
    }
}
