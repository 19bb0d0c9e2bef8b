import Foundation
import NetplayService
import NetplayTestSupport
import NetplayWire
import Testing

@Suite("netplay-telemetry as a real process", .serialized, .ownThread)
struct TelemetryProcessTests {
    static func sampleSession(_ id: String = "session-42", ping: UInt32 = 35, rollbacks: UInt64 = 12) -> SessionStats {
        SessionStats(sessionId: id, relayId: "sync-0", confirmedFrame: 1234, peers: [
            PeerStats(slot: 1, name: "ann", role: .player, pingMs: ping, jitterMs: 3, framesAhead: 1, frameDelay: 2,
                      rollbacks: rollbacks, rollbackFrames: rollbacks * 3, maxRollbackFrames: 6, connected: true, currentFrame: 1240),
            PeerStats(slot: 2, name: "bob", role: .player, pingMs: ping + 20, jitterMs: 8, framesAhead: -1, frameDelay: 2,
                      rollbacks: rollbacks / 2, rollbackFrames: rollbacks, maxRollbackFrames: 4, connected: true, currentFrame: 1238),
        ], timestampUnixMs: UInt64(Date().timeIntervalSince1970 * 1000), desyncs: 0, resyncs: 0)
    }

    /// Feeds a telemetry with a sample service's real pushes plus synthetic HUD stats and events.
    static func feed(_ telemetry: TelemetryProcess) throws -> ServiceProcess {
        let sample = try ServiceProcess("netplay-sample-service",
                                        ["--endpoint", TestPorts.endpoint(), "--events", "none", "--telemetry", telemetry.ingest,
                                         "--metrics-interval", "0.2", "--instance", "sample-7",
                                         "--data-dir", telemetry.data.appendingPathComponent("sample").path])
        let relay = try Pusher(telemetry, as: "sync-0")
        for round in 0..<5 {
            try relay.push(.sessionStats(sampleSession(ping: 30 + UInt32(round * 7), rollbacks: UInt64(round * 4))))
            usleep(50_000)
        }
        try Pusher(telemetry, as: "coordinator").push(.eventRecord(EventRecord(service: "coordinator", instance: "coordinator", topic: "sessions.started",
                                                 timestampUnixMs: UInt64(Date().timeIntervalSince1970 * 1000), severity: .info,
                                                 message: "session session-42 started with 2 players", sessionId: "session-42", sequence: 1)))
        try relay.push(.eventRecord(EventRecord(service: "sync", instance: "sync-0", topic: "sync.desync",
                                                 timestampUnixMs: UInt64(Date().timeIntervalSince1970 * 1000), severity: .warning,
                                                 message: "checksum mismatch at frame 1200", sessionId: "session-42", sequence: 1)))
        return sample
    }

    @Test func ingestsAndServesMetricsEventsAndSessions() throws {
        let telemetry = try TelemetryProcess()
        #expect(telemetry.waitUp(), "\(telemetry.process.log)")
        let sample = try Self.feed(telemetry)
        defer { sample.kill9() }
        #expect(eventually(within: 10) { httpGet(telemetry.http, "/metrics")?.body.contains("instance=\"sample-7\"") ?? false },
                "\(telemetry.process.log)")
        let metrics = try #require(httpGet(telemetry.http, "/metrics"))
        #expect(metrics.headers.contains("Content-Type: text/plain; version=0.0.4"))
        #expect(metrics.body.contains("netplay_uptime_seconds{instance=\"sample-7\",service=\"sample\"}"))
        #expect(metrics.body.contains("netplay_request_duration_seconds_bucket{instance=\"sample-7\",service=\"sample\",le=\"+Inf\"}"))
        #expect(metrics.body.contains("netplay_session_peer_ping_seconds_bucket{"))
        #expect(metrics.body.contains("netplay_session_rollback_length_frames_count{"))
        #expect(!metrics.body.contains("session-42"), "session ids must never be labels")

