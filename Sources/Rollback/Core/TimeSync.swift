/// Estimates how far this peer runs ahead of one remote endpoint, from a sliding window of
/// frame advantages, and turns it into wait recommendations.
///
/// The *local advantage* is how many frames the remote is estimated to be ahead of us (its
/// last reported frame, extrapolated by the time since and half the round trip). The
/// *remote advantage* is the same figure the remote computes about us and reports. Averaging
/// `(remote - local) / 2` cancels asymmetric latency and gives ``framesAhead``: positive when
/// we are ahead and should slow down. A frontend can run slightly slower (e.g. 59 instead of
/// 60 frames per second) while `framesAhead > 0.5` to converge without visible stalls, or
/// honour ``SessionEvent/waitRecommendation(frames:)`` by skipping whole frames.
public struct TimeSync: Sendable {
    private var local: [Int]
    private var remote: [Int]
    private var samples = 0
    private var next = 0
    private var localSum = 0
    private var remoteSum = 0

    /// A window of `window` samples (one per simulated frame).
    public init(window: Int = 40) {
        local = Array(repeating: 0, count: max(window, 1))
        remote = Array(repeating: 0, count: max(window, 1))
    }

    /// Adds the advantages observed at one frame.
    public mutating func record(localAdvantage: Int, remoteAdvantage: Int) {
        localSum += localAdvantage - local[next]
        remoteSum += remoteAdvantage - remote[next]
        local[next] = localAdvantage
        remote[next] = remoteAdvantage
        next += 1
        if next == local.count { next = 0 }
        samples = min(samples + 1, local.count)
    }

    /// Average frames this peer is ahead of the remote (negative: behind). 0 with no samples.
    public var framesAhead: Double {
        guard samples > 0 else { return 0 }
        return Double(remoteSum - localSum) / Double(samples) / 2
    }

    /// Whether ``framesAhead`` is positive (integer arithmetic only).
    var isAhead: Bool { samples > 0 && remoteSum > localSum }

    /// Frames to wait now, or 0 when the advantage is below `minimum`; never above `maximum`.
    public func recommendedWait(minimum: Int, maximum: Int) -> Int {
        let ahead = Int(framesAhead.rounded())
        return ahead >= minimum ? min(ahead, maximum) : 0
    }
}
