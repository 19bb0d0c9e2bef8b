import Foundation
import NetplayWire

/// One short, human line per published event (what `netplayctl tap` prints without `--json`),
/// e.g. `sessions.started s-d37b "tapme" 2/2 relay sync-0 by alice`.
///
/// Names and free text are quoted or escaped so that a line never breaks, whatever a room or a
/// player calls itself.
public enum EventSummary {
    /// The line for `body` published under `topic`.
    public static func line(topic: String, _ body: Envelope.Body) -> String {
        let topic = plain(topic)
        switch body {
        case .sessionEvent(let event): return session(topic, event)
        case .relayEvent(let event): return relay(topic, event)
        case .roomAdded(let added): return room(topic, added.room)
        case .roomUpdated(let updated): return room(topic, updated.room)
        case .roomRemoved(let removed):
            return "\(topic) \(plain(removed.roomId)) \(removed.reason.shortName)"
        case .roomsSync(let sync):
            return "\(topic) \(sync.roomCount) rooms sequence \(sync.sequence)"
        case .peerEvent(let event):
            let peer = event.peer
            return "\(topic) \(event.kind.shortName) \(quoted(peer.name)) "
                + "\(peer.role == .spectator ? "spectator" : "P\(peer.slot)") frame \(event.frame)"
                + (event.detail.isEmpty ? "" : " \(plain(event.detail))")
        case .desyncNotice(let notice):
            return "\(topic) \(plain(notice.sessionId)) frame \(notice.frame) diverged "
                + (notice.divergedSlots.isEmpty ? "-" : notice.divergedSlots.map { "P\($0)" }.joined(separator: ","))
                + " reference P\(notice.referenceSlot)" + (notice.resyncStarted ? " resync started" : "")
        case .sessionStats(let stats):
            let attached = stats.peers.filter(\.connected).count
            return "\(topic) \(plain(stats.sessionId)) relay \(dash(stats.relayId)) frame \(stats.confirmedFrame) "
                + "peers \(attached)/\(stats.peers.count) desyncs \(stats.desyncs) resyncs \(stats.resyncs)"
        case .retroarchSession(let session):
            return "\(topic) \(plain(session.sessionId)) relay \(dash(session.relayId)) join \(plain(session.join)) "
                + "clients \(session.clients) frame \(session.lastFrame)" + (session.ended ? " ended \(dash(session.endReason))" : "")
        case .eventRecord(let record): return event(topic, record)
        default: return "\(topic) \(body.name)"
        }
    }

    /// `sessions.*`: id, room name, players/places, relay, who did it, how many are attached, reason.
    static func session(_ topic: String, _ event: SessionEvent) -> String {
        let session = event.session
        let everyone = session.slots.compactMap(\.participant) + session.spectators
        let players = session.slots.filter { $0.participant != nil }.count
        var line = "\(topic) \(plain(session.sessionId)) \(quoted(session.settings?.roomName ?? "")) "
            + "\(players)/\(session.slots.count) relay \(dash(session.relayId))"
        if !session.spectators.isEmpty { line += " spectators \(session.spectators.count)" }
        if !event.participantId.isEmpty {
            let who = everyone.first { $0.participantId == event.participantId }
            line += " by " + (who.map { quoted($0.name) } ?? plain(event.participantId))
        }
        let attached = everyone.filter(\.connected).count
        if attached > 0 { line += " attached \(attached)/\(everyone.count)" }
        if !event.reason.isEmpty { line += " (\(plain(event.reason)))" }
        return line
    }

    /// `relays.*`: id, endpoint, region, sessions, load.
    static func relay(_ topic: String, _ event: RelayEvent) -> String {
        let relay = event.relay, load = relay.load ?? RelayLoad()
        return "\(topic) \(plain(relay.relayId)) \(plain(relay.endpoint)) region \(dash(relay.region)) "
            + "sessions \(event.sessionIds.count) peers \(load.peers)" + (relay.draining ? " draining" : "")
    }

    /// `rooms.added` / `rooms.updated`: id, name, game, players, how it is reached.
    static func room(_ topic: String, _ room: Room) -> String {
        "\(topic) \(plain(room.roomId)) \(quoted(room.roomName)) game \(quoted(room.content?.gameName ?? "")) "
            + "\(room.currentPlayers)/\(room.maxPlayers) \(room.transport == .lan ? "lan" : "relay")"
            + (room.inProgress ? " in progress" : "") + (room.hasPassword ? " password" : "")
    }

    /// Any other event (supervisor.*, sync.session_started, retroarch.*, ...): topic, severity
    /// when not routine, message, and the session when the message does not name it.
    static func event(_ topic: String, _ record: EventRecord) -> String {
        var line = topic
        switch record.severity {
        case .unspecified, .debug, .info: break
        default: line += " [\(record.severity.shortName)]"
        }
        if !record.message.isEmpty { line += " " + plain(record.message) }
        if !record.sessionId.isEmpty, !record.message.contains(record.sessionId) { line += " session \(plain(record.sessionId))" }
        return line
    }

    // MARK: Text

    /// `text` in double quotes, with quotes, backslashes and control characters escaped.
    static func quoted(_ text: String) -> String { "\"" + ControlCharacters.escaped(text.prefix(200), quotes: true) + "\"" }

    /// `text` with control characters escaped (no line breaks), at most 200 characters.
    public static func plain(_ text: String) -> String {
        let line = ControlCharacters.escaped(text.prefix(200))
        return line.count > 200 ? String(line.prefix(199)) + "…" : line
    }

    static func dash(_ text: String) -> String { text.isEmpty ? "-" : plain(text) }
}

/// How long ago a wall-clock time was, for people: `0.4 s ago`, `12 s ago`, `3 min ago`, `2 h ago`.
public enum AgeText {
    /// The age of `unixMs` at `nowUnixMs`; "never" for 0, "just now" for a time in the future
    /// (clocks of two machines disagree).
    public static func ago(_ unixMs: UInt64, now nowUnixMs: UInt64 = UnixTime.nowMs()) -> String {
        guard unixMs > 0 else { return "never" }
        guard nowUnixMs >= unixMs else { return "just now" }
        let seconds = Double(nowUnixMs - unixMs) / 1000
        switch seconds {
        case ..<10: return String(format: "%.1f s ago", seconds)
        case ..<120: return "\(Int(seconds)) s ago"
        case ..<7200: return "\(Int(seconds / 60)) min ago"
        case ..<172_800: return "\(Int(seconds / 3600)) h ago"
        default: return "\(Int(seconds / 86_400)) d ago"
        }
    }
}
