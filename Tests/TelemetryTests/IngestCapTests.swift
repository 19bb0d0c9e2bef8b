import Foundation
import NetplayService
import NetplayWire
import Testing
@testable import Telemetry
import NetplayTestSupport

/// Whatever is pushed, the store, the session board and the event log stay bounded.
@Suite("Ingest caps", .ownThread)
struct IngestCapTests {
    func snapshot(_ instance: String, _ metrics: [Metric], service: String = "sync") -> MetricsSnapshot {
        MetricsSnapshot(service: service, instance: instance, timestampUnixMs: 1, metrics: metrics, sequence: 1)
    }

    func gauges(_ count: Int, prefix: String = "netplay_g") -> [Metric] {
        (0..<count).map { Metric(name: "\(prefix)\($0)", kind: .gauge, value: 1) }
    }

    @Test func instancesBeyondTheCapAreDroppedUntilOneIsForgotten() {
        var store = MetricStore(forgetAfter: 10, limits: .init(maxInstances: 3))
        for n in 0..<3 { #expect(store.ingest(snapshot("i\(n)", gauges(1)), at: Double(n)).drops.isEmpty) }
        let outcome = store.ingest(snapshot("i3", gauges(1)), at: 3)
        #expect(outcome.drops == [.tooManyInstances: 1])
        #expect(store.instances.count == 3 && store.instances["sync/i3"] == nil)
        #expect(store.ingest(snapshot("i1", gauges(2)), at: 4).drops.isEmpty, "a known instance still reports")
        #expect(store.forgetSilent(at: 10.5) == ["sync/i0"])
        #expect(store.ingest(snapshot("i3", gauges(1)), at: 11).drops.isEmpty)
        #expect(store.dropped[.tooManyInstances] == 1)
    }

    @Test func seriesPerInstanceAndInTotalAreCapped() {
        var store = MetricStore(limits: .init(maxSeriesPerInstance: 10, maxSeries: 25))
        let histogram = Metric(name: "netplay_h_seconds", kind: .histogram, bucketBounds: [0.1, 0.2], bucketCounts: [1, 2], sum: 1, count: 2)
        // 8 gauges + a histogram of 2 buckets (5 series) + 2 gauges: the histogram does not fit, the next 2 gauges do.
        let first = store.ingest(snapshot("a", gauges(8) + [histogram] + gauges(2, prefix: "netplay_x")), at: 0)
        #expect(first.drops == [.tooManySeriesPerInstance: 1])
        #expect(store.instances["sync/a"]?.metrics.count == 10 && store.seriesCount == 10)
        #expect(store.ingest(snapshot("b", gauges(30)), at: 0).drops == [.tooManySeriesPerInstance: 20])
        let third = store.ingest(snapshot("c", gauges(10)), at: 0)
        #expect(third.drops == [.tooManySeries: 5])
        #expect(store.seriesCount == 25)
        // A new snapshot replaces the instance's series instead of adding to them.
        #expect(store.ingest(snapshot("a", gauges(3)), at: 1).drops.isEmpty)
        #expect(store.seriesCount == 18)
        #expect(store.ingest(snapshot("c", gauges(10)), at: 1).drops.isEmpty)  // 3 + 10 + 10
        #expect(store.ingest(snapshot("a", gauges(8)), at: 1).drops == [.tooManySeries: 3])
        #expect(store.seriesCount == 25 && store.instances["sync/a"]?.series == 5)
        store.forgetAfter = 0.5
        store.forgetSilent(at: 2)
        #expect(store.seriesCount == 0 && store.instances.isEmpty)
    }

    /// Within every other cap, a histogram of 64 buckets and 16 labels of 256 quotes each made
    /// 67 lines of 10 KB on the page: 20 MB for one instance, half a gigabyte for all.
    @Test func thePageBytesSeriesTakePerInstanceAndInTotalAreCapped() {
        let labels = (0 ..< 16).map { KeyValue(key: "label_\($0)", value: String(repeating: "\"", count: 256)) }
        let bounds = (1 ... 64).map(Double.init)
        func wide(_ index: Int) -> Metric {  // names of one length: one cost
            Metric(name: "netplay_wide\(index)_seconds", kind: .histogram, labels: labels, bucketBounds: bounds,
                   bucketCounts: bounds.map { UInt64($0) }, sum: 1, count: 64)
        }
        let cost = MetricStore.pageBytes(wide(0), identityBytes: "sync".utf8.count + "a".utf8.count) + MetricStore.familyBytes(wide(0))
        var store = MetricStore(limits: .init(maxPageBytesPerInstance: 3 * cost, maxPageBytes: 5 * cost))
        // Four such histograms (268 series, within the series caps): three fit the instance.
        let first = store.ingest(snapshot("a", (0 ..< 4).map(wide)), at: 0)
        #expect(first.drops == [.tooManyBytes: 1] && store.instances["sync/a"]?.metrics.count == 3)
        let second = store.ingest(snapshot("b", (0 ..< 4).map(wide)), at: 0)
        #expect(second.drops == [.tooManyBytes: 2] && store.pageBytes == 5 * cost)
        // The estimate is no less than what the page shows.
        var conflicts = 0
        let page = PrometheusRenderer.render(store.sortedInstances.flatMap { instance in
            instance.metrics.map { PrometheusRenderer.Entry(metric: $0, extraLabels: [("service", instance.service), ("instance", instance.instance)]) }
        }, conflicts: &conflicts)
        #expect(page.utf8.count <= store.pageBytes && page.utf8.count > store.pageBytes / 2, "\(page.utf8.count) of \(store.pageBytes)")
        // The HELP and TYPE lines count too, once per name: 512-byte helps of backslashes were
        // not counted, and an instance's page ran half again past its cap.
        let helped = (0 ..< 20).map { Metric(name: "netplay_helped_\($0)", help: String(repeating: "\\", count: 512), kind: .gauge, value: 1) }
        var helpStore = MetricStore()
        helpStore.ingest(snapshot("h", helped), at: 0)
        var helpConflicts = 0
        let helpPage = PrometheusRenderer.render(helpStore.sortedInstances.flatMap { instance in
            instance.metrics.map { PrometheusRenderer.Entry(metric: $0, extraLabels: [("service", instance.service), ("instance", instance.instance)]) }
        }, conflicts: &helpConflicts)
        #expect(helpPage.utf8.count <= helpStore.pageBytes, "\(helpPage.utf8.count) of \(helpStore.pageBytes)")
        // A new snapshot replaces the instance's bytes; a forgotten instance frees them.
        #expect(store.ingest(snapshot("a", [wide(0)]), at: 1).drops.isEmpty && store.pageBytes == 3 * cost)
        store.forgetAfter = 0.5
        store.forgetSilent(at: 2)
        #expect(store.pageBytes == 0)
    }

    @Test func labelsNamesAndIdentitiesAreCapped() {
        var store = MetricStore(limits: .init(maxLabels: 2, maxLabelValueBytes: 8, maxNameBytes: 32, maxHelpBytes: 16))
        let labels = (0..<3).map { KeyValue(key: "l\($0)", value: "v") }
        let metrics = [
            Metric(name: "netplay_ok", kind: .gauge, labels: Array(labels.prefix(2)), value: 1),
            Metric(name: "netplay_many", kind: .gauge, labels: labels, value: 1),
            Metric(name: "netplay_long_value", kind: .gauge, labels: [KeyValue(key: "k", value: "123456789")], value: 1),
            Metric(name: "netplay_" + String(repeating: "n", count: 30), kind: .gauge, value: 1),
            Metric(name: "netplay_help", help: String(repeating: "h", count: 17), kind: .gauge, value: 1),
            Metric(name: "netplay_buckets_seconds", kind: .histogram, bucketBounds: (0..<3000).map(Double.init), bucketCounts: Array(repeating: 0, count: 3000)),
        ]
        let outcome = store.ingest(snapshot("a", metrics), at: 0)
        #expect(outcome.drops == [.tooManyLabels: 1, .tooLong: 3, .tooManySeriesPerInstance: 1])
        #expect(store.instances["sync/a"]?.metrics.map(\.name) == ["netplay_ok"])
        for (service, instance) in [("", "a"), ("sync", ""), ("sync", String(repeating: "i", count: 33)), ("sync", "a\nforged log line"),
                                    ("sync/a", "x")] {
            #expect(store.ingest(snapshot(instance, gauges(1), service: service), at: 0).drops == [.badIdentity: 1])
        }
        #expect(store.instances.count == 1)
    }

    @Test func fiftyFakeInstancesStayWithinTheDefaultCaps() {
        // Short labels: the series caps bind.
        var store = MetricStore()
        let short = [KeyValue(key: "a", value: "value"), KeyValue(key: "b", value: "other-value")]
        for n in 0..<50 {
            store.ingest(snapshot("fake-\(n)", (0..<3_000).map { Metric(name: "netplay_fake_\($0)", kind: .gauge, labels: short, value: 1) }),
                         at: 0)
        }
        #expect(store.seriesCount == 50_000 && store.dropped[.tooManyBytes] == nil)
        #expect(store.instances.values.allSatisfy { $0.series <= 2_000 })
        // Sixteen labels of 256 bytes: the page bytes bind first.
        var wide = MetricStore()
        let labels = (0..<16).map { KeyValue(key: "l\($0)", value: String(repeating: "x", count: 256)) }
        for n in 0..<50 {
            wide.ingest(snapshot("fake-\(n)", (0..<3_000).map { Metric(name: "netplay_fake_\($0)", kind: .gauge, labels: labels, value: 1) }),
                        at: 0)
        }
        #expect(wide.pageBytes <= wide.limits.maxPageBytes && wide.seriesCount < 50_000 && (wide.dropped[.tooManyBytes] ?? 0) > 0)
        #expect(wide.instances.values.allSatisfy { $0.series <= 2_000 && $0.pageBytes <= wide.limits.maxPageBytesPerInstance })
    }

    /// Only the coordinator's `sessions.ended` ends a session's HUD stats: any member's record
    /// (its service checked against its key) ended any session's.
    @Test func onlyTheCoordinatorEndsASessionsHudStats() {
        let telemetry = TelemetryService(settings: TelemetrySettings())
        telemetry.ingest(Envelope(body: .sessionStats(SessionStats(sessionId: "s1", relayId: "sync-0", peers: [PeerStats(slot: 1, name: "ann")]))),
                         from: .cluster(kind: "sync", instance: "sync-0"))
        #expect(telemetry.board.sessions["s1"] != nil)
        let ended = { (service: String, instance: String) in
            Envelope(body: .eventRecord(EventRecord(service: service, instance: instance, topic: "sessions.ended", sessionId: "s1")))
        }
        telemetry.ingest(ended("discovery", "discovery-0"), from: .cluster(kind: "discovery", instance: "discovery-0"))
        telemetry.ingest(ended("sync", "sync-0"), from: .cluster(kind: "sync", instance: "sync-0"))
        #expect(telemetry.board.sessions["s1"] != nil, "another member ended the session's HUD stats")
        telemetry.ingest(ended("coordinator", "coordinator-0"), from: .cluster(kind: "coordinator", instance: "coordinator-0"))
        #expect(telemetry.board.sessions["s1"] == nil)
    }

    /// Peer histories are bounded over all sessions, not only per session: 1,024 sessions of 64
    /// made-up peers were 23 million samples, all turned into JSON on every dashboard refresh.
    /// The overview shows the first sessions and says how many there are.
    @Test func peerHistoriesAreBoundedAcrossSessionsAndTheOverviewIsShort() throws {
        var board = SessionBoard()
        board.maxPeerHistories = 100
        func stats(_ id: String, peers: Int) -> SessionStats {
            SessionStats(sessionId: id, relayId: "r", peers: (0 ..< peers).map { PeerStats(slot: UInt32($0 + 1), name: "p\($0)") })
        }
        board.ingest(stats("s1", peers: 64), reporter: "r", at: 0)
        #expect(board.refusal(stats("s2", peers: 64)) == "too_many_peer_histories")
        #expect(board.refusal(stats("s1", peers: 64)) == nil, "a session reporting again keeps its place")
        #expect(board.refusal(stats("s2", peers: 36)) == nil)
        board.ingest(stats("s2", peers: 36), reporter: "r", at: 0)
        #expect(board.peerHistoryCount == 100)
        board.end("s1")
        #expect(board.peerHistoryCount == 36 && board.refusal(stats("s3", peers: 64)) == nil)
        _ = board.forgetSilent(at: 1_000)
        #expect(board.peerHistoryCount == 0 && board.sessions.isEmpty)

        let telemetry = TelemetryService(settings: TelemetrySettings())
        for index in 0 ..< 40 {
            telemetry.ingest(Envelope(body: .sessionStats(stats(String(format: "s%02d", index), peers: 2).withRelay("sync-0"))),
                             from: .cluster(kind: "sync", instance: "sync-0"))
        }
        let overview = telemetry.sessionsJSON(history: true, limit: TelemetryService.overviewSessions).rendered()
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(overview.utf8)) as? [String: Any])
        #expect((parsed["sessions"] as? [Any])?.count == 32 && parsed["total"] as? Int == 40)
    }

    @Test func sessionBoardAndEventLogAreBounded() {
        var board = SessionBoard()
        board.maxSessions = 2
        func stats(_ id: String, peers: Int = 1, name: String = "ann") -> SessionStats {
            SessionStats(sessionId: id, relayId: "r", peers: (0..<peers).map { PeerStats(slot: UInt32($0 + 1), name: name) })
        }
        board.ingest(stats("s1"), reporter: "r", at: 0)
        board.ingest(stats("s2"), reporter: "r", at: 0)
        #expect(board.refusal(stats("s3")) == "too_many_sessions")
        board.ingest(stats("s3"), reporter: "r", at: 0)
        #expect(board.sessions.keys.sorted() == ["s1", "s2"])
        #expect(board.refusal(stats("s1", peers: 65)) == "too_many_peers")
        #expect(board.refusal(stats("s1", name: String(repeating: "n", count: 129))) == "too_long")
        #expect(board.refusal(stats("s1", peers: 64)) == nil)

        var log = EventLog(capacity: 3)
        let huge = EventRecord(service: "s", instance: "i", topic: "t", message: String(repeating: "é", count: 1_000_000),
                               attributes: (0..<100).map { KeyValue(key: "k\($0)", value: String(repeating: "v", count: 1000)) })
        let (bounded, cut) = EventLog.bounded(huge)
        #expect(cut && bounded.message.utf8.count <= EventLog.maxMessageBytes && bounded.message.allSatisfy { $0 == "é" })
        #expect(bounded.attributes.count == 32 && bounded.attributes.allSatisfy { $0.value.utf8.count == 256 })
        #expect(EventLog.bounded(EventRecord(topic: "t", message: "short")).cut == false)
        log.append(huge)
        #expect(log.recent().first?.message.utf8.count ?? .max <= EventLog.maxMessageBytes)
    }
}

