/// Why a sample game refused a state another peer sent (``Rollback/SerializableGame/loadForeignState(_:)``):
/// it decoded, but this match could not have reached it.
public struct RefusedGameState: Error, CustomStringConvertible, Sendable {
    /// The reason, for the log and the peer's error.
    public let description: String

    /// A refusal for `reason`.
    public init(_ reason: String) { description = reason }
}
