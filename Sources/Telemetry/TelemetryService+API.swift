import Foundation
import NetplayService
import NetplayWire

// TelemetryService: the JSON API (services, sessions, rooms, events, overview) and HTTP routing.
extension TelemetryService {
    // MARK: JSON API

    func servicesJSON() -> JSONValue {
        let now = self.now
        var rows: [String: [String: JSONValue]] = [:]
        var order: [String] = []
        if let cluster {
            for status in cluster.services {
                let key = "\(status.service)/\(status.instance)"
                order.append(key)
                rows[key] = [
                    "service": .string(status.service), "instance": .string(status.instance),
                    "state": .string(status.state.shortName),
                    "ready": .bool(status.ready), "pid": .number(status.pid), "restarts": .number(status.restarts),
                    "uptime_s": .double((Double(status.uptimeMs) / 1000).rounded(toPlaces: 1)),
                    "endpoint": .string(status.endpoint), "last_reason": .string(status.lastReason),
                    "supervised": true,
                ]
            }
        }
        for instance in store.sortedInstances {
            // The supervisor names instances by cluster.yaml; services report their own kind.
            let key = rows.keys.first { $0.hasSuffix("/\(instance.instance)") } ?? "\(instance.service)/\(instance.instance)"
            var row = rows[key] ?? ["service": .string(instance.service), "instance": .string(instance.instance), "supervised": false,
                                    "state": "reporting", "ready": .null]
            if rows[key] == nil { order.append(key) }
            if instance.service == "supervisor", let cluster, rows[key] == nil {
                row["state"] = "ready"
                row["ready"] = true
                row["pid"] = .number(cluster.supervisorPid)
                row["uptime_s"] = .double((Double(cluster.uptimeMs) / 1000).rounded(toPlaces: 1))
            }
            row["kind"] = .string(instance.service)
            row["last_report_age_s"] = .double((now - instance.receivedAt).rounded(toPlaces: 1))
            row["metrics"] = .number(instance.metrics.count)
            if let uptime = instance.metrics.first(where: { $0.name == "netplay_uptime_seconds" }) {
                row["reported_uptime_s"] = .double(uptime.value.rounded(toPlaces: 1))
            }
            rows[key] = row
        }
        if let runtime, rows.keys.contains(where: { $0.hasSuffix("/\(runtime.configuration.instance)") }) == false {
            let key = "\(runtime.configuration.kind)/\(runtime.configuration.instance)"
            order.append(key)
            rows[key] = ["service": .string(runtime.configuration.kind), "instance": .string(runtime.configuration.instance),
                         "state": "ready", "ready": true, "supervised": false, "last_report_age_s": 0.0,
                         "reported_uptime_s": .double((Double(runtime.uptimeMs) / 1000).rounded(toPlaces: 1))]
        }
        var clusterJSON: JSONValue = .null
        if let cluster {
            clusterJSON = [
                "name": .string(cluster.cluster),
                "state": .string(cluster.state.shortName),
                "uptime_s": .double((Double(cluster.uptimeMs) / 1000).rounded(toPlaces: 1)),
                "supervisor_pid": .number(cluster.supervisorPid),
                "age_s": .double((now - (clusterUpdatedAt ?? now)).rounded(toPlaces: 1)),
            ]
        }
        return [
            "instances": .array(order.compactMap { rows[$0].map(JSONValue.object) }),
            "cluster": clusterJSON,
            "cluster_error": clusterError.map(JSONValue.string) ?? .null,
        ]
    }

    /// Sessions the dashboard's overview shows (with their histories); `/api/sessions` has all.
    static let overviewSessions = 32

    /// The sessions reporting HUD stats, in id order: all, or the first `limit`; `total` says how
    /// many there are.
    func sessionsJSON(history: Bool, limit: Int = .max) -> JSONValue {
        let now = self.now
        let sessions = board.sessions.values.sorted { $0.stats.sessionId < $1.stats.sessionId }.prefix(limit)
        return [
            "sessions": .array(sessions.map { SessionBoard.json($0, now: now, history: history) }),
            "total": .number(board.sessions.count),
            "loose_peers": .array(board.loosePeers.keys.sorted().map { SessionBoard.json(board.loosePeers[$0]!) }),
        ]
    }