/// The JSON embedded in the dashboard stays JSON and cannot leave its script element.
@Suite("Dashboard embedding", .ownThread)
struct DashboardEmbeddingTests {
    @Test func embeddedJSONParsesAndCannotBreakOut() throws {
        let hostile = "</script><script>alert(1)</script><!-- & > </SCRIPT"
        let json: JSONValue = ["events": .array([["message": .string(hostile)]]), "name": .string("a<b&c>d")]
        let page = Dashboard.page(initial: json.rendered())
        let start = try #require(page.range(of: "<script type=\"application/json\" id=\"initial\">"))
        let end = try #require(page.range(of: "</script>", range: start.upperBound..<page.endIndex))
        let embedded = String(page[start.upperBound..<end.lowerBound])
        #expect(!embedded.lowercased().contains("</script") && !embedded.contains("<!--") && !embedded.contains("<") && !embedded.contains(">"))
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(embedded.utf8)) as? [String: Any])
        #expect(parsed["name"] as? String == "a<b&c>d")
        #expect(((parsed["events"] as? [[String: Any]])?.first?["message"] as? String) == hostile)
    }
}

private extension SessionStats {
    /// The same stats from relay `id`.
    func withRelay(_ id: String) -> SessionStats {
        var copy = self
        copy.relayId = id
        return copy
    }
}
