import Foundation
import NetplayService
import NetplayTestSupport
import NetplayWire
import Synchronization
import Testing

/// Attacks on a real netplay-telemetry process: hostile HTTP requests, a slowloris,
/// and an ingest flood. Each must be refused or absorbed while the process stays up and keeps
/// serving /metrics.
@Suite("netplay-telemetry under attack", .serialized, .ownThread)
struct TelemetryHardeningTests {
    static func connectRaw(_ address: String, timeout: Int = 3) -> Int32 { tcpConnect(address, timeout: timeout) }

    /// Sends `bytes` on a fresh connection and returns everything answered until the server closes.
    static func exchange(_ address: String, _ bytes: [UInt8]) -> String {
        String(decoding: tcpExchange(address, bytes) ?? [], as: UTF8.self)
    }

    static func alive(_ process: ServiceProcess) -> Bool { process.process.isRunning }

    @Test func hostileRequestsGetAnErrorAndTheProcessKeepsServing() throws {
        let telemetry = try TelemetryProcess()
        #expect(telemetry.waitUp(), "\(telemetry.process.log)")
        let cases: [(String, String)] = [
            ("GET /metrics?= HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 200"),
            ("GET /metrics?&&= HTTP/1.1\r\n\r\n", "HTTP/1.1 200"),
            ("GET /api/events?=&limit=1 HTTP/1.1\r\n\r\n", "HTTP/1.1 200"),
            ("GET /metrics?% HTTP/1.1\r\n\r\n", "HTTP/1.1 400"),
            ("GET /metrics?%zz HTTP/1.1\r\n\r\n", "HTTP/1.1 400"),
            ("GET /%ff%fe HTTP/1.1\r\n\r\n", "HTTP/1.1 400"),
            ("GET / HTTP/1.1\r\nNo colon here\r\n\r\n", "HTTP/1.1 400"),
            ("GET / HTTP/1.1\nHost: x\r\n\r\n", "HTTP/1.1 400"),
            ("\r\n\r\n", "HTTP/1.1 400"),
            ("GET  HTTP/1.1\r\n\r\n", "HTTP/1.1 400"),
            ("GET / HTTP/1.1\r\nX: " + String(repeating: "a", count: 20_000) + "\r\n\r\n", "HTTP/1.1 431"),
            ("GET / HTTP/1.1\r\n" + String(repeating: "X: y\r\n", count: 150) + "\r\n", "HTTP/1.1 431"),
        ]
        for (request, expected) in cases {
            let answer = Self.exchange(telemetry.http, Array(request.utf8))
            #expect(answer.hasPrefix(expected), "\(request.prefix(60).debugDescription) got \(answer.prefix(120).debugDescription)")
            #expect(Self.alive(telemetry.process), "netplay-telemetry died on \(request.prefix(60).debugDescription):\n\(telemetry.process.log)")
        }
        // Random bytes too, then the process still serves.
        var rng = FuzzRandom(seed: 7)
        for _ in 0..<20 {
            _ = Self.exchange(telemetry.http, (0..<Int.random(in: 1...400, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) } + [13, 10, 13, 10])
        }
        #expect(Self.alive(telemetry.process), "\(telemetry.process.log)")
        let metrics = try #require(httpGet(telemetry.http, "/metrics"))
        #expect(metrics.status == 200)
        #expect(metrics.body.contains("netplay_http_connections_dropped_total{instance=\"telemetry-test\",reason=\"malformed\",service=\"telemetry\"}"))
    }

