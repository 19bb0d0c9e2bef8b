import Foundation
import NetplayWire
import Testing
@testable import Telemetry
import NetplayTestSupport

@Suite("Metric store and Prometheus rendering", .ownThread)
struct MetricStoreTests {
    func snapshot(_ instance: String, _ metrics: [Metric], sequence: UInt64 = 1) -> MetricsSnapshot {
        MetricsSnapshot(service: "sync", instance: instance, timestampUnixMs: 1, metrics: metrics, sequence: sequence)
    }

    @Test func rendersFamiliesOnceWithReporterLabelsAndHistograms() {
        var store = MetricStore()
        let counter = Metric(name: "netplay_sync_inputs_total", help: "Inputs.", kind: .counter, labels: [KeyValue(key: "role", value: "player")], value: 42)
        let histogram = Metric(name: "netplay_sync_rtt_seconds", help: "RTT.", kind: .histogram, bucketBounds: [0.01, 0.1],
                               bucketCounts: [3, 5], sum: 0.4, count: 6)
        store.ingest(snapshot("sync-0", [counter, histogram]), at: 0)
        store.ingest(snapshot("sync-1", [counter]), at: 0)
        var conflicts = 0
        let text = PrometheusRenderer.render(store.sortedInstances.flatMap { instance in
            instance.metrics.map { PrometheusRenderer.Entry(metric: $0, extraLabels: [("service", instance.service), ("instance", instance.instance)]) }
        }, conflicts: &conflicts)
        #expect(conflicts == 0)
        #expect(text.components(separatedBy: "# TYPE netplay_sync_inputs_total counter").count == 2)
        #expect(text.contains("netplay_sync_inputs_total{instance=\"sync-0\",role=\"player\",service=\"sync\"} 42\n"))
        #expect(text.contains("netplay_sync_inputs_total{instance=\"sync-1\",role=\"player\",service=\"sync\"} 42\n"))
        #expect(text.contains("netplay_sync_rtt_seconds_bucket{instance=\"sync-0\",service=\"sync\",le=\"0.01\"} 3\n"))
        #expect(text.contains("netplay_sync_rtt_seconds_bucket{instance=\"sync-0\",service=\"sync\",le=\"+Inf\"} 6\n"))
        #expect(text.contains("netplay_sync_rtt_seconds_sum{instance=\"sync-0\",service=\"sync\"} 0.4\n"))
        #expect(text.contains("netplay_sync_rtt_seconds_count{instance=\"sync-0\",service=\"sync\"} 6\n"))
    }

    @Test(arguments: [
        (Metric(name: "sync_inputs_total", kind: .counter), MetricStore.Rejection.badName),
        (Metric(name: "netplay_bad-name_total", kind: .counter), .badName),
        (Metric(name: "netplay_inputs", kind: .counter), .badSuffix),
        (Metric(name: "netplay_level_total", kind: .gauge), .badSuffix),
        (Metric(name: "netplay_level_count", kind: .gauge), .badSuffix),
        // A histogram named like another's sample (`H_count`): strict parsers rejected the page.
        (Metric(name: "netplay_session_peer_ping_seconds_count", kind: .histogram, bucketBounds: [], bucketCounts: [], count: 0), .badSuffix),
        (Metric(name: "netplay_level", kind: .unspecified), .noKind),
        (Metric(name: "netplay_level", kind: .gauge, labels: [KeyValue(key: "bad-label", value: "x")]), .badLabel),
        (Metric(name: "netplay_level", kind: .gauge, labels: [KeyValue(key: "__name__", value: "x")]), .badLabel),
        // A label name twice, given or made by the renaming of `service`/`instance`: invalid to
        // Prometheus, which then failed the whole scrape.
        (Metric(name: "netplay_level", kind: .gauge, labels: [KeyValue(key: "a", value: "x"), KeyValue(key: "a", value: "y")]), .badLabel),
        (Metric(name: "netplay_level", kind: .gauge, labels: [KeyValue(key: "service", value: "x"),
                                                              KeyValue(key: "exported_service", value: "y")]), .badLabel),
        (Metric(name: "netplay_h_seconds", kind: .histogram, bucketBounds: [0.2, 0.1], bucketCounts: [1, 2], count: 2), .badHistogram),
        (Metric(name: "netplay_h_seconds", kind: .histogram, bucketBounds: [0.1], bucketCounts: [1, 2], count: 2), .badHistogram),
        (Metric(name: "netplay_h_seconds", kind: .histogram, bucketBounds: [0.1, 0.2], bucketCounts: [3, 2], count: 3), .badHistogram),
    ])
    func metricsBreakingTheRulesAreDropped(metric: Metric, reason: MetricStore.Rejection) {
        var store = MetricStore()
        let problems = store.ingest(snapshot("sync-0", [metric, Metric(name: "netplay_ok", kind: .gauge, value: 1)]), at: 0).rejections
        #expect(problems == [reason])
        #expect(store.instances["sync/sync-0"]?.metrics.map(\.name) == ["netplay_ok"])
        #expect(store.rejected[reason] == 1)
    }

