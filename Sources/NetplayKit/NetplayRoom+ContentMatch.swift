import NetplayAuth
import NetplayWire

/// Whether a player's content can join a room, by the coordinator's (and LAN host's) rule.
public enum ContentMatch: Sendable, Hashable {
    /// The room names its game (CRC32 or MD5) and yours is the same, core and version included.
    case same
    /// Another game or ROM dump: a join would be refused with CONTENT_MISMATCH.
    case differentContent
    /// The same game on another core: refused with CORE_MISMATCH.
    case differentCore
    /// The same game and core, another core version: refused with CORE_VERSION_MISMATCH.
    case differentCoreVersion
    /// The room names no game identity (no CRC32, no MD5) and nothing it names differs: the
    /// host admits you, but nobody can tell whether the game is the same.
    case unknown

    /// Whether the room's host would admit this content (``same`` or ``unknown``).
    public var isJoinable: Bool { self == .same || self == .unknown }

    /// The error code a join with this content is refused with (nil when it is admitted).
    public var refusal: ErrorCode? {
        switch self {
        case .same, .unknown: nil
        case .differentContent: .contentMismatch
        case .differentCore: .coreMismatch
        case .differentCoreVersion: .coreVersionMismatch
        }
    }
}

extension NetplayRoom {
    /// Whether `content` (yours) matches this room's: the coordinator's CONTENT_MISMATCH rule
    /// (``AdmissionPolicy/checkContent(room:joiner:)``, which LAN hosts apply too), so a browser
    /// can grey out or mark rooms before anyone tries to join.
    public func contentMatch(for content: ContentInfo) -> ContentMatch {
        do {
            try AdmissionPolicy.checkContent(room: self.content, joiner: content)
        } catch {
            switch error.code {
            case .coreMismatch: return .differentCore
            case .coreVersionMismatch: return .differentCoreVersion
            default: return .differentContent
            }
        }
        return self.content.crc32 == 0 && self.content.md5.isEmpty ? .unknown : .same
    }
}
