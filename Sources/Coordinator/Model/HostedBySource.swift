/// How many sessions each host address holds now, kept as sessions change (not counted per
/// request): those in the lobby (not started yet) and all active ones (lobby or running). The
/// per-address caps on creates read them (`CoordinatorSettings.lobbySessionsPerSource`,
/// `sessionsPerSource`). A session whose host's address is unknown ("") counts for nobody.
struct HostedBySource {
    /// Lobby sessions per host address.
    private(set) var lobby: [String: Int] = [:]
    /// Active sessions (lobby or running) per host address.
    private(set) var active: [String: Int] = [:]

    /// `previous` (nil: none) is now `updated` (nil: gone).
    mutating func replace(_ previous: SessionRecord?, with updated: SessionRecord?) {
        if let previous { count(previous, by: -1) }
        if let updated { count(updated, by: 1) }
    }

    private mutating func count(_ session: SessionRecord, by delta: Int) {
        guard session.isActive, let source = session.host?.source, !source.isEmpty else { return }
        Self.add(delta, to: source, in: &active)
        if session.state == .lobby { Self.add(delta, to: source, in: &lobby) }
    }

    private static func add(_ delta: Int, to source: String, in counts: inout [String: Int]) {
        let value = counts[source, default: 0] + delta
        counts[source] = value > 0 ? value : nil
    }
}
