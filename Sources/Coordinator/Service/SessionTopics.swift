import Foundation
import NetplayWire

/// Topic names of the coordinator's events.
public enum SessionTopics {
    /// `sessions.` + the kind's name without its prefix, lower-cased (e.g. `sessions.player_joined`).
    public static func topic(for kind: SessionEventKind) -> String {
        "sessions." + kind.shortName
    }

    /// `relays.` + the kind's name without its prefix, lower-cased (e.g. `relays.dropped`).
    public static func topic(for kind: RelayEventKind) -> String {
        "relays." + kind.shortName
    }
}