    @Test func escapesLabelValuesAndHelp() {
        let metric = Metric(name: "netplay_x", help: "line\nwith \\ slash", kind: .gauge,
                            labels: [KeyValue(key: "reason", value: "a \"quoted\"\\ value\n")], value: 1.5)
        var conflicts = 0
        let text = PrometheusRenderer.render([.init(metric: metric, extraLabels: [("service", "s"), ("instance", "i")])], conflicts: &conflicts)
        #expect(text.contains("# HELP netplay_x line\\nwith \\\\ slash\n"))
        #expect(text.contains("reason=\"a \\\"quoted\\\"\\\\ value\\n\""))
        #expect(text.contains("} 1.5\n"))
    }

    @Test func ownLabelsNamedLikeReporterLabelsAreRenamed() {
        let metric = Metric(name: "netplay_supervisor_restarts_total", kind: .counter, labels: [KeyValue(key: "instance", value: "sync-1")], value: 2)
        var conflicts = 0
        let text = PrometheusRenderer.render([.init(metric: metric, extraLabels: [("service", "supervisor"), ("instance", "supervisor")])], conflicts: &conflicts)
        #expect(text.contains("{exported_instance=\"sync-1\",instance=\"supervisor\",service=\"supervisor\"} 2"))
    }

    @Test func kindConflictsAndDuplicatesAreCountedNotRendered() {
        let a = Metric(name: "netplay_thing", kind: .gauge, value: 1)
        let b = Metric(name: "netplay_thing", kind: .histogram, bucketBounds: [], bucketCounts: [], count: 0)
        var conflicts = 0
        let text = PrometheusRenderer.render([.init(metric: a, extraLabels: [("instance", "x")]), .init(metric: b, extraLabels: [("instance", "y")]),
                                              .init(metric: a, extraLabels: [("instance", "x")])], conflicts: &conflicts)
        #expect(conflicts == 2)
        #expect(text.components(separatedBy: "\n").filter { $0.hasPrefix("netplay_thing") }.count == 1)
    }

    /// A family's kind is the one most of its samples have: with the first kind seen winning, a
    /// reporter whose name sorted first dropped every other instance's series of the family.
    @Test func theKindMostSamplesHaveWinsAConflict() {
        let lie = Metric(name: "netplay_uptime_seconds", kind: .histogram, bucketBounds: [], bucketCounts: [], count: 0)
        let honest = Metric(name: "netplay_uptime_seconds", kind: .gauge, value: 5)
        var conflicts = 0
        let text = PrometheusRenderer.render([.init(metric: lie, extraLabels: [("instance", "0-liar")]),
                                              .init(metric: honest, extraLabels: [("instance", "a")]),
                                              .init(metric: honest, extraLabels: [("instance", "b")])], conflicts: &conflicts)
        #expect(conflicts == 1)
        #expect(text.contains("# TYPE netplay_uptime_seconds gauge"))
        #expect(text.contains("netplay_uptime_seconds{instance=\"a\"} 5") && text.contains("netplay_uptime_seconds{instance=\"b\"} 5"))
    }

