import Foundation
import NetplayWire

/// The RetroArch sessions relays pipe (docs/retroarch.md), as their refreshes report them: soft
/// state, replaced by each refresh and dropped with the relay. Each becomes a lobby room, so a
/// RetroArch player finds the join string where every other room is listed.
public final class RetroArchSessionBook {
    private var byRelay: [String: [String: RetroArchSession]] = [:]

    /// An empty book.
    public init() {}

    /// Sessions held, across relays.
    public var count: Int { byRelay.values.reduce(0) { $0 + $1.count } }

    /// The lobby room id of a RetroArch session: its 12-byte id in hex (base64 has '/' and '+').
    public static func roomId(_ sessionId: String) -> String {
        let bytes = Array(Data(base64Encoded: sessionId) ?? Data(sessionId.utf8)).prefix(24)
        return "retroarch-relay-" + Hex.encode(bytes)
    }

    /// Replaces what `relayId` pipes with `sessions`; returns the rooms that changed (nil: gone).
    public func update(relayId: String, region: String, sessions: [RetroArchSession]) -> [String: Room?] {
        var now: [String: RetroArchSession] = [:]
        for var session in sessions where !session.sessionId.isEmpty {
            session.relayId = relayId
            now[session.sessionId] = session
        }
        let before = byRelay[relayId] ?? [:]
        byRelay[relayId] = now.isEmpty ? nil : now
        var changes: [String: Room?] = [:]
        for (id, session) in now where Self.roomFields(before[id]) != Self.roomFields(session) {
            changes[Self.roomId(id)] = .some(Self.room(session, region: region))
        }
        for id in before.keys where now[id] == nil { changes[Self.roomId(id)] = .some(nil) }
        return changes
    }

    /// Forgets what `relayId` piped (it is gone); returns the rooms to withdraw.
    public func drop(relayId: String) -> [String] {
        (byRelay.removeValue(forKey: relayId) ?? [:]).keys.map(Self.roomId)
    }

    /// The sessions, of one relay or all, by relay then session id.
    public func list(relayId: String = "") -> [RetroArchSession] {
        let relays = relayId.isEmpty ? byRelay.keys.sorted() : [relayId]
        return relays.flatMap { (byRelay[$0] ?? [:]).values.sorted { $0.sessionId < $1.sessionId } }
    }

    /// What a room shows of a session (a change elsewhere, e.g. byte counts, is no room change).
    private static func roomFields(_ session: RetroArchSession?) -> [String] {
        guard let session else { return [] }
        return [session.join, session.directEndpoint, session.hostNick, session.coreName, session.coreVersion,
                "\(session.contentCrc)", "\(session.clients)"]
    }

    /// The lobby room of a relayed RetroArch session. It is never "in progress": joining a running
    /// game (the host sends its state) is how every RetroArch join works.
    public static func room(_ session: RetroArchSession, region: String) -> Room {
        let nick = session.hostNick.isEmpty ? "RetroArch host" : session.hostNick
        let joinParts = session.join.split(separator: "|")
        let relayEndpoint = joinParts.count >= 2 ? "retroarch://\(joinParts[0]):\(joinParts[1])" : ""
        return Room(roomId: roomId(session.sessionId), hostName: String(nick.prefix(64)), roomName: String("\(nick)'s RetroArch room".prefix(128)),
                    content: ContentInfo(crc32: session.contentCrc, coreId: session.coreName, coreVersion: session.coreVersion),
                    maxPlayers: 8, currentPlayers: min(8, 1 + session.clients), transport: .relay,
                    hostEndpoint: session.directEndpoint.isEmpty ? "" : "retroarch://" + session.directEndpoint,
                    relayEndpoint: relayEndpoint, region: region, source: .retroarchRelay, retroarchJoin: session.join)
    }
}
