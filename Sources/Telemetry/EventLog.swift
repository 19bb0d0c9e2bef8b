import Foundation
import NetplayService
import NetplayWire

/// The most recent events of the cluster, newest last, bounded in count.
public struct EventLog {
    /// Events kept.
    public let capacity: Int
    private var ring: [EventRecord] = []
    private var start = 0
    /// Events received since start.
    public private(set) var received: UInt64 = 0

    /// Creates an empty log.
    public init(capacity: Int = 2000) {
        self.capacity = max(1, capacity)
    }

    /// Longest message kept, in bytes (longer ones are cut).
    public static let maxMessageBytes = 4_096
    /// Longest topic, service, instance, session id, attribute key or value, in bytes.
    public static let maxFieldBytes = 256
    /// Most attributes kept per event.
    public static let maxAttributes = 32

    /// `event` cut to the size caps, and whether anything was cut.
    public static func bounded(_ event: EventRecord) -> (event: EventRecord, cut: Bool) {
        func cut(_ text: String, _ limit: Int) -> String {
            guard text.utf8.count > limit else { return text }
            var bytes = Array(text.utf8.prefix(limit))
            if let lead = bytes.lastIndex(where: { $0 & 0xC0 != 0x80 }) {  // no half character at the end
                let needed = bytes[lead] >= 0xF0 ? 4 : bytes[lead] >= 0xE0 ? 3 : bytes[lead] >= 0xC0 ? 2 : 1
                if bytes.count - lead < needed { bytes.removeSubrange(lead...) }
            }
            return String(decoding: bytes, as: UTF8.self)
        }
        var out = event
        out.message = cut(event.message, maxMessageBytes)
        out.topic = cut(event.topic, maxFieldBytes)
        out.service = cut(event.service, maxFieldBytes)
        out.instance = cut(event.instance, maxFieldBytes)
        out.sessionId = cut(event.sessionId, maxFieldBytes)
        out.attributes = event.attributes.prefix(maxAttributes).map { KeyValue(key: cut($0.key, maxFieldBytes), value: cut($0.value, maxFieldBytes)) }
        return (out, out != event)
    }

    /// Appends `event` (cut to the size caps, see ``bounded(_:)``), dropping the oldest beyond capacity.
    public mutating func append(_ event: EventRecord) {
        let event = Self.bounded(event).event
        received += 1
        if ring.count < capacity {
            ring.append(event)
        } else {
            ring[start] = event
            start = (start + 1) % capacity
        }
    }

    /// Events newest first, filtered like `RecentEventsRequest` (limit 0 = 100, at most 500).
    public func recent(topicPrefix: String = "", sessionId: String = "", minSeverity: Severity = .unspecified,
                       limit: Int = 0) -> [EventRecord] {
        let wanted = limit <= 0 ? 100 : min(limit, 500)
        var out: [EventRecord] = []
        var index = ring.count - 1
        while index >= 0 && out.count < wanted {
            let event = ring[(start + index) % ring.count]
            if (topicPrefix.isEmpty || event.topic.hasPrefix(topicPrefix))
                && (sessionId.isEmpty || event.sessionId == sessionId)
                && event.severity.rawValue >= minSeverity.rawValue {
                out.append(event)
            }
            index -= 1
        }
        return out
    }

    /// An event as JSON for the HTTP API.
    public static func json(_ event: EventRecord) -> JSONValue {
        var attributes: [String: JSONValue] = [:]
        for pair in event.attributes { attributes[pair.key] = .string(pair.value) }
        return [
            "service": .string(event.service), "instance": .string(event.instance), "topic": .string(event.topic),
            "timestamp_unix_ms": .number(event.timestampUnixMs),
            "severity": .string(event.severity.shortName),
            "message": .string(event.message), "session_id": .string(event.sessionId), "attributes": .object(attributes),
            "sequence": .number(event.sequence),
        ]
    }

    /// Parses a severity name ("warning", "SEVERITY_WARNING") or number.
    public static func severity(named text: String) -> Severity? {
        Severity(shortName: text)
            ?? Severity.allCases.first { $0.protoName == text.uppercased() || String($0.rawValue) == text }
    }
}