    /// Votes count reporters, not samples: one member pushing hundreds of histograms under a
    /// gauge's name dropped every instance's gauge. Telemetry's own kind wins outright: one
    /// member's gauge tied with telemetry's own histogram and took its place.
    @Test func oneReporterCannotOutvoteTheOthersOrTelemetryItself() {
        let lie = Metric(name: "netplay_uptime_seconds", kind: .histogram, bucketBounds: [], bucketCounts: [], count: 0)
        let honest = Metric(name: "netplay_uptime_seconds", kind: .gauge, value: 5)
        var entries = (0 ..< 300).map { index in
            PrometheusRenderer.Entry(metric: Metric(name: lie.name, kind: .histogram, labels: [KeyValue(key: "n", value: "\(index)")],
                                                    bucketBounds: [], bucketCounts: [], count: 0),
                                     extraLabels: [("service", "sync"), ("instance", "liar")])
        }
        entries += ["a", "b"].map { PrometheusRenderer.Entry(metric: honest, extraLabels: [("service", "sync"), ("instance", $0)]) }
        var conflicts = 0
        let text = PrometheusRenderer.render(entries, conflicts: &conflicts)
        #expect(text.contains("# TYPE netplay_uptime_seconds gauge") && conflicts == 300, "\(conflicts)")

        let own = Metric(name: "netplay_session_peer_ping_seconds", kind: .histogram, bucketBounds: [0.1], bucketCounts: [1], sum: 0.05, count: 1)
        let pushed = Metric(name: own.name, kind: .gauge, value: 1)
        conflicts = 0
        let board = PrometheusRenderer.render([.init(metric: pushed, extraLabels: [("instance", "member")]),
                                               .init(metric: own, extraLabels: [("instance", "telemetry")], authoritative: true)], conflicts: &conflicts)
        #expect(board.contains("# TYPE netplay_session_peer_ping_seconds histogram") && conflicts == 1)
    }

    @Test func silentInstancesAreForgottenAndRestartsNoticed() {
        var store = MetricStore(forgetAfter: 10)
        store.ingest(snapshot("sync-0", [], sequence: 5), at: 0)
        store.ingest(snapshot("sync-1", [], sequence: 1), at: 8)
        store.ingest(snapshot("sync-0", [], sequence: 1), at: 9)  // sequence went back: restarted
        #expect(store.instances["sync/sync-0"]?.restartsSeen == 1)
        #expect(store.forgetSilent(at: 15).isEmpty)
        #expect(store.forgetSilent(at: 18.5) == ["sync/sync-1"])
        #expect(store.forgetSilent(at: 19.5) == ["sync/sync-0"])
        #expect(store.instances.isEmpty && store.forgotten == 2)
    }

    @Test func numbersFollowPrometheusFormatting() {
        #expect(PrometheusRenderer.number(3) == "3")
        #expect(PrometheusRenderer.number(0.25) == "0.25")
        #expect(PrometheusRenderer.number(.infinity) == "+Inf")
        #expect(PrometheusRenderer.number(-.infinity) == "-Inf")
        #expect(PrometheusRenderer.number(.nan) == "NaN")
    }
}

@Suite("Events and session HUD board", .ownThread)
struct BoardTests {
    func event(_ topic: String, _ severity: Severity = .info, session: String = "", _ n: UInt64) -> EventRecord {
        EventRecord(service: "sync", instance: "sync-0", topic: topic, timestampUnixMs: n, severity: severity, message: "m\(n)",
                    sessionId: session, sequence: n)
    }

