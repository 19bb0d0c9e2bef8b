/// The in-game overlay's figures (`[NET] P2 ████░ 18ms ⊠` and its expanded view).
public struct HUDStats: Sendable, Hashable {
    /// Round trip to the relay, milliseconds.
    public var pingMs = 0
    /// Round-trip jitter, milliseconds.
    public var jitterMs = 0
    /// Input delay in frames.
    public var frameDelay = 0
    /// Rollbacks so far and the frames they re-simulated.
    public var rollbacks = 0
    /// Frames re-simulated by rollbacks.
    public var rollbackFrames = 0
    /// Longest rollback in frames.
    public var maxRollbackFrames = 0
    /// How many frames this peer runs ahead of the slowest player (negative: behind).
    public var framesAhead = 0
    /// The frame simulated now (match numbering).
    public var currentFrame = 0
    /// Frames confirmed for everyone.
    public var confirmedFrame = 0
    /// Desyncs the relay detected, and resyncs completed.
    public var desyncs = 0
    /// Resyncs completed.
    public var resyncs = 0
    /// Everyone in the session.
    public var players: [PlayerHUD] = []

    /// Creates empty figures.
    public init() {}

    /// One line for logs and the collapsed overlay.
    public var line: String {
        var text = "frame=\(currentFrame) ping=\(pingMs)ms jitter=\(jitterMs)ms delay=\(frameDelay) rollbacks=\(rollbacks) "
            + "(\(rollbackFrames) frames, max \(maxRollbackFrames)) ahead=\(framesAhead) desyncs=\(desyncs) resyncs=\(resyncs)"
        let rows = players.filter { $0.slot > 0 }.sorted { $0.slot < $1.slot }
        if !rows.isEmpty {
            text += " players=[" + rows.map { row in
                "P\(row.slot) \(row.connected ? "\(row.pingMs)ms" : "away")" + (row.substitutedFrames > 0 ? " subst \(row.substitutedFrames)" : "")
            }.joined(separator: ", ") + "]"
        }
        return text
    }
}
