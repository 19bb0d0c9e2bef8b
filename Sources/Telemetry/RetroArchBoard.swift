import NetplayService
import NetplayWire

/// The RetroArch sessions relays pipe, as their health reports arrive (`RetroArchSession`, every
/// two seconds and once more when a session ends): shown at `/api/retroarch` and as
/// `netplay_retroarch_session_*` series labelled with the relay and session, which vanish with the
/// session (or when its relay stops reporting it).
public struct RetroArchBoard {
    /// One session's last report.
    public struct Entry {
        public var session: RetroArchSession
        public var receivedAt: Double
    }

    /// Sessions held at most (a report beyond is dropped and counted).
    public static let maxSessions = 10_000
    /// Sessions held at most from one relay (twice a relay's default RetroArch session limit):
    /// one relay (or one sending as many) reporting made-up sessions cannot take every place.
    public static let maxSessionsPerRelay = 2_000
    /// Seconds without a report before a session is forgotten.
    public var forgetAfter: Double = 10
    /// By "relay/session".
    public private(set) var sessions: [String: Entry] = [:]
    /// Sessions held, by relay.
    private var perRelay: [String: Int] = [:]

    /// An empty board.
    public init() {}

    /// Takes a report; false when it was dropped (the board is full).
    @discardableResult
    public mutating func ingest(_ session: RetroArchSession, at now: Double) -> Bool {
        let key = session.relayId + "/" + session.sessionId
        if session.ended {
            if sessions.removeValue(forKey: key) != nil { release(session.relayId) }
            return true
        }
        if sessions[key] == nil {
            guard sessions.count < Self.maxSessions, perRelay[session.relayId, default: 0] < Self.maxSessionsPerRelay else { return false }
            perRelay[session.relayId, default: 0] += 1
        }
        sessions[key] = Entry(session: session, receivedAt: now)
        return true
    }

    /// Forgets sessions not reported for `forgetAfter` seconds.
    public mutating func forgetSilent(at now: Double) {
        for (key, entry) in sessions where now - entry.receivedAt >= forgetAfter {
            sessions[key] = nil
            release(entry.session.relayId)
        }
    }

    private mutating func release(_ relay: String) {
        let left = perRelay[relay, default: 1] - 1
        perRelay[relay] = left > 0 ? left : nil
    }

    /// The per-session series, labelled relay and session.
    public func metrics() -> [Metric] {
        var out: [Metric] = []
        for entry in sessions.values.sorted(by: { ($0.session.relayId, $0.session.sessionId) < ($1.session.relayId, $1.session.sessionId) }) {
            let s = entry.session
            let labels = [KeyValue(key: "relay", value: s.relayId), KeyValue(key: "session", value: s.sessionId)]
            func add(_ name: String, _ help: String, _ kind: Metric.Kind, _ value: Double) {
                out.append(Metric(name: "netplay_retroarch_session_" + name, help: help, kind: kind, labels: labels, value: value))
            }
            add("clients", "RetroArch clients linked to the session's host.", .gauge, Double(s.clients))
            add("bytes_from_host_total", "Bytes piped from the host to its clients.", .counter, Double(s.bytesFromHost))
            add("bytes_to_host_total", "Bytes piped from the clients to the host.", .counter, Double(s.bytesToHost))
            add("inputs_total", "INPUT messages piped.", .counter, Double(s.inputs))
            add("crc_checks_total", "CRC (state check) messages from the host.", .counter, Double(s.crcChecks))
            add("resync_requests_total", "REQUEST_SAVESTATE messages (a client's CRC check failed).", .counter, Double(s.resyncRequests))
            add("frame", "The host's frame, from its inputs and CRC checks.", .gauge, Double(s.lastFrame))
            add("host_rtt_seconds", "The host's round trip to the relay (RATP).", .gauge, Double(s.hostRttMs) / 1000)
            add("link_rtt_seconds", "The longest host-client round trip through the relay (netplay pings).", .gauge, Double(s.linkRttMs) / 1000)
        }
        return out
    }

    /// `/api/retroarch`.
    public func json(now: Double) -> JSONValue {
        let rows = sessions.values.sorted { ($0.session.relayId, $0.session.sessionId) < ($1.session.relayId, $1.session.sessionId) }
        return ["sessions": .array(rows.map { entry -> JSONValue in
            let s = entry.session
            return [
                "relay": .string(s.relayId), "session_id": .string(s.sessionId), "join": .string(s.join),
                "direct": .string(s.directEndpoint), "host_nick": .string(s.hostNick), "core": .string(s.coreName),
                "core_version": .string(s.coreVersion), "content_crc": .number(s.contentCrc), "clients": .number(s.clients),
                "pending_clients": .number(s.pendingClients), "bytes_from_host": .number(s.bytesFromHost),
                "bytes_to_host": .number(s.bytesToHost), "inputs": .number(s.inputs), "crc_checks": .number(s.crcChecks),
                "resync_requests": .number(s.resyncRequests), "savestates": .number(s.savestates),
                "frame": .number(s.lastFrame), "host_rtt_ms": .number(s.hostRttMs), "link_rtt_ms": .number(s.linkRttMs),
                "clients_joined": .number(s.clientsJoined), "opened_at_unix_ms": .number(s.openedAtUnixMs),
                "last_resync_at_unix_ms": .number(s.lastResyncAtUnixMs), "age_s": .double((now - entry.receivedAt).rounded(toPlaces: 1)),
            ]
        })]
    }
}