/// Per-session HUD statistics pushed by sync relays (`SessionStats`), with a short history
/// per peer for the dashboard's ping and rollback graphs. Sessions silent for longer than
/// ``forgetAfter`` (or ended) are forgotten.
public struct SessionBoard {
    /// One session's latest statistics and history.
    public struct Session {
        /// The latest report.
        public var stats: SessionStats
        /// The instance that reported it.
        public var reporter: String
        /// When it arrived (seconds on the board's clock).
        public var updatedAt: Double
        /// Per peer key ("P1 name"), the last samples: ping ms, rollbacks since the previous
        /// sample, frames ahead.
        public var history: [String: PeerHistory]
    }

    /// Recent samples of one peer.
    public struct PeerHistory {
        /// Ping, milliseconds.
        public var pingMs: [Double] = []
        /// Rollbacks between consecutive reports.
        public var rollbacks: [Double] = []
        /// Frames ahead of the slowest player.
        public var framesAhead: [Double] = []
        /// The previous cumulative rollback count.
        public var lastRollbacks: UInt64?
        /// The previous cumulative rolled-back frames.
        public var lastRollbackFrames: UInt64?
    }

    /// Samples kept per peer.
    public let historyLength: Int
    /// Most sessions tracked; stats for a new session beyond it are dropped.
    public var maxSessions = 1_024
    /// Most peers in one report.
    public static let maxPeers = 64
    /// Most peer histories over all sessions (each 3 × ``historyLength`` samples): 1,024
    /// sessions of 64 made-up peers were 23 million samples, and every dashboard refresh turned
    /// them all into JSON (about a gigabyte). Four a session on average by default.
    public var maxPeerHistories = 4_096
    /// Peer histories held now, over all sessions.
    public private(set) var peerHistoryCount = 0
    /// Longest session id, relay id or peer name, in bytes.
    public static let maxTextBytes = 128
    /// Seconds of silence after which a session is dropped.
    public var forgetAfter: Double
    /// Sessions by id.
    public private(set) var sessions: [String: Session] = [:]
    /// Standalone PeerStats (not inside a SessionStats), by peer name.
    public private(set) var loosePeers: [String: PeerStats] = [:]

    /// Creates an empty board.
    public init(historyLength: Int = 120, forgetAfter: Double = 30) {
        self.historyLength = historyLength
        self.forgetAfter = forgetAfter
    }

    /// Why `stats` would be dropped (a `netplay_telemetry_dropped_total` reason); nil when it fits the caps.
    public func refusal(_ stats: SessionStats) -> String? {
        if stats.peers.count > Self.maxPeers { return "too_many_peers" }
        if stats.sessionId.utf8.count > Self.maxTextBytes || stats.relayId.utf8.count > Self.maxTextBytes
            || stats.peers.contains(where: { $0.name.utf8.count > Self.maxTextBytes }) { return "too_long" }
        if sessions[stats.sessionId] == nil && sessions.count >= maxSessions { return "too_many_sessions" }
        let held = sessions[stats.sessionId]?.history.count ?? 0
        if peerHistoryCount - held + stats.peers.count > maxPeerHistories { return "too_many_peer_histories" }
        return nil
    }

    /// Records `stats` unless ``refusal(_:)`` finds a reason (then nothing changes and the
    /// result is empty); returns, per peer, the new rollbacks and rolled-back frames since the
    /// previous report (for the rollback-length histogram).
    @discardableResult
    public mutating func ingest(_ stats: SessionStats, reporter: String, at now: Double) -> [(rollbacks: UInt64, frames: UInt64)] {
        guard refusal(stats) == nil else { return [] }
        var session = sessions[stats.sessionId] ?? Session(stats: stats, reporter: reporter, updatedAt: now, history: [:])
        var deltas: [(UInt64, UInt64)] = []
        for peer in stats.peers {
            let key = Self.key(peer)
            var history = session.history[key] ?? PeerHistory()
            let newRollbacks = history.lastRollbacks.map { peer.rollbacks >= $0 ? peer.rollbacks - $0 : peer.rollbacks } ?? 0
            let newFrames = history.lastRollbackFrames.map { peer.rollbackFrames >= $0 ? peer.rollbackFrames - $0 : peer.rollbackFrames } ?? 0
            history.lastRollbacks = peer.rollbacks
            history.lastRollbackFrames = peer.rollbackFrames
            history.pingMs.append(Double(peer.pingMs))
            history.rollbacks.append(Double(newRollbacks))
            history.framesAhead.append(Double(peer.framesAhead))
            for keyPath in [\PeerHistory.pingMs, \PeerHistory.rollbacks, \PeerHistory.framesAhead] where history[keyPath: keyPath].count > historyLength {
                history[keyPath: keyPath].removeFirst(history[keyPath: keyPath].count - historyLength)
            }
            session.history[key] = history
            deltas.append((newRollbacks, newFrames))
        }
        // Only the peers of this report keep a history: a reporter naming new peers report after
        // report grew one session's histories without bound (and every dashboard refresh with them).
        if session.history.count > stats.peers.count {
            let current = Set(stats.peers.map(Self.key))
            session.history = session.history.filter { current.contains($0.key) }
        }
        session.stats = stats
        session.reporter = reporter
        session.updatedAt = now
        peerHistoryCount += session.history.count - (sessions[stats.sessionId]?.history.count ?? 0)
        sessions[stats.sessionId] = session
        return deltas
    }

