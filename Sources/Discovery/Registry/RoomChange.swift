import NetplayWire

/// One change of the registry, as published on discovery's PUB socket. Every change has its own
/// registry sequence (consecutive), which is also the room's `revision` after it.
public enum RoomChange: Sendable, Equatable {
    /// A room appeared (`rooms.added`).
    case added(RoomAdded)
    /// A room changed (`rooms.updated`).
    case updated(RoomUpdated)
    /// A room left (`rooms.removed`).
    case removed(RoomRemoved)

    /// The events topic.
    public var topic: String {
        switch self {
        case .added: RoomTopics.added
        case .updated: RoomTopics.updated
        case .removed: RoomTopics.removed
        }
    }

    /// The envelope body to publish.
    public var body: Envelope.Body {
        switch self {
        case .added(let event): .roomAdded(event)
        case .updated(let event): .roomUpdated(event)
        case .removed(let event): .roomRemoved(event)
        }
    }

    /// The registry sequence of this change.
    public var sequence: UInt64 {
        switch self {
        case .added(let event): event.sequence
        case .updated(let event): event.sequence
        case .removed(let event): event.sequence
        }
    }

    /// The room concerned.
    public var roomId: String {
        switch self {
        case .added(let event): event.room.roomId
        case .updated(let event): event.room.roomId
        case .removed(let event): event.roomId
        }
    }
}

/// The topics discovery publishes on its PUB socket.
public enum RoomTopics {
    /// Prefix of every room topic; watchers subscribe to it.
    public static let prefix = "rooms."
    /// A room appeared (`RoomAdded`).
    public static let added = "rooms.added"
    /// A room changed (`RoomUpdated`).
    public static let updated = "rooms.updated"
    /// A room left (`RoomRemoved`).
    public static let removed = "rooms.removed"
    /// The registry sequence, periodically (`RoomsSync`).
    public static let sync = "rooms.sync"
}
