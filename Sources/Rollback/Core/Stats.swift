/// Counts rollbacks by length: bucket `n` (1 ... 15) counts rollbacks of `n` frames and
/// the last bucket counts everything longer. The counts are stored inline: recording never
/// allocates and costs no copy-on-write check.
public struct RollbackHistogram: Sendable, Hashable {
    /// The number of buckets; the last one collects rollbacks of `bucketCount - 1` frames or more.
    public static let bucketCount = 17

    @usableFromInline
    typealias Counts = (Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int)

    /// Counts per length; index 0 is unused (a rollback is at least one frame).
    @usableFromInline var counts: Counts = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)

    /// An empty histogram.
    public init() {}

    /// Counts per length; index 0 is unused (a rollback is at least one frame).
    public var buckets: [Int] {
        withUnsafeBytes(of: counts) { Array($0.bindMemory(to: Int.self)) }
    }

    /// Records one rollback of `length` frames.
    @inlinable
    public mutating func record(length: Int) {
        let bucket = min(max(length, 1), 16)
        withUnsafeMutableBytes(of: &counts) { counts in
            let offset = bucket &* MemoryLayout<Int>.stride
            counts.storeBytes(of: counts.load(fromByteOffset: offset, as: Int.self) &+ 1, toByteOffset: offset,
                              as: Int.self)
        }
    }

    /// The number of rollbacks recorded.
    public var count: Int { buckets.reduce(0, +) }

    /// The number of rollbacks of exactly `length` frames (or more, for the last bucket).
    public func count(length: Int) -> Int { buckets[min(max(length, 1), Self.bucketCount - 1)] }

    public static func == (lhs: RollbackHistogram, rhs: RollbackHistogram) -> Bool { lhs.buckets == rhs.buckets }

    public func hash(into hasher: inout Hasher) { hasher.combine(buckets) }
}

/// Connection and rollback figures for one remote endpoint, for a HUD or telemetry.
public struct PeerStats: Sendable, Hashable {
    /// The endpoint.
    public var peer: PeerID
    /// Smoothed round-trip time in milliseconds (0 until measured).
    public var pingMs: Int = 0
    /// Smoothed variation of the round-trip time in milliseconds.
    public var jitterMs: Int = 0
    /// How many frames this peer is behind the remote (negative: ahead).
    public var localFramesBehind: Int = 0
    /// How many frames the remote says it is behind this peer.
    public var remoteFramesBehind: Int = 0
    /// Rollbacks caused by this endpoint's inputs.
    public var rollbacks: Int = 0
    /// Their lengths.
    public var rollbackHistogram = RollbackHistogram()
    /// Predicted inputs of this endpoint's players that turned out wrong.
    public var predictionMisses: Int = 0
    /// Estimated bytes sent to the endpoint (see ``RollbackMessage/estimatedSize(inputSize:)``).
    public var bytesSent: Int = 0
    /// Messages sent to the endpoint.
    public var messagesSent: Int = 0
    /// Messages received from the endpoint.
    public var messagesReceived: Int = 0
    /// The newest frame of this endpoint's inputs held without gaps.
    public var lastReceivedFrame: Frame = nullFrame

    /// Zeroed stats for `peer`.
    public init(peer: PeerID) { self.peer = peer }
}

/// Whole-session rollback figures.
public struct SessionStats: Sendable, Hashable {
    /// The next frame to simulate.
    public var currentFrame: Frame = 0
    /// The newest frame whose inputs are final everywhere.
    public var confirmedFrame: Frame = nullFrame
    /// Frames simulated for the first time.
    public var framesAdvanced: Int = 0
    /// Frames simulated again after a rollback.
    public var framesResimulated: Int = 0
    /// States saved.
    public var statesSaved: Int = 0
    /// States loaded.
    public var statesLoaded: Int = 0
    /// Rollback lengths.
    public var rollbackHistogram = RollbackHistogram()
    /// Times ``P2PSession/advanceFrame()`` refused because of the prediction window.
    public var predictionBarrierStalls: Int = 0

    /// Zeroed stats.
    public init() {}
}