        let sessions = try #require(jsonObject(httpGet(telemetry.http, "/api/sessions")?.body ?? ""))
        let list = try #require(sessions["sessions"] as? [[String: Any]])
        #expect(list.count == 1)
        let peers = try #require(list.first?["peers"] as? [[String: Any]])
        #expect(peers.map { $0["name"] as? String } == ["ann", "bob"])
        #expect(peers.first?["ping_ms"] as? Int == 58 && peers.first?["frame_delay"] as? Int == 2 && peers.first?["frames_ahead"] as? Int == 1)
        let history = try #require(list.first?["history"] as? [String: [String: [Double]]])
        #expect(history["P1 ann"]?["ping_ms"] == [30, 37, 44, 51, 58])
        #expect(history["P1 ann"]?["rollbacks"] == [0, 4, 4, 4, 4])
        #expect(httpGet(telemetry.http, "/api/sessions/session-42")?.status == 200)
        #expect(httpGet(telemetry.http, "/api/sessions/nope")?.status == 404)

        let events = try #require(jsonObject(httpGet(telemetry.http, "/api/events?severity=warning")?.body ?? ""))
        let warnings = try #require(events["events"] as? [[String: Any]])
        #expect(warnings.map { $0["topic"] as? String } == ["sync.desync"])
        #expect(httpGet(telemetry.http, "/api/events?severity=loud")?.status == 400)