    @Test func recentEventsAreNewestFirstFilteredAndBounded() {
        var log = EventLog(capacity: 5)
        for n in 1...8 { log.append(event(n % 2 == 0 ? "sync.desync" : "rooms.added", n == 8 ? .error : .info, session: n == 6 ? "s1" : "", UInt64(n))) }
        #expect(log.received == 8)
        #expect(log.recent().map(\.sequence) == [8, 7, 6, 5, 4])
        #expect(log.recent(topicPrefix: "sync.").map(\.sequence) == [8, 6, 4])
        #expect(log.recent(sessionId: "s1").map(\.sequence) == [6])
        #expect(log.recent(minSeverity: .warning).map(\.sequence) == [8])
        #expect(log.recent(limit: 2).map(\.sequence) == [8, 7])
        #expect(EventLog.severity(named: "warning") == .warning && EventLog.severity(named: "bogus") == nil)
    }

    @Test func sessionHistoryTracksPingAndRollbacksBetweenReports() {
        var board = SessionBoard(historyLength: 3, forgetAfter: 10)
        func stats(_ ping: UInt32, _ rollbacks: UInt64, _ frames: UInt64) -> SessionStats {
            SessionStats(sessionId: "s1", relayId: "sync-0", confirmedFrame: 10,
                         peers: [PeerStats(slot: 1, name: "ann", role: .player, pingMs: ping, rollbacks: rollbacks, rollbackFrames: frames, connected: true)])
        }
        board.ingest(stats(20, 0, 0), reporter: "sync-0", at: 0)
        let deltas = board.ingest(stats(30, 4, 12), reporter: "sync-0", at: 1)
        #expect(deltas.first?.rollbacks == 4 && deltas.first?.frames == 12)
        board.ingest(stats(40, 5, 14), reporter: "sync-0", at: 2)
        board.ingest(stats(50, 5, 14), reporter: "sync-0", at: 3)
        let history = board.sessions["s1"]!.history["P1 ann"]!
        #expect(history.pingMs == [30, 40, 50])
        #expect(history.rollbacks == [4, 1, 0])
        #expect(board.forgetSilent(at: 12).isEmpty)
        #expect(board.forgetSilent(at: 14) == ["s1"])
    }

    /// Only the peers of a session's latest report keep a history: a reporter naming 64 new
    /// peers in every report grew one session's histories (and each dashboard refresh) without bound.
    @Test func aSessionKeepsHistoriesOfItsCurrentPeersOnly() {
        var board = SessionBoard()
        for report in 0 ..< 50 {
            let peers = (0 ..< 64).map { PeerStats(slot: UInt32($0 % 8 + 1), name: "x\(report)-\($0)", role: .player, connected: true) }
            board.ingest(SessionStats(sessionId: "s1", relayId: "sync-0", peers: peers), reporter: "sync-0", at: Double(report))
        }
        #expect(board.sessions["s1"]?.history.count == 64)
        #expect(board.sessions["s1"]?.history.keys.allSatisfy { $0.contains("x49-") } == true)
    }

    @Test func httpRequestHeadsParse() {
        let request = HTTPRequest.parse("GET /api/events?limit=5&topic=sync.&x=a%20b HTTP/1.1\r\nHost: h\r\nAccept: */*")
        #expect(request?.method == "GET" && request?.path == "/api/events")
        #expect(request?.query == ["limit": "5", "topic": "sync.", "x": "a b"])
        #expect(request?.headers["host"] == "h")
        #expect(HTTPRequest.parse("nonsense") == nil)
        #expect(HTTPRequest.parse("GET / SPDY/3") == nil)
    }
}

