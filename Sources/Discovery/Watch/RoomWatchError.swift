/// Why a room watch gave up: discovery answered in a way no watcher can follow.
public struct RoomWatchError: Error, CustomStringConvertible, Sendable {
    /// What went wrong.
    public let description: String

    /// An error saying `description`.
    public init(_ description: String) { self.description = description }
}