        // The same over ZeroMQ: RecentEventsRequest on the ROUTER, and netplayctl events.
        #expect(throws: ClientError.self, "recent events are for operators") {
            try BlockingClient(endpoint: telemetry.endpoint).request(.recentEventsRequest(RecentEventsRequest()))
        }
        let client = try telemetry.keys.operatorClient(endpoint: telemetry.endpoint)
        guard case .recentEventsResponse(let recent) = try client.request(.recentEventsRequest(RecentEventsRequest(topicPrefix: "sessions."))) else {
            Issue.record("no RecentEventsResponse"); return
        }
        #expect(recent.events.map(\.message) == ["session session-42 started with 2 players"])
        let ctl = try ServiceProcess("netplayctl", ["events", telemetry.endpoint, "--severity", "warning"],
                                     environment: ["NETPLAY_KEYS_DIR": telemetry.keys.store.directory.path])
        #expect(ctl.waitForExit(seconds: 10) == 0, "\(ctl.log)")
        #expect(ctl.log.contains("warning sync.desync sync/sync-0: checksum mismatch at frame 1200"), "\(ctl.log)")

        let services = try #require(jsonObject(httpGet(telemetry.http, "/api/services")?.body ?? ""))
        let instances = (services["instances"] as? [[String: Any]])?.compactMap { $0["instance"] as? String } ?? []
        #expect(instances.contains("sample-7") && instances.contains("telemetry-test"), "\(instances)")
        #expect(httpGet(telemetry.http, "/healthz")?.status == 200)
        #expect(httpGet(telemetry.http, "/nope")?.status == 404)
        #expect(httpGet(telemetry.http, "/")?.body.contains("<title>Netplay cluster</title>") == true)
    }

    @Test func slowAndBrokenHTTPClientsDoNotBlockOthers() throws {
        let telemetry = try TelemetryProcess()
        #expect(telemetry.waitUp())
        // A client that connects and says nothing, one that sends garbage, one that POSTs.
        let port = UInt16(telemetry.http.split(separator: ":").last!)!
        func connectRaw() -> Int32 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_port = port.bigEndian
            addr.sin_addr.s_addr = inet_addr("127.0.0.1")
            _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            return fd
        }
        let silent = connectRaw()
        defer { close(silent) }
        let garbage = connectRaw()
        defer { close(garbage) }
        _ = "NOT HTTP\r\n\r\n".withCString { send(garbage, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        let started = Date()
        #expect(httpGet(telemetry.http, "/healthz")?.status == 200)
        #expect(Date().timeIntervalSince(started) < 1, "a silent client must not block the server")
        var buffer = [UInt8](repeating: 0, count: 512)
        let count = recv(garbage, &buffer, buffer.count, 0)
        #expect(count > 0 && String(decoding: buffer[0..<max(0, count)], as: UTF8.self).hasPrefix("HTTP/1.1 400"))
        let post = connectRaw()
        defer { close(post) }
        _ = "POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n".withCString { send(post, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        let posted = recv(post, &buffer, buffer.count, 0)
        #expect(posted > 0 && String(decoding: buffer[0..<max(0, posted)], as: UTF8.self).hasPrefix("HTTP/1.1 405"))
        #expect(httpGet(telemetry.http, "/metrics")?.status == 200)
    }

    @Test func ingestedEventsAreRepublishedOnThePubSocket() throws {
        let telemetry = try TelemetryProcess()
        #expect(telemetry.waitUp())
        let member = try telemetry.keys.member("telemetry-test")
        let subscriber = try EventSubscriber(endpoint: telemetry.events, prefixes: ["sync."], serverKey: member.publicKey,
                                             keys: try telemetry.keys.operatorKeys())
        let pusher = try Pusher(telemetry, as: "sync-0")
        var received: ReceivedEvent?
        let got = eventually(within: 5) {
            try? pusher.push(.eventRecord(EventRecord(service: "sync", instance: "sync-0", topic: "sync.peer_joined", message: "ann joined")))
            received = try? subscriber.next(timeout: 100)
            return received != nil
        }
        #expect(got)
        #expect(received?.topic == "sync.peer_joined")
    }

    @Test func instancesThatStopReportingAreForgotten() throws {
        let telemetry = try TelemetryProcess(["--forget-after", "1"])
        #expect(telemetry.waitUp())
        let sample = try ServiceProcess("netplay-sample-service",
                                        ["--endpoint", TestPorts.endpoint(), "--events", "none", "--telemetry", telemetry.ingest,
                                         "--metrics-interval", "0.2", "--instance", "short-lived",
                                         "--data-dir", telemetry.data.appendingPathComponent("s").path])
        #expect(eventually(within: 10) { httpGet(telemetry.http, "/metrics")?.body.contains("instance=\"short-lived\"") ?? false })
        sample.kill9()
        #expect(eventually(within: 5) { !(httpGet(telemetry.http, "/metrics")?.body.contains("instance=\"short-lived\"") ?? true) })
        #expect(httpGet(telemetry.http, "/metrics")?.body.contains("netplay_telemetry_forgotten_instances_total{instance=\"telemetry-test\",service=\"telemetry\"} 1") == true)
    }

    @Test func promtoolAcceptsTheMetricsPage() throws {
        guard let promtool = DebianTools.require("promtool", package: "prometheus") else {
            Issue.record("promtool is not installed: apt-get install prometheus (make deps installs it)")
            return
        }
        let telemetry = try TelemetryProcess()
        #expect(telemetry.waitUp())
        let sample = try Self.feed(telemetry)
        defer { sample.kill9() }
        #expect(eventually(within: 10) { httpGet(telemetry.http, "/metrics")?.body.contains("instance=\"sample-7\"") ?? false })
        let page = try #require(httpGet(telemetry.http, "/metrics")).body
        let file = telemetry.data.appendingPathComponent("metrics.txt")
        try FileManager.default.createDirectory(at: telemetry.data, withIntermediateDirectories: true)
        try page.write(to: file, atomically: true, encoding: .utf8)
        let result = try run("/bin/sh", ["-c", "\(promtool) check metrics < '\(file.path)'"])
        #expect(result.status == 0, "promtool check metrics:\n\(result.output)")
    }

    @Test func aRealPrometheusScrapesTelemetry() throws {
        guard let prometheus = DebianTools.require("prometheus", package: "prometheus") else {
            Issue.record("prometheus is not installed: apt-get install prometheus (make deps installs it)")
            return
        }
        let telemetry = try TelemetryProcess()
        #expect(telemetry.waitUp())
        // compose/prometheus.yml, pointed at this test's telemetry and scraping every second.
        let shipped = try String(contentsOf: repositoryRoot.appendingPathComponent("compose/prometheus.yml"), encoding: .utf8)
        #expect(shipped.contains("telemetry:9400"))
        let config = shipped.replacingOccurrences(of: "telemetry:9400", with: telemetry.http)
            .replacingOccurrences(of: "scrape_interval: 5s", with: "scrape_interval: 1s")
        let directory = telemetry.data.appendingPathComponent("prometheus")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try config.write(to: directory.appendingPathComponent("prometheus.yml"), atomically: true, encoding: .utf8)
        let check = try run("/bin/sh", ["-c", "command -v promtool >/dev/null && promtool check config '\(directory.path)/prometheus.yml' || true"])
        #expect(!check.output.contains("FAILED"), "\(check.output)")
        let web = "127.0.0.1:\(TestPorts.free())"
        let server = Process()
        server.executableURL = URL(fileURLWithPath: prometheus)
        server.arguments = ["--config.file=\(directory.path)/prometheus.yml", "--storage.tsdb.path=\(directory.path)/data",
                            "--web.listen-address=\(web)", "--log.level=warn"]
        let output = OutputCollector()
        let pipe = Pipe()
        server.standardOutput = pipe
        server.standardError = pipe
        let drain = PipeDrain(pipe, deliver: { output.append($0) })
        try server.run()
        defer { server.terminate(); server.waitUntilExit(); drain.waitForEnd(seconds: 2) }
        var targets = ""
        let up = eventually(within: 30) {
            targets = httpGet(web, "/api/v1/targets")?.body ?? ""
            return targets.contains("\"health\":\"up\"")
        }
        #expect(up, "Prometheus never saw the target up: \(targets)\n\(output.text)")
        #expect(targets.contains(telemetry.http))
        let query = eventually(within: 10) {
            httpGet(web, "/api/v1/query?query=netplay_telemetry_instances")?.body.contains("\"instance\":\"telemetry-test\"") ?? false
        }
        #expect(query, "the scraped series keeps telemetry's own instance label (honor_labels)")
    }

    @Test func badFlagsExitWithOneLine() throws {
        for (arguments, expected) in [(["--http", "nowhere"], "--http must look like HOST:PORT"),
                                      (["--ingest", "bogus"], "--ingest must look like"),
                                      (["--forget-after", "0"], "--forget-after must be"),
                                      (["--http-max-per-address", "0"], "--http-max-per-address must be a whole number from 1 to 10000"),
                                      (["--http-head-timeout", "0"], "--http-head-timeout must be"),
                                      (["--max-series", "0"], "--max-series must be")] {
            let process = try ServiceProcess("netplay-telemetry", arguments + ["--endpoint", TestPorts.endpoint(), "--events", "none"])
            #expect(process.waitForExit(seconds: 10) == 2, "\(process.log)")
            _ = eventually(within: 2) { process.log.hasSuffix("\n") }
            let lines = process.log.split(separator: "\n")
            #expect(lines.count == 1 && lines.first?.hasPrefix("netplay-telemetry: ") == true, "\(process.log)")
            #expect(process.log.contains(expected), "\(process.log)")
        }
        let help = try ServiceProcess("netplay-telemetry", ["--help"])
        #expect(help.waitForExit(seconds: 10) == 0)
        #expect(help.log.contains("NETPLAY_HTTP") && help.log.contains("NETPLAY_INGEST"))
        for variable in ["NETPLAY_HTTP_MAX_PER_ADDRESS", "NETPLAY_HTTP_MAX_CONNECTIONS", "NETPLAY_HTTP_HEAD_TIMEOUT", "NETPLAY_MAX_INSTANCES",
                         "NETPLAY_MAX_SERIES", "NETPLAY_MAX_SERIES_PER_INSTANCE"] {
            #expect(help.log.contains(variable), "--help does not mention \(variable)")
        }
    }
}
