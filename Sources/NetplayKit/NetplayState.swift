/// The match as the frontend shows it: the state stream's values.
public enum NetplayState: Sendable, Hashable, CustomStringConvertible {
    /// Nothing started.
    case idle
    /// Hosting: attached to the relay, waiting for players (the "Waiting for Players" screen).
    case hosting(roomName: String, players: Int, maxPlayers: Int)
    /// Attaching, waiting for a state snapshot, or reconnecting (with the attempt number).
    case connecting(to: String, attempt: Int)
    /// Playing or spectating.
    case connected(slot: Int, players: Int)
    /// Over, with the reason.
    case disconnected(DisconnectReason)

    public var description: String {
        switch self {
        case .idle: "idle"
        case .hosting(let room, let players, let max): "hosting \(room) (\(players)/\(max))"
        case .connecting(let to, let attempt): attempt > 0 ? "reconnecting to \(to) (attempt \(attempt))" : "connecting to \(to)"
        case .connected(let slot, let players): slot > 0 ? "connected as P\(slot) (\(players) players)" : "spectating (\(players) players)"
        case .disconnected(let reason): "disconnected: \(reason)"
        }
    }
}
