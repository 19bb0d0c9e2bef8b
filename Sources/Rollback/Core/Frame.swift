/// A frame number. Frame 0 is the first simulated frame; ``nullFrame`` (-1) means "no frame".
///
/// Frames are plain `Int`s in Swift; on the wire they fit a protobuf `int32`
/// (2^31 frames is more than a year at 60 frames per second).
public typealias Frame = Int

/// The frame number that means "none yet".
public let nullFrame: Frame = -1

/// A player slot, `0 ..< playerCount`. Every peer numbers players the same way.
public typealias PlayerHandle = Int

/// Identifies a remote endpoint (a peer, a spectator or the relay) to a session.
///
/// The engine never looks inside: the caller chooses the numbering and maps it to addresses,
/// ZeroMQ identities or anything else its transport uses.
public struct PeerID: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The caller-chosen number.
    public var rawValue: UInt64

    /// Wraps a caller-chosen number.
    public init(_ rawValue: UInt64) { self.rawValue = rawValue }

    public static func < (lhs: PeerID, rhs: PeerID) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String { "peer#\(rawValue)" }
}
