/// The OTP restart-intensity window: remembers when restarts happened and says when one more
/// would exceed "at most R restarts in P seconds".
public struct RestartIntensity: Sendable {
    /// The limit.
    public let limit: IntensityLimit
    private var times: [Double] = []

    /// Creates an empty window.
    public init(limit: IntensityLimit) { self.limit = limit }

    /// Restarts inside the window ending at `now` (seconds on any monotonic clock).
    public mutating func count(at now: Double) -> Int {
        times.removeAll { now - $0 > limit.period }
        return times.count
    }

    /// Records a restart at `now`; returns false when it exceeds the limit (the cluster must stop).
    public mutating func record(at now: Double) -> Bool {
        times.removeAll { now - $0 > limit.period }
        times.append(now)
        return times.count <= limit.maxRestarts
    }
}
