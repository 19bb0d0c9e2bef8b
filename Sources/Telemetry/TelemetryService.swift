import Foundation
import Logging
import NetplayService
import NetplayWire
import ZeroMQ

/// netplay-telemetry's own settings (beyond the common service flags).
public struct TelemetrySettings: Sendable {
    /// PULL endpoint every service pushes metrics, events and HUD stats to.
    public var ingest: String
    /// HTTP address (`HOST:PORT`) for /metrics, /healthz, /api and the dashboard; nil: off.
    public var http: String?
    /// Seconds after which a silent instance is forgotten.
    public var forgetAfter: Double
    /// Seconds after which a session without HUD stats is forgotten.
    public var sessionForgetAfter: Double
    /// Discovery's request endpoint, asked for rooms (nil: no rooms).
    public var discovery: String?
    /// Events kept for the recent-events API.
    public var eventCapacity: Int
    /// Caps on the metrics kept (instances, series, labels).
    public var limits: MetricStore.Limits
    /// The HTTP server's connection limits.
    public var httpLimits: HTTPLimits

    /// Creates settings.
    public init(ingest: String = ServiceDefaults.telemetryIngest, http: String? = "127.0.0.1:9400", forgetAfter: Double = 20,
                sessionForgetAfter: Double = 30, discovery: String? = ServiceDefaults.discoveryEndpoint, eventCapacity: Int = 2000,
                limits: MetricStore.Limits = MetricStore.Limits(), httpLimits: HTTPLimits = HTTPLimits()) {
        self.limits = limits
        self.httpLimits = httpLimits
        self.ingest = ingest
        self.http = http
        self.forgetAfter = forgetAfter
        self.sessionForgetAfter = sessionForgetAfter
        self.discovery = discovery
        self.eventCapacity = eventCapacity
    }
}

/// netplay-telemetry's logic, as a ``Service`` on the shared runtime.
///
/// It PULLs `MetricsSnapshot`, `EventRecord`, `SessionStats` and `PeerStats` envelopes from
/// every service, keeps the latest snapshot per instance (forgetting silent ones), the recent
/// events (re-published on its PUB socket under their topics: one place to tap the whole
/// cluster), and per-session HUD stats with short histories. It answers `RecentEventsRequest`
/// on its ROUTER and serves HTTP: `/metrics` (Prometheus text), `/healthz`, `/api/...` (JSON)
/// and `/` (the dashboard). When it runs under the supervisor it also shows the cluster status;
/// when discovery is reachable, the rooms.
public final class TelemetryService: Service {
    /// Its settings.
    public let settings: TelemetrySettings
    /// The HTTP address actually bound (nil until started or when HTTP is off).
    public private(set) var httpAddress: String?
    /// The ingest endpoint actually bound.
    public private(set) var ingestAddress: String?

    var store: MetricStore
    var events: EventLog
    var board: SessionBoard
    /// Relayed RetroArch sessions' health.
    var retroArch = RetroArchBoard()
    private var puller: Socket?
    private var http: HTTPServer?
    weak var runtime: ServiceRuntime?
    private let clock = ContinuousClock.now
    var cluster: ClusterStatusResponse?
    var clusterUpdatedAt: Double?
    var clusterError: String?
    private var clusterClient: ServiceClient?
    private var clusterInFlight = false
    var rooms: [Room] = []
    var roomsTotal: UInt32 = 0
    var roomsError: String? = "not asked yet"
    private var roomsClient: ServiceClient?
    private var roomsInFlight = false
    private var warned = Set<String>()

    private var snapshotsTotal: Counter?
    private var eventsTotal: Counter?
    private var sessionStatsTotal: Counter?
    private var undecodableTotal: Counter?
    private var spoofedTotal: Counter?
    private var forgottenTotal: Counter?
    var httpRequestsTotal: Counter?
    var rejectedTotals: [MetricStore.Rejection: Counter] = [:]
    /// Series the last `/metrics` page left out: another kind than their family's, or duplicates.
    var suppressedSeries = 0
    /// The last `/metrics` page when it was large, and when it was rendered (``metricsPage()``).
    var largeMetricsPage: (body: [UInt8], renderedAt: Double)?
    private var droppedTotals: [String: Counter] = [:]
    private var dropWarnings: [String: (at: Double, suppressed: Int)] = [:]
    private var pingSeconds: Histogram?
    private var rollbackFrames: Histogram?