    /// Records a standalone PeerStats.
    public mutating func ingest(peer: PeerStats) {
        guard peer.name.utf8.count <= Self.maxTextBytes else { return }
        loosePeers[peer.name.isEmpty ? "slot \(peer.slot)" : peer.name] = peer
        if loosePeers.count > 256 { loosePeers.removeValue(forKey: loosePeers.keys.sorted().first!) }
    }

    /// Drops a session (it ended).
    public mutating func end(_ sessionId: String) {
        if let gone = sessions.removeValue(forKey: sessionId) { peerHistoryCount -= gone.history.count }
    }

    /// Drops sessions silent for longer than ``forgetAfter``.
    @discardableResult
    public mutating func forgetSilent(at now: Double) -> [String] {
        let gone = sessions.filter { now - $0.value.updatedAt > forgetAfter }.map(\.key)
        for key in gone { end(key) }
        return gone
    }

    static func key(_ peer: PeerStats) -> String {
        let slot = peer.slot == 0 ? "S" : "P\(peer.slot)"
        return peer.name.isEmpty ? slot : "\(slot) \(peer.name)"
    }

    /// A peer's HUD figures as JSON.
    public static func json(_ peer: PeerStats) -> JSONValue {
        [
            "slot": .number(peer.slot), "name": .string(peer.name),
            "role": .string(peer.role.shortName),
            "ping_ms": .number(peer.pingMs), "jitter_ms": .number(peer.jitterMs), "frames_ahead": .number(peer.framesAhead),
            "frame_delay": .number(peer.frameDelay), "rollbacks": .number(peer.rollbacks),
            "rollback_frames": .number(peer.rollbackFrames), "max_rollback_frames": .number(peer.maxRollbackFrames),
            "substituted_frames": .number(peer.substitutedFrames), "connected": .bool(peer.connected),
            "current_frame": .number(peer.currentFrame),
        ]
    }

    /// A session as JSON (with history when `history` is true).
    public static func json(_ session: Session, now: Double, history: Bool) -> JSONValue {
        var object: [String: JSONValue] = [
            "session_id": .string(session.stats.sessionId), "relay_id": .string(session.stats.relayId),
            "reporter": .string(session.reporter), "confirmed_frame": .number(session.stats.confirmedFrame),
            "desyncs": .number(session.stats.desyncs), "resyncs": .number(session.stats.resyncs),
            "timestamp_unix_ms": .number(session.stats.timestampUnixMs),
            "updated_age_s": .double((now - session.updatedAt).rounded(toPlaces: 2)),
            "peers": .array(session.stats.peers.map(json)),
        ]
        if history {
            var graphs: [String: JSONValue] = [:]
            for (key, samples) in session.history {
                graphs[key] = [
                    "ping_ms": .array(samples.pingMs.map(JSONValue.double)),
                    "rollbacks": .array(samples.rollbacks.map(JSONValue.double)),
                    "frames_ahead": .array(samples.framesAhead.map(JSONValue.double)),
                ]
            }
            object["history"] = .object(graphs)
        }
        return .object(object)
    }
}

extension Double {
    func rounded(toPlaces places: Int) -> Double {
        let scale = pow(10, Double(places))
        return (self * scale).rounded() / scale
    }
}