    func roomsJSON() -> JSONValue {
        [
            "rooms": .array(rooms.map { room in
                [
                    "room_id": .string(room.roomId), "session_id": .string(room.sessionId), "room_name": .string(room.roomName),
                    "host_name": .string(room.hostName), "game": .string(room.content?.gameName ?? ""),
                    "core": .string(room.content?.coreId ?? ""), "players": .number(room.currentPlayers),
                    "max_players": .number(room.maxPlayers), "spectators": .number(room.currentSpectators),
                    "max_spectators": .number(room.maxSpectators), "has_password": .bool(room.hasPassword),
                    "in_progress": .bool(room.inProgress), "region": .string(room.region),
                    "transport": .string(room.transport.shortName),
                ]
            }),
            "total": .number(roomsTotal),
            "source": settings.discovery.map(JSONValue.string) ?? .null,
            "error": roomsError.map(JSONValue.string) ?? .null,
        ]
    }

    func eventsJSON(_ query: [String: String]) -> HTTPResponse {
        var severity = Severity.unspecified
        if let text = query["severity"], !text.isEmpty {
            guard let parsed = EventLog.severity(named: text) else { return .error(400, "unknown severity '\(text)'") }
            severity = parsed
        }
        var limit = 100
        if let text = query["limit"], !text.isEmpty {
            guard let given = Int(text), (1...500).contains(given) else { return .error(400, "limit must be from 1 to 500, got '\(text.prefix(32))'") }
            limit = given
        }
        let found = events.recent(topicPrefix: query["topic"] ?? "", sessionId: query["session"] ?? "", minSeverity: severity, limit: limit)
        return .json(["events": .array(found.map(EventLog.json))])
    }

    func overviewJSON() -> JSONValue {
        guard let runtime else { return .null }
        return [
            "telemetry": [
                "instance": .string(runtime.configuration.instance), "version": .string(runtime.version),
                "uptime_s": .double((Double(runtime.uptimeMs) / 1000).rounded(toPlaces: 1)),
                "generated_unix_ms": .number(UnixTime.nowMs()),
            ],
            "services": servicesJSON(),
            "sessions": sessionsJSON(history: true, limit: Self.overviewSessions),
            "rooms": roomsJSON(),
            "events": .array(events.recent(limit: 25).map(EventLog.json)),
        ]
    }

    func route(_ request: HTTPRequest) -> HTTPResponse {
        httpRequestsTotal?.increment()
        switch request.path {
        case "/metrics":
            return HTTPResponse(contentType: PrometheusRenderer.contentType, body: metricsPage())
        case "/healthz":
            return .json(["status": "ok", "service": .string(runtime?.configuration.kind ?? "telemetry"),
                          "instance": .string(runtime?.configuration.instance ?? ""),
                          "instances_reporting": .number(store.instances.count),
                          "uptime_s": .double((Double(runtime?.uptimeMs ?? 0) / 1000).rounded(toPlaces: 1))])
        case "/", "/index.html":
            return .text(Dashboard.page(initial: overviewJSON().rendered()), contentType: "text/html; charset=utf-8")
        case "/api", "/api/":
            return .json(["endpoints": ["/api/overview", "/api/services", "/api/sessions", "/api/sessions/ID", "/api/rooms", "/api/retroarch",
                                        "/api/events?limit=&topic=&session=&severity=", "/metrics", "/healthz"]])
        case "/api/overview": return .json(overviewJSON())
        case "/api/services": return .json(servicesJSON())
        case "/api/sessions": return .json(sessionsJSON(history: request.query["history"] != "0"))
        case "/api/rooms": return .json(roomsJSON())
        case "/api/retroarch": return .json(retroArch.json(now: now))
        case "/api/events": return eventsJSON(request.query)
        default:
            if request.path.hasPrefix("/api/sessions/") {
                let id = String(request.path.dropFirst("/api/sessions/".count))
                guard let session = board.sessions[id] else { return .error(404, "no HUD stats for session '\(id)'") }
                return .json(SessionBoard.json(session, now: now, history: true))
            }
            return .error(404, "no such page: \(request.path) (see /api)")
        }
    }
}