    /// Creates the service; sockets open in ``start(runtime:)``.
    public init(settings: TelemetrySettings) {
        self.settings = settings
        store = MetricStore(forgetAfter: settings.forgetAfter, limits: settings.limits)
        events = EventLog(capacity: settings.eventCapacity)
        board = SessionBoard(forgetAfter: settings.sessionForgetAfter)
        roomsError = settings.discovery == nil ? "not configured" : "not asked yet"
    }

    var now: Double {
        let elapsed = ContinuousClock.now - clock
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    // MARK: Service

    public func start(runtime: ServiceRuntime) throws {
        self.runtime = runtime
        let metrics = runtime.metrics
        snapshotsTotal = metrics.counter("netplay_telemetry_snapshots_total", help: "Metric snapshots ingested.")
        eventsTotal = metrics.counter("netplay_telemetry_events_total", help: "Event records ingested.")
        sessionStatsTotal = metrics.counter("netplay_telemetry_session_stats_total", help: "Session HUD reports ingested.")
        spoofedTotal = metrics.counter("netplay_telemetry_spoofed_total",
                                       help: "Pushed frames dropped: no cluster key, or claiming another instance.")
        undecodableTotal = metrics.counter("netplay_telemetry_undecodable_total", help: "Pushed frames that were not a valid envelope.")
        forgottenTotal = metrics.counter("netplay_telemetry_forgotten_instances_total", help: "Instances forgotten after they stopped reporting.")
        httpRequestsTotal = metrics.counter("netplay_telemetry_http_requests_total", help: "HTTP requests answered.")
        for reason in MetricStore.Rejection.allCases {
            rejectedTotals[reason] = metrics.counter("netplay_telemetry_rejected_metrics_total",
                                                     help: "Pushed metrics dropped for breaking the naming rules.", labels: ["reason": reason.rawValue])
        }
        for reason in Self.dropReasons {
            droppedTotals[reason] = metrics.counter("netplay_telemetry_dropped_total",
                                                    help: "Pushed data dropped (snapshots, metrics, session reports) or cut (events) for exceeding a cap.",
                                                    labels: ["reason": reason])
        }
        metrics.gauge("netplay_telemetry_series", help: "Series held from reporting instances.") { [weak self] in Double(self?.store.seriesCount ?? 0) }
        pingSeconds = metrics.histogram("netplay_session_peer_ping_seconds", help: "Peers' round trip to their relay, per HUD report.",
                                        buckets: [0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1])
        rollbackFrames = metrics.histogram("netplay_session_rollback_length_frames", help: "Mean rollback length between HUD reports, in frames.",
                                           buckets: [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 24, 32])
        metrics.gauge("netplay_telemetry_instances", help: "Instances currently reporting.") { [weak self] in Double(self?.store.instances.count ?? 0) }
        metrics.gauge("netplay_telemetry_suppressed_series",
                      help: "Series the last /metrics page left out: another kind than their family's, or a duplicate.") { [weak self] in
            Double(self?.suppressedSeries ?? 0)
        }
        metrics.gauge("netplay_sessions_active", help: "Sessions with recent HUD stats.") { [weak self] in Double(self?.board.sessions.count ?? 0) }
        metrics.gauge("netplay_session_peers", help: "Peers in sessions with recent HUD stats.") { [weak self] in
            Double(self?.board.sessions.values.reduce(0) { $0 + $1.stats.peers.count } ?? 0)
        }

        let socket = try runtime.controlServerSocket(.pull)
        do {
            try socket.bind(settings.ingest)
            ingestAddress = try socket.lastEndpoint
        } catch {
            throw RuntimeStartError("cannot bind ingest endpoint \(settings.ingest): \(error)")
        }
        puller = socket
        runtime.watch(socket) { [weak self] _ in self?.drainIngest() }

        if let address = settings.http {
            let server = try HTTPServer(address: address, runtime: runtime, limits: settings.httpLimits) { [weak self] request in
                self?.route(request) ?? .error(503, "stopping")
            }
            http = server
            httpAddress = server.boundAddress
        }
        if let supervisor = runtime.configuration.supervisor {
            clusterClient = runtime.trust == nil ? try? runtime.client(to: supervisor)
                : try? runtime.controlClient(kind: "supervisor", endpoint: supervisor)
        }
        if let discovery = settings.discovery {
            roomsClient = try? runtime.client(to: discovery)
        }
        runtime.logger.info("telemetry serving", metadata: [
            "ingest": "\(ingestAddress ?? "")", "http": "\(httpAddress.map { "http://\($0)/" } ?? "off")",
            "cluster": "\(runtime.configuration.supervisor ?? "none")", "rooms": "\(settings.discovery ?? "none")",
        ])
        runtime.every(seconds: 1) { [weak self] _ in self?.housekeeping() }
        housekeeping()
    }

    public func handle(_ request: Request, runtime: ServiceRuntime) throws(ServiceError) -> HandlerOutcome {
        switch request.body {
        case .recentEventsRequest(let query):
            let found = events.recent(topicPrefix: query.topicPrefix, sessionId: query.sessionId, minSeverity: query.minSeverity,
                                      limit: Int(query.limit))
            return .reply(.recentEventsResponse(RecentEventsResponse(events: found)))
        case .metricsSnapshot, .eventRecord, .sessionStats, .peerStats, .retroarchSession:
            // Also accepted on the request socket, one-way, from cluster members only.
            guard request.caller.isCluster else {
                throw ServiceError(.permissionDenied, "Telemetry ingests from cluster members only.")
            }
            ingest(request.envelope, from: request.caller)
            return .none
        default:
            throw ServiceError(.unknownRequest, "Telemetry does not handle \(request.body.name); ask it RecentEventsRequest or use HTTP.")
        }
    }

    public var status: String {
        "ok: \(store.instances.count) instances reporting, \(board.sessions.count) sessions"
    }

    public var healthDetails: [(key: String, value: String)] {
        [("ingest", ingestAddress ?? "off"), ("http", httpAddress ?? "off"),
         ("instances_reporting", "\(store.instances.count)"), ("sessions", "\(board.sessions.count)"),
         ("events_received", "\(events.received)")]
    }

    public func introspect(section: String) -> JSONValue {
        [
            "ingest": .string(ingestAddress ?? ""), "http": httpAddress.map(JSONValue.string) ?? .null,
            "instances": .array(store.sortedInstances.map { .string("\($0.service)/\($0.instance)") }),
            "sessions": .array(board.sessions.keys.sorted().map(JSONValue.string)),
            "events_kept": .number(events.recent(limit: 500).count), "events_received": .number(events.received),
            "forget_after_s": .double(settings.forgetAfter),
        ]
    }

    public func stop(runtime: ServiceRuntime) {
        http?.close()
        http = nil
        puller?.close()
        puller = nil
        clusterClient?.close()
        roomsClient?.close()
    }

    // MARK: Ingest

    private func drainIngest() {
        guard let puller else { return }
        for _ in 0..<4096 {
            guard let frame = try? puller.receive(flags: .dontWait) else { return }
            let caller = ZAPAuthenticator.caller(fromUserId: puller.propertyOfLastFrame("User-Id"))
            guard let envelope = try? Envelope(decoding: frame) else {
                undecodableTotal?.increment()
                continue
            }
            if runtime?.trust == nil {
                ingest(envelope)
            } else if caller.isCluster {
                ingest(envelope, from: caller)
            } else {
                spoofedTotal?.increment()
            }
        }
    }

    /// Ingests one envelope pushed by cluster member `caller` (its key proved its kind and
    /// instance): metrics and events must be its own, under its own service kind, and session
    /// statistics must come from a relay (kind `sync`) about itself. Anything else is dropped and
    /// counted. A member naming other services could fill every instance place
    /// (`too_many_instances`) under names like `a/me`, `b/me`, ...
    public func ingest(_ envelope: Envelope, from caller: Caller) {
        guard case .cluster(let kind, let instance) = caller else {
            spoofedTotal?.increment()
            return
        }
        let claimed: (service: String?, instance: String)?
        switch envelope.body {
        case .metricsSnapshot(let snapshot): claimed = (snapshot.service, snapshot.instance)
        case .eventRecord(let record): claimed = (record.service, record.instance)
        case .sessionStats(let stats): claimed = ("sync", stats.relayId)
        case .retroarchSession(let session): claimed = ("sync", session.relayId)
        default: claimed = nil
        }
        if let claimed, claimed.instance != instance || (claimed.service.map { $0 != kind } ?? false) {
            spoofedTotal?.increment()
            if warned.insert("spoof:\(kind)/\(instance)").inserted {
                runtime?.logger.warning("dropped telemetry that claims another service or instance",
                                        metadata: ["sender": "\(kind)/\(instance)",
                                                   "claimed": "\(claimed.service.map { String($0.prefix(64)) } ?? "")/\(claimed.instance.prefix(64))"])
            }
            return
        }
        ingest(envelope)
    }

    /// Ingests one pushed envelope (tests call this directly too).
    public func ingest(_ envelope: Envelope) {
        let now = self.now
        switch envelope.body {
        case .metricsSnapshot(let snapshot):
            snapshotsTotal?.increment()
            let outcome = store.ingest(snapshot, at: now)
            for problem in outcome.rejections { rejectedTotals[problem]?.increment() }
            if !outcome.rejections.isEmpty, warned.insert("\(snapshot.service)/\(snapshot.instance)").inserted {
                let bad = snapshot.metrics.lazy.filter { MetricStore.check($0) != nil }.prefix(3).map { "\($0.name.prefix(128)) (\(MetricStore.check($0)!.rawValue))" }
                runtime?.logger.warning("dropped metrics that break the naming rules",
                                        metadata: ["from": "\(snapshot.service.prefix(128))/\(snapshot.instance.prefix(128))", "examples": "\(bad.joined(separator: ", "))"])
            }
            for (drop, count) in outcome.drops {
                dropped(drop.rawValue, count: count, from: "\(snapshot.service.prefix(128))/\(snapshot.instance.prefix(128))", at: now)
            }
        case .eventRecord(let record):
            eventsTotal?.increment()
            let (bounded, cut) = EventLog.bounded(record)
            if cut { dropped("event_cut", count: 1, from: "\(bounded.service)/\(bounded.instance)", at: now) }
            events.append(bounded)
            runtime?.publish(topic: bounded.topic, .eventRecord(bounded))
            // Only the coordinator ends sessions (the record's service is its sender's, checked
            // against its key): any member's record ended any session's HUD stats.
            if bounded.topic == "sessions.ended", bounded.service == "coordinator", !bounded.sessionId.isEmpty {
                board.end(bounded.sessionId)
            }
        case .sessionStats(let stats):
            sessionStatsTotal?.increment()
            if let reason = board.refusal(stats) {
                dropped(reason, count: 1, from: String(stats.relayId.prefix(128)), at: now)
                return
            }
            let deltas = board.ingest(stats, reporter: stats.relayId, at: now)
            for peer in stats.peers where peer.connected { pingSeconds?.observe(Double(peer.pingMs) / 1000) }
            for delta in deltas where delta.rollbacks > 0 {
                rollbackFrames?.observe(Double(delta.frames) / Double(delta.rollbacks))
            }
            runtime?.publish(topic: "hud.stats", .sessionStats(stats))
        case .peerStats(let peer):
            sessionStatsTotal?.increment()
            board.ingest(peer: peer)
        case .retroarchSession(let session):
            sessionStatsTotal?.increment()
            if !retroArch.ingest(session, at: now) { dropped("too_many_sessions", count: 1, from: String(session.relayId.prefix(128)), at: now) }
        default:
            undecodableTotal?.increment()
        }
    }

    /// Every `reason` of `netplay_telemetry_dropped_total`.
    static let dropReasons = MetricStore.Drop.allCases.map(\.rawValue) + ["too_many_sessions", "too_many_peers", "too_many_peer_histories",
                                                                          "event_cut"]

    /// Counts dropped data; warns at most once a minute per reason (with what was suppressed).
    private func dropped(_ reason: String, count: Int, from source: String, at now: Double) {
        droppedTotals[reason]?.increment(by: Double(count))
        var state = dropWarnings[reason] ?? (at: -.infinity, suppressed: 0)
        guard now - state.at >= 60 else {
            state.suppressed += count
            dropWarnings[reason] = state
            return
        }
        runtime?.logger.warning("dropped pushed telemetry over a cap", metadata: [
            "reason": "\(reason)", "count": "\(count)", "from": "\(source)", "since_last_warning": "\(state.suppressed)",
            "instances": "\(store.instances.count)/\(store.limits.maxInstances)", "series": "\(store.seriesCount)/\(store.limits.maxSeries)",
        ])
        dropWarnings[reason] = (at: now, suppressed: 0)
    }

    private func housekeeping() {
        let now = self.now
        let gone = store.forgetSilent(at: now)
        if !gone.isEmpty {
            forgottenTotal?.increment(by: Double(gone.count))
            runtime?.logger.info("forgot instances that stopped reporting", metadata: ["instances": "\(gone.joined(separator: ","))"])
            for key in gone { warned.remove(key) }
        }
        board.forgetSilent(at: now)
        retroArch.forgetSilent(at: now)
        pollCluster()
        if Int(now) % 2 == 0 || roomsError == "not asked yet" { pollRooms() }
    }

    private func pollCluster() {
        poll(clusterClient, .clusterStatusRequest(ClusterStatusRequest()), timeout: 0.9,
             inFlight: \.clusterInFlight, error: \.clusterError) { service, reply in
            guard case .clusterStatusResponse(let status) = reply else { return false }
            service.cluster = status
            service.clusterUpdatedAt = service.now
            return true
        }
    }

    private func pollRooms() {
        let request = ListRoomsRequest(filter: RoomFilter(includeInProgress: true), pageSize: 100)
        poll(roomsClient, .listRoomsRequest(request), timeout: 1.5, inFlight: \.roomsInFlight, error: \.roomsError) { service, reply in
            guard case .listRoomsResponse(let page) = reply else { return false }
            service.rooms = page.rooms
            service.roomsTotal = page.totalMatching
            return true
        }
    }

    /// Asks `client` for what the dashboard shows, never twice at a time (`inFlight`). `accept`
    /// takes the reply it expects (and returns false for any other); `error` keeps why the last
    /// ask brought nothing, nil after a good reply.
    private func poll(_ client: ServiceClient?, _ request: Envelope.Body, timeout: Double,
                      inFlight: ReferenceWritableKeyPath<TelemetryService, Bool>,
                      error: ReferenceWritableKeyPath<TelemetryService, String?>,
                      accept: @escaping (TelemetryService, Envelope.Body) -> Bool) {
        guard let client, !self[keyPath: inFlight] else { return }
        self[keyPath: inFlight] = true
        client.request(request, timeout: timeout) { [weak self] result in
            guard let self else { return }
            self[keyPath: inFlight] = false
            switch result {
            case .success(let reply) where accept(self, reply): self[keyPath: error] = nil
            case .success(let other): self[keyPath: error] = "unexpected reply \(other.name)"
            case .failure(let failure): self[keyPath: error] = "\(failure)"
            }
        }
    }
}
