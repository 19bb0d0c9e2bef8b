/// A chat line received in a session.
public struct ChatLine: Sendable, Hashable {
    /// Sender's display name.
    public var from: String
    /// Sender's slot (0: spectator).
    public var slot: Int
    /// The text.
    public var text: String
    /// When the relay received it (Unix milliseconds).
    public var sentAtUnixMs: UInt64
}