    @Test func aSlowlorisCannotStarveMetrics() throws {
        let telemetry = try TelemetryProcess(["--http-head-timeout", "2"])
        #expect(telemetry.waitUp(), "\(telemetry.process.log)")
        // 300 connections from this client that never send a byte.
        var idle: [Int32] = []
        defer { for fd in idle { close(fd) } }
        for _ in 0..<300 {
            let fd = Self.connectRaw(telemetry.http)
            if fd >= 0 { idle.append(fd) }
        }
        #expect(idle.count == 300)
        var served = 0
        for _ in 0..<30 where httpGet(telemetry.http, "/metrics")?.status == 200 { served += 1 }
        #expect(served == 30, "only \(served) of 30 /metrics requests succeeded beside 300 idle connections")
        // Every idle connection is closed by the server: evicted by the per-address cap or at the head timeout.
        let closed = eventually(within: 6) {
            idle.allSatisfy { fd in
                var probe = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&probe, 1, 0) == 1 else { return false }
                var byte: UInt8 = 0
                return recv(fd, &byte, 1, Int32(MSG_DONTWAIT)) <= 0
            }
        }
        #expect(closed, "idle connections were left open past the head timeout")
        let page = httpGet(telemetry.http, "/metrics")?.body ?? ""
        for reason in ["per_address_cap", "head_timeout"] {
            let line = page.split(separator: "\n").first { $0.hasPrefix("netplay_http_connections_dropped_total{") && $0.contains("reason=\"\(reason)\"") }
            #expect((line.flatMap { Double($0.split(separator: " ").last ?? "") } ?? 0) > 0, "no \(reason) drops counted: \(line ?? "none")")
        }
        #expect(Self.alive(telemetry.process))
    }

    @Test func thePerAddressCapComesFromTheEnvironmentAndEvictsTheOldestIdleConnection() throws {
        let telemetry = try TelemetryProcess(environment: ["NETPLAY_HTTP_MAX_PER_ADDRESS": "2"])
        #expect(telemetry.waitUp(), "\(telemetry.process.log)")
        let fds = (0..<3).map { _ in Self.connectRaw(telemetry.http) }
        defer { for fd in fds where fd >= 0 { close(fd) } }
        func closedByServer(_ fd: Int32) -> Bool {
            var probe = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&probe, 1, 0) == 1 else { return false }
            var byte: UInt8 = 0
            return recv(fd, &byte, 1, Int32(MSG_DONTWAIT)) <= 0
        }
        #expect(eventually(within: 2) { closedByServer(fds[0]) }, "the oldest idle connection was not evicted")
        #expect(!closedByServer(fds[1]) && !closedByServer(fds[2]), "the newer connections must stay until the 5 s head timeout")
        // The newest may still send its request and be answered.
        _ = "GET /healthz HTTP/1.1\r\n\r\n".withCString { send(fds[2], $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = recv(fds[2], &buffer, buffer.count, 0)
        #expect(count > 0 && String(decoding: buffer[0..<max(0, count)], as: UTF8.self).hasPrefix("HTTP/1.1 200"))
    }

    /// A request whose head and hang-up (FIN) arrive together is answered: the server dropped
    /// a connection at its end of file before looking for a whole head in what it had read.
    @Test func aRequestFollowedAtOnceByAHangUpIsAnswered() throws {
        let telemetry = try TelemetryProcess()
        #expect(telemetry.waitUp(), "\(telemetry.process.log)")
        for _ in 0 ..< 20 {
            let fd = Self.connectRaw(telemetry.http)
            defer { close(fd) }
            _ = "GET /healthz HTTP/1.0\r\n\r\n".withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
            shutdown(fd, Int32(SHUT_WR))
            var buffer = [UInt8](repeating: 0, count: 256)
            let count = recv(fd, &buffer, buffer.count, 0)
            #expect(String(decoding: buffer[0 ..< max(0, count)], as: UTF8.self).hasPrefix("HTTP/1.1 200"))
        }
        // `limit` is a number from 1 to 500, nothing else.
        for bad in ["0", "-1", "501", "99999999999999999999", "ten"] {
            #expect(httpGet(telemetry.http, "/api/events?limit=\(bad)")?.status == 400, "limit=\(bad)")
        }
        #expect(httpGet(telemetry.http, "/api/events?limit=5")?.status == 200)
    }

    /// A client that sends more than its request (a second one behind it, a body) still gets
    /// its whole response: the server closed with those bytes unread, the kernel answered with
    /// a reset, and a reset empties the client's receive queue, the response it had not read.
    @Test func bytesSentBehindARequestDoNotCostItsResponse() throws {
        let telemetry = try TelemetryProcess()
        #expect(telemetry.waitUp(), "\(telemetry.process.log)")
        // A page of some 200 KB: more than the kernel holds in flight for a client with a small
        // receive buffer, so part of it is still in the server's send queue when it closes.
        let pusher = try Pusher(telemetry, as: "big")
        try pusher.push(.metricsSnapshot(MetricsSnapshot(service: "big", instance: "big", timestampUnixMs: 1, metrics: (0 ..< 1_500).map {
            Metric(name: "netplay_big_\($0)", kind: .gauge, labels: [KeyValue(key: "padding", value: String(repeating: "p", count: 64))], value: 1)
        }, sequence: 1)))
        #expect(eventually(within: 10) { (httpGet(telemetry.http, "/metrics")?.body.utf8.count ?? 0) > 150_000 })
        for trailer in ["GET /healthz HTTP/1.1\r\n\r\n", String(repeating: "x", count: 20_000)] {
            let fd = tcpConnect(telemetry.http, receiveBuffer: 4_096)
            defer { close(fd) }
            let request = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" + trailer
            _ = request.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
            Thread.sleep(forTimeInterval: 0.3)  // the server has sent what the kernel takes
            var received: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = recv(fd, &buffer, buffer.count, 0)
                if count <= 0 {
                    #expect(count == 0, "the connection was reset (errno \(errno)) after \(received.count) bytes")
                    break
                }
                received += buffer[0 ..< count]
            }
            let text = String(decoding: received, as: UTF8.self)
            #expect(text.hasPrefix("HTTP/1.1 200") && text.contains("netplay_telemetry_http_requests_total"), "\(received.count) bytes")
        }
        #expect(Self.alive(telemetry.process))
    }

    /// Clients that ask for a large page and never read hold their connections until the
    /// response timeout; they are evicted like idle ones, so they cannot fill the caps and
    /// have Prometheus's scrapes refused.
    @Test func clientsThatNeverReadTheirResponseCannotFillTheConnectionCap() throws {
        let telemetry = try TelemetryProcess(environment: ["NETPLAY_HTTP_MAX_PER_ADDRESS": "2"])
        #expect(telemetry.waitUp(), "\(telemetry.process.log)")
        // A /metrics page of megabytes: eight members' 1,000 series each, with long label values
        // (more than the kernel's socket buffers take for a client that does not read).
        let long = String(repeating: "v", count: 250)
        for instance in (0 ..< 8).map({ "big-\($0)" }) {
            try Pusher(telemetry, as: instance).push(.metricsSnapshot(MetricsSnapshot(service: "big", instance: instance, timestampUnixMs: 1,
                                                                                      metrics: (0 ..< 1_000).map {
                Metric(name: "netplay_big_\($0)", help: String(repeating: "h", count: 50), kind: .gauge,
                       labels: [KeyValue(key: "a", value: long + "\($0)"), KeyValue(key: "b", value: long)], value: 1)
            }, sequence: 1)))
        }
        var size = 0
        #expect(eventually(within: 10) { size = httpGet(telemetry.http, "/metrics", timeout: 5)?.body.utf8.count ?? 0; return size > 4 << 20 },
                "the page is only \(size) bytes")
        // Two clients with a tiny receive window ask for it and read nothing.
        var stalled: [Int32] = []
        defer { for fd in stalled { close(fd) } }
        for _ in 0 ..< 2 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var small: Int32 = 2048
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
            let colon = telemetry.http.lastIndex(of: ":")!
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(telemetry.http[telemetry.http.index(after: colon)...])!.bigEndian
            inet_pton(AF_INET, String(telemetry.http[..<colon]), &address.sin_addr)
            let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            #expect(connected == 0)
            _ = "GET /metrics HTTP/1.1\r\n\r\n".withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
            stalled.append(fd)
        }
        // Once their responses have stalled (a second without progress), a third client gets in,
        // well before the 10 s response timeout would have freed a place.
        Thread.sleep(forTimeInterval: 1)
        #expect(eventually(within: 6) { httpGet(telemetry.http, "/healthz")?.status == 200 },
                "a third client was refused beside two that never read")
        #expect(Self.alive(telemetry.process))
    }

    /// Within the series caps, histograms of 64 buckets and 16 labels of 256 quotes each made a
    /// page of 10 KB a line (half a gigabyte at the default caps), rendered again for every
    /// scrape and copied for every connection: a few clients asking at once ran the process
    /// out of memory. The page stays within its byte budget (672 bytes a series of
    /// `--max-series`), and clients asking at once share one rendering.
    @Test func wideLabelsLeaveThePageWithinItsByteBudget() throws {
        let telemetry = try TelemetryProcess(["--max-series", "5000"])
        #expect(telemetry.waitUp(), "\(telemetry.process.log)")
        let labels = (0 ..< 16).map { KeyValue(key: "label_\($0)", value: String(repeating: "\"", count: 256)) }
        let bounds = (1 ... 64).map(Double.init)
        for n in 0 ..< 4 {
            let pusher = try Pusher(telemetry, as: "wide-\(n)")
            let metrics = (0 ..< 29).map { i in
                Metric(name: "netplay_wide_\(i)_seconds", kind: .histogram, labels: labels, bucketBounds: bounds,
                       bucketCounts: bounds.map { UInt64($0) }, sum: 1, count: 64)
            }
            try pusher.push(.metricsSnapshot(MetricsSnapshot(service: "wide", instance: "wide-\(n)", timestampUnixMs: 1, metrics: metrics, sequence: 1)))
        }
        var page = ""
        let settled = eventually(within: 30) {
            page = httpGet(telemetry.http, "/metrics", timeout: 10)?.body ?? ""
            return page.contains("netplay_telemetry_snapshots_total{instance=\"telemetry-test\",service=\"telemetry\"} 4")
        }
        #expect(settled, "telemetry did not ingest the 4 snapshots:\n\(page.suffix(3000))")
        #expect(page.contains("reason=\"too_many_bytes\""), "no drop counted")
        #expect(page.utf8.count < 5000 * 672 + 200_000, "/metrics is \(page.utf8.count) bytes")
        let sizes = Mutex<[Int]>([])
        let http = telemetry.http
        DispatchQueue.concurrentPerform(iterations: 16) { _ in
            let size = httpGet(http, "/metrics", timeout: 20)?.body.utf8.count ?? -1
            sizes.withLock { $0.append(size) }
        }
        let seen = sizes.withLock { $0 }
        #expect(seen.allSatisfy { $0 > 1_000_000 && $0 < 5000 * 672 + 200_000 }, "\(seen)")
        let status = try String(contentsOfFile: "/proc/\(telemetry.process.pid)/status", encoding: .utf8)
        let peak = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }.flatMap { Int($0.split(separator: " ")[1]) } ?? 0
        #expect(peak < 200_000, "peak RSS \(peak) kB")
        #expect(Self.alive(telemetry.process))
    }

    @Test func anIngestFloodStaysBounded() throws {
        // Forgetting is not what this asks about: 360 members joining one by one make telemetry
        // read its trust store again for each (its directory changed), which on a loaded machine
        // took longer than the default 20 s before the first instances were forgotten.
        let telemetry = try TelemetryProcess(["--forget-after", "600"])
        #expect(telemetry.waitUp(), "\(telemetry.process.log)")
        // Kept open until the end: a pusher closed while its handshake waits for telemetry drops
        // its snapshot after the 500 ms linger.
        var pushers: [Pusher] = []
        defer { pushers.removeAll() }
        // 60 fake instances of 4,000 series each (the default caps keep 2,000 each and 50,000 in all),
        // then 300 more small instances (the cap is 256 instances): each one a member with a key
        // of its own, as a compromised cluster would be (strangers cannot push at all).
        for n in 0..<60 {
            let pusher = try Pusher(telemetry, as: "fake-\(n)")
            pushers.append(pusher)
            let metrics = (0..<4_000).map { i in
                Metric(name: "netplay_fake_metric_\(i)", help: "A fake metric pushed by an attacker.", kind: .gauge,
                       labels: [KeyValue(key: "a", value: "value-\(i)"), KeyValue(key: "b", value: "some-longer-label-value-\(n)")], value: Double(i))
            }
            try pusher.push(.metricsSnapshot(MetricsSnapshot(service: "fake", instance: "fake-\(n)", timestampUnixMs: 1, metrics: metrics, sequence: 1)))
        }
        for n in 0..<300 {
            let pusher = try Pusher(telemetry, as: "small-\(n)")
            pushers.append(pusher)
            try pusher.push(.metricsSnapshot(MetricsSnapshot(service: "small", instance: "small-\(n)", timestampUnixMs: 1,
                                                             metrics: [Metric(name: "netplay_small", kind: .gauge, value: 1)], sequence: 1)))
        }
        var page = ""
        let settled = eventually(within: 90) {
            page = httpGet(telemetry.http, "/metrics", timeout: 10)?.body ?? ""
            return page.contains("netplay_telemetry_snapshots_total{instance=\"telemetry-test\",service=\"telemetry\"} 360")
        }
        #expect(settled, "telemetry did not ingest the 360 snapshots:\n\(page.suffix(3000))")
        func value(_ prefix: String) -> Double? {
            page.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { Double($0.split(separator: " ").last ?? "") }
        }
        #expect(value("netplay_telemetry_series{") == 50_000)
        #expect(value("netplay_telemetry_instances{") == 256)
        #expect((value("netplay_telemetry_dropped_total{instance=\"telemetry-test\",reason=\"too_many_series\"") ?? 0) > 0)
        #expect((value("netplay_telemetry_dropped_total{instance=\"telemetry-test\",reason=\"too_many_series_per_instance\"") ?? 0) > 0)
        #expect(value("netplay_telemetry_dropped_total{instance=\"telemetry-test\",reason=\"too_many_instances\"") == 104)
        let samples = page.split(separator: "\n").filter { !$0.hasPrefix("#") }.count
        #expect(samples < 52_000, "\(samples) samples on /metrics")
        #expect(page.utf8.count < 8_000_000, "/metrics is \(page.utf8.count) bytes")
        let status = try String(contentsOfFile: "/proc/\(telemetry.process.pid)/status", encoding: .utf8)
        let rss = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }.flatMap { Int($0.split(separator: " ")[1]) } ?? 0
        print("telemetry after the flood: RSS \(rss / 1024) MB, /metrics \(page.utf8.count / 1024) KB, \(samples) samples")
        #expect(rss < 160_000, "RSS \(rss) kB after the flood")
        #expect(telemetry.process.log.contains("dropped pushed telemetry over a cap"), "no warning logged")
        #expect(httpGet(telemetry.http, "/healthz")?.status == 200)
        #expect(Self.alive(telemetry.process))
    }
}