/// Relays' RetroArch session reports: shown while reported, gone when ended or silent.
@Suite("Telemetry: RetroArch sessions", .ownThread)
struct RetroArchBoardTests {
    @Test func reportsBecomeSeriesAndAPIRowsThatLeaveWithTheSession() {
        var board = RetroArchBoard()
        var session = RetroArchSession(sessionId: "AAAAAAAAAAAAAAAB", relayId: "sync-0", join: "h|1|AAAAAAAAAAAAAAAB", clients: 1,
                                       inputs: 900, crcChecks: 12, resyncRequests: 1, lastFrame: 640, hostRttMs: 12, linkRttMs: 30)
        let taken = board.ingest(session, at: 10)
        #expect(taken)
        let series = Dictionary(uniqueKeysWithValues: board.metrics().map { ($0.name, $0) })
        #expect(series["netplay_retroarch_session_crc_checks_total"]?.value == 12)
        #expect(series["netplay_retroarch_session_resync_requests_total"]?.kind == .counter)
        #expect(series["netplay_retroarch_session_link_rtt_seconds"]?.value == 0.03)
        #expect(series["netplay_retroarch_session_clients"]?.labels == [KeyValue(key: "relay", value: "sync-0"),
                                                                          KeyValue(key: "session", value: "AAAAAAAAAAAAAAAB")])
        guard case .object(let api) = board.json(now: 11), case .array(let rows)? = api["sessions"], rows.count == 1 else {
            Issue.record("no API row")
            return
        }
        // A silent relay's sessions are forgotten; an ended one leaves at once.
        board.forgetSilent(at: 15)
        #expect(board.sessions.count == 1)
        board.forgetSilent(at: 21)
        #expect(board.sessions.isEmpty)
        board.ingest(session, at: 30)
        #expect(board.sessions.count == 1)
        session.ended = true
        board.ingest(session, at: 31)
        #expect(board.metrics().isEmpty)
    }

    /// A cluster member's report is its word: counters past Int64 (a liar's, or a wrapped one)
    /// are shown clamped, and `/api/retroarch` does not trap on them (it did: `Int(UInt64.max)`).
    @Test func countersPastInt64AreClampedNotATrap() {
        var board = RetroArchBoard()
        let huge = RetroArchSession(sessionId: "AAAAAAAAAAAAAAAC", relayId: "sync-0", join: "h|1|AAAAAAAAAAAAAAAC",
                                    bytesFromHost: .max, bytesToHost: .max, inputs: .max, crcChecks: .max,
                                    openedAtUnixMs: .max, lastResyncAtUnixMs: .max)
        let taken = board.ingest(huge, at: 10)
        #expect(taken)
        guard case .object(let api) = board.json(now: 11), case .array(let rows)? = api["sessions"],
              case .object(let row)? = rows.first else {
            Issue.record("no API row")
            return
        }
        #expect(row["bytes_from_host"] == .number(Int64.max) && row["opened_at_unix_ms"] == .number(Int64.max))
        #expect(board.json(now: 11).rendered().contains("9223372036854775807"))
    }

    /// One relay reporting made-up sessions took every place on the board (10,000, 90,000
    /// series), and every other relay's sessions were dropped.
    @Test func oneRelayTakesNoMoreThanItsShareOfTheBoard() {
        var board = RetroArchBoard()
        func report(_ relay: String, _ index: Int, ended: Bool = false) -> Bool {
            board.ingest(RetroArchSession(sessionId: String(format: "S%015d", index), relayId: relay, ended: ended), at: 10)
        }
        let taken = (0 ..< 2_500).filter { report("liar", $0) }.count
        #expect(taken == RetroArchBoard.maxSessionsPerRelay)
        #expect(report("honest", 1), "another relay's session still gets a place")
        #expect(report("liar", 0), "a session held is still reported")
        #expect(report("liar", 0, ended: true) && report("liar", 9_999), "an ended session frees its relay's place")
        #expect(!report("liar", 10_000))
        board.forgetSilent(at: 30)
        #expect(board.sessions.isEmpty && report("liar", 20_000), "forgotten sessions free their places")
    }
}
