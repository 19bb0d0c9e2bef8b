import Foundation
import NetplayService
import NetplayTestSupport
import RetroArchRelay
import NetplayWire
import Testing

/// The bytes of an ASCII magic.
func magic(_ text: String) -> [UInt8] { Array(text.utf8) }

/// A plain TCP client, as a stranger (or a broken RetroArch) would connect to the tunnel port.
final class RawTCP {
    private(set) var fd: Int32

    init(port: Int) throws {
        fd = try loopbackTCPConnection(port: port)
    }

    deinit { if fd >= 0 { close(fd) } }

    /// Closes at once: with a reset (SO_LINGER 0) or with a plain hang-up.
    func abort(reset: Bool) {
        if reset {
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        }
        close(fd)
        fd = -1
    }

    /// Sends everything (false when the relay already closed the connection).
    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent <= 0 { return false }
            offset += sent
        }
        return true
    }

    /// Reads exactly `count` bytes within `seconds`, or nil.
    func read(_ count: Int, within seconds: Double = 3) -> [UInt8]? {
        var out: [UInt8] = []
        let deadline = Date().addingTimeInterval(seconds)
        while out.count < count {
            guard wait(until: deadline) else { return nil }
            var buffer = [UInt8](repeating: 0, count: count - out.count)
            let got = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if got <= 0 { return nil }
            out += buffer[0..<got]
        }
        return out
    }

    /// True when the relay closes the connection within `seconds` (whatever it sent before is read and dropped).
    func closedByPeer(within seconds: Double = 3) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while wait(until: deadline) {
            let got = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if got <= 0 { return true }
        }
        return false
    }

    /// Sends what the socket takes without blocking, up to `count` bytes; returns how many.
    func sendWithoutBlocking(_ count: Int) -> Int {
        let chunk = [UInt8](repeating: 0x5A, count: 65_536)
        var total = 0
        while total < count {
            let sent = chunk.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, min($0.count, count - total), Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
            if sent <= 0 { break }
            total += sent
        }
        return total
    }

    /// Closes with a reset (SO_LINGER 0), as a crashed client would.
    func reset() {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        shutdown(fd, Int32(SHUT_RDWR))
    }

    private func wait(until deadline: Date) -> Bool {
        let left = deadline.timeIntervalSinceNow
        guard left > 0 else { return false }
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, Int32(left * 1000)) > 0
    }
}

/// A netplay-sync process on its own (no coordinator), its RetroArch tunnel on a free port.
final class StandaloneRelay {
    let port = TestPorts.free()
    let endpoint = TestPorts.endpoint()
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("netplay-tunnel-\(UUID().uuidString)").path
    let process: ServiceProcess
    let health: BlockingClient

    /// Starts it with `--retroarch-limits limits` (when given), under a hard limit of
    /// `descriptors` open files (when given, through prlimit), and waits until it answers Health.
    init(limits: String? = nil, descriptors: Int? = nil) throws {
        let arguments = [
            "--endpoint", endpoint, "--events", "none", "--data-dir", root + "/sync-0", "--coordinator", "none",
            "--cluster-secret", String(repeating: "ab", count: 32), "--telemetry", "none", "--retroarch-port", "\(port)",
        ] + (limits.map { ["--retroarch-limits", $0] } ?? [])
        if let descriptors {
            process = try ServiceProcess(url: URL(fileURLWithPath: "/usr/bin/prlimit"),
                                         ["--nofile=\(descriptors):\(descriptors)", try BuildProducts.url(of: "netplay-sync").path] + arguments)
        } else {
            process = try ServiceProcess("netplay-sync", arguments)
        }
        health = try BlockingClient(endpoint: endpoint, timeout: 1)
        guard eventually(within: 20, { (try? health.request(.healthRequest(HealthRequest()))) != nil }) else {
            throw HarnessError("netplay-sync did not start: \(process.log)")
        }
    }

    deinit {
        process.kill9()
        try? FileManager.default.removeItem(atPath: root)
    }

    /// The tunnel's part of the relay's introspection, as an operator reads it.
    func tunnelState() -> [String: Any]? {
        guard let inspector = try? TestKeys(dataRoot: root).operatorClient(endpoint: endpoint),
              case .introspectResponse(let dump)? = try? inspector.request(.introspectRequest(IntrospectRequest(section: "all"))),
              let json = try? JSONSerialization.jsonObject(with: Data(dump.json.utf8)) as? [String: Any],
              let state = json["state"] as? [String: Any] else { return nil }
        return state["retroarch"] as? [String: Any]
    }
}

/// What a stranger can throw at the tunnel port, against the real netplay-sync process: random
/// bytes, truncated and unknown magics, forged ids, a waiting client that sends too much, streams
/// that trickle, a host that sends garbage, connections reset by the hundred. Every one is closed
/// with a counted reason (read from the metrics the relay pushes), and afterwards the relay is
/// healthy and still pipes a real session.
@Suite("RetroArch tunnel fuzzing", .serialized, .ownThread)
struct TunnelFuzzTests {

    /// A host that opened a session: its control connection and the session id.
    static func host(port: Int) throws -> (RawTCP, [UInt8]) {
        let control = try RawTCP(port: port)
        control.send(magic("RATS") + [UInt8](repeating: 0, count: 12))
        let reply = try #require(control.read(16))
        #expect(Array(reply[0..<4]) == magic("RATS"))
        return (control, Array(reply[4...]))
    }

    @Test func everyBadByteSequenceIsClosedAndCountedAndTheRelayStaysHealthy() throws {
        let standalone = try StandaloneRelay(limits: "prefix-timeout=1,link-timeout=2,buffer=65536,clients=4,pending=2,per-address=2000")
        let (port, relay, health) = (standalone.port, standalone.process, standalone.health)
        var generator = SystemRandomNumberGenerator()

        // 1. Random bytes, any length from 1 to 64: closed (at once when 16 arrive, else at the prefix timeout).
        var strangers: [RawTCP] = []
        var whole = 0
        for _ in 0..<120 {
            let stranger = try RawTCP(port: port)
            var bytes = (0..<Int.random(in: 1...64, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if bytes.count >= 4, [magic("RATS"), magic("RATL"), magic("RANP")].contains(Array(bytes[0..<4])) { bytes[0] = 0 }
            stranger.send(bytes)
            strangers.append(stranger)
            if bytes.count >= 16 { whole += 1 }
        }
        for stranger in strangers { #expect(stranger.closedByPeer(within: 4)) }

        // 2. Truncated magics and ids, then silence: closed at the prefix timeout.
        for prefix in [magic("R"), magic("RAT"), magic("RATS"), magic("RATS") + [0, 0, 0], magic("RATL") + [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]] {
            let stranger = try RawTCP(port: port)
            stranger.send(prefix)
            #expect(stranger.closedByPeer(within: 4), "prefix \(prefix) was not closed")
        }

        // 3. Forged ids: an unknown session, an unknown link.
        for forged in [magic("RATS"), magic("RATL")] {
            let stranger = try RawTCP(port: port)
            stranger.send(forged + (0..<12).map { _ in UInt8.random(in: 1...255, using: &generator) })
            #expect(stranger.closedByPeer())
        }

        // 4. A plain RetroArch client (a netplay header) is told the server is out of date.
        let plain = try RawTCP(port: port)
        plain.send(magic("RANP") + [0, 4, 0, 8, 0, 0, 0, 1, 0, 0, 0, 6, 0, 0, 0, 5, 0, 0, 4, 0x69])
        #expect(plain.read(24) == magic("RANP") + [UInt8](repeating: 0, count: 20))
        #expect(plain.closedByPeer())

        // 5. A trickling host (a byte every 50 ms) gets its session; one slower than the timeout does not.
        let patient = try RawTCP(port: port)
        for byte in magic("RATS") + [UInt8](repeating: 0, count: 12) {
            patient.send([byte])
            Thread.sleep(forTimeInterval: 0.05)
        }
        #expect(patient.read(16).map { Array($0[0..<4]) } == magic("RATS"))
        let trickle = try RawTCP(port: port)
        for byte in magic("RATS") + [0, 0, 0, 0, 0, 0] {
            if !trickle.send([byte]) { break }
            Thread.sleep(forTimeInterval: 0.2)
        }
        #expect(trickle.closedByPeer())

        // 6. A waiting client that sends more than may be buffered, and one beyond the pending limit.
        let (control, session) = try Self.host(port: port)
        let greedy = try RawTCP(port: port)
        greedy.send(magic("RATS") + session)
        let greedyLink = Array(try #require(control.read(16))[4...])
        _ = greedy.send([UInt8](repeating: 0x55, count: 70_000))
        #expect(greedy.closedByPeer())
        // The host, as RetroArch does, asks where that client came from and links it: the answer
        // names the link (all-zero address), and the relay closes the link of a client that went,
        // which frees the host's pending place for the next client.
        control.send(magic("RATA") + greedyLink)
        #expect(control.read(32) == magic("RATA") + greedyLink + [UInt8](repeating: 0, count: 16))
        let greedyHostLink = try RawTCP(port: port)
        greedyHostLink.send(magic("RATL") + greedyLink)
        #expect(greedyHostLink.closedByPeer())
        let waiting = try (0..<2).map { _ -> RawTCP in
            let client = try RawTCP(port: port)
            client.send(magic("RATS") + session)
            #expect(control.read(16).map { Array($0[0..<4]) } == magic("RATL"))
            return client
        }
        let third = try RawTCP(port: port)
        third.send(magic("RATS") + session)
        #expect(third.closedByPeer(), "a third waiting client passed the pending limit of 2")
        // ... and links the host never opens time out, while the host's session stays.
        for client in waiting { #expect(client.closedByPeer(within: 5)) }

        // 7. Hundreds of connections reset abruptly (all from this one address: the per-address
        // limit is raised for this test; TunnelCoreTests holds it).
        let crowd = try (0..<300).map { _ in try RawTCP(port: port) }
        for (index, member) in crowd.enumerated() where index % 2 == 0 { member.send(magic("RATS")) }
        for member in crowd { member.reset() }

        // 8. A host that sends garbage on its control connection loses its session.
        let (rogue, _) = try Self.host(port: port)
        rogue.send(magic("EVIL") + [UInt8](repeating: 0, count: 12))
        #expect(rogue.closedByPeer())

        // The relay is healthy and still pipes a real session end to end.
        #expect(relay.process.isRunning)
        #expect((try? health.request(.healthRequest(HealthRequest()))) != nil)
        let client = try RawTCP(port: port)
        client.send(magic("RATS") + session + Array("hello host".utf8))
        let told = try #require(control.read(16))
        let link = Array(told[4...])
        control.send(magic("RATA") + link)
        let address = try #require(control.read(32))
        #expect(Array(address[16...]) == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 127, 0, 0, 1])
        let hostLink = try RawTCP(port: port)
        hostLink.send(magic("RATL") + link)
        #expect(hostLink.read(10) == Array("hello host".utf8))
        hostLink.send(Array("hello client".utf8))
        #expect(client.read(12) == Array("hello client".utf8))

        // Every reason was counted (the relay's introspection, as an operator reads it), once the
        // prefix timeout (1 s) has passed for whatever the crowd left behind.
        Thread.sleep(forTimeInterval: 1.5)
        guard let retroarch = standalone.tunnelState(), let counts = retroarch["closed"] as? [String: Int] else {
            Issue.record("no RetroArch figures in the relay's introspection")
            return
        }
        let closed = counts.mapValues(Double.init)
        #expect((retroarch["sessions"] as? [Any])?.count == 2, "the patient host's and the test host's sessions remain")
        #expect(retroarch["connections"] as? Int == 4, "only the two hosts' control connections and the live link remain: \(retroarch)")
        #expect(closed["bad_magic"] == Double(whole), "\(closed)")
        // The reset crowd is noticed as hung up, or (when the reset beat the relay's read of the
        // connection) at the prefix timeout: either way, nobody is left behind.
        let timedOut = closed["prefix_timeout"] ?? 0
        #expect(timedOut >= Double(120 - whole + 5 + 1) && timedOut <= Double(120 - whole + 5 + 1 + 300), "\(closed)")
        #expect(closed["unknown_session"] == 1 && closed["unknown_link"] == 1, "\(closed)")
        #expect(closed["not_tunnel"] == 1 && closed["buffer_overflow"] == 1 && closed["client_limit"] == 1, "\(closed)")
        #expect(closed["link_timeout"] == 2 && closed["bad_control_message"] == 1, "\(closed)")
        #expect(relay.process.isRunning, "the relay died: \(relay.log.suffix(2_000))")
    }

    /// The CPU seconds process `pid` has used, from /proc.
    static func cpuSeconds(_ pid: Int32) -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// A client held back (its host's link reads nothing, so the relay stopped reading the
    /// client) that then resets. epoll reports a reset whatever a socket is watched for; the
    /// relay ignored it for a held connection and, level-triggered, was woken for it on every
    /// wait: the tunnel's thread spun at 100 % CPU for good and the dead client stayed open.
    /// (A plain hang-up of this client could not reach the relay: its FIN waits behind the bytes
    /// the relay does not read.)
    @Test func aHeldClientThatResetsIsLetGoAndSpinsNothing() throws {
        let standalone = try StandaloneRelay()
        let (port, relay) = (standalone.port, standalone.process)
        func connections() -> Int? { standalone.tunnelState()?["connections"] as? Int }

        let (control, session) = try Self.host(port: port)
        let client = try RawTCP(port: port)
        client.send(magic("RATS") + session)
        let link = Array(try #require(control.read(16))[4...])
        let hostLink = try RawTCP(port: port)
        hostLink.send(magic("RATL") + link)
        client.send(Array("hello".utf8))
        #expect(hostLink.read(5) == Array("hello".utf8), "no link")
        // From now on the host's link reads nothing: the client's bytes fill its queue, and the client is held.
        var sent = 0
        for _ in 0 ..< 40 where sent < 16 << 20 {
            sent += client.sendWithoutBlocking(16 << 20)
            Thread.sleep(forTimeInterval: 0.05)
        }
        #expect(sent > 256 << 10, "the relay took only \(sent) bytes")
        #expect(eventually(within: 3) { connections() == 3 }, "connections: \(connections() ?? -1) after \(sent) bytes")
        client.abort(reset: true)
        // Let go: the client at once, its partner once what was piped to it had its chance.
        #expect(eventually(within: 5) { connections() == 1 }, "connections: \(connections() ?? -1)")
        let before = Self.cpuSeconds(relay.pid)
        Thread.sleep(forTimeInterval: 2)
        let used = Self.cpuSeconds(relay.pid) - before
        #expect(used < 0.8, "the relay used \(used) s of CPU in 2 s with nothing to do")
        #expect(relay.process.isRunning, "the relay died: \(relay.log.suffix(2_000))")
        _ = hostLink
    }

    /// A relay out of file descriptors (a crowd of connections that send nothing, under a hard
    /// limit of 160): each connection it cannot take is accepted on the spare descriptor and closed
    /// at once, counted as `connection_limit`, instead of staying in the backlog and waking the
    /// relay's thread for good. The relay keeps answering, spins nothing, and once the crowd
    /// leaves, pipes a session again.
    @Test func aRelayOutOfDescriptorsShedsWhatItCannotTakeAndRecovers() throws {
        let standalone = try StandaloneRelay(limits: "per-address=5000,prefix-timeout=60", descriptors: 160)
        let (port, relay, health) = (standalone.port, standalone.process, standalone.health)
        var crowd: [RawTCP] = []
        for _ in 0 ..< 300 { crowd.append(try RawTCP(port: port)) }
        // The relay takes what its descriptors allow and closes the rest as it accepts them.
        var shed = 0
        _ = eventually(within: 10) {
            shed = crowd.filter { $0.closedByPeer(within: 0.001) }.count
            return shed >= 150
        }
        #expect(shed >= 150 && shed < 300, "\(shed) of 300 connections closed by a relay limited to 160 descriptors")
        let before = Self.cpuSeconds(relay.pid)
        Thread.sleep(forTimeInterval: 2)
        let used = Self.cpuSeconds(relay.pid) - before
        #expect(used < 0.8, "the relay used \(used) s of CPU in 2 s out of descriptors")
        #expect((try? health.request(.healthRequest(HealthRequest()))) != nil, "the relay stopped answering")
        crowd.removeAll()

        // Descriptors back: a session opens and pipes.
        let (control, session) = try Self.host(port: port)
        let client = try RawTCP(port: port)
        client.send(magic("RATS") + session + Array("hello host".utf8))
        let link = Array(try #require(control.read(16))[4...])
        let hostLink = try RawTCP(port: port)
        hostLink.send(magic("RATL") + link)
        #expect(hostLink.read(10) == Array("hello host".utf8))
        let closed = standalone.tunnelState()?["closed"] as? [String: Int] ?? [:]
        #expect((closed["connection_limit"] ?? 0) >= shed, "\(closed)")
        #expect(relay.process.isRunning, "the relay died: \(relay.log.suffix(2_000))")
    }
}

/// The tunnel's thread as the relay runs it, in this process.
@Suite("RetroArch tunnel thread", .serialized, .ownThread)
struct TunnelThreadTests {
    /// Every session opened, and every one closed, rebuilt the snapshot of every session's report
    /// at once: a stranger opening and closing sessions in a loop (16 bytes a connection) made
    /// the thread every session shares rebuild all reports twice per connection. A change is now
    /// published within 50 ms, with any others made meanwhile.
    @Test func sessionsOpenedAndClosedInALoopRebuildTheSnapshotAtMostEveryFiftyMilliseconds() throws {
        var configuration = TunnelConfiguration(port: UInt16(TestPorts.free()), bindHost: "127.0.0.1", sessionPorts: nil)
        try configuration.applyLimits("sessions-per-address=1000")
        let server = try TunnelServer(configuration: configuration, onEvent: { _ in })
        defer { server.stop() }
        let port = Int(server.boundPort)
        #expect(eventually(within: 2) { server.snapshot.generation > 0 })
        let started = Date()
        let before = server.snapshot.generation
        for _ in 0 ..< 300 {
            let (control, _) = try TunnelFuzzTests.host(port: port)
            control.abort(reset: false)
        }
        #expect(eventually(within: 5) { server.snapshot.sessions == 0 && server.snapshot.connections == 0 })
        let seconds = Date().timeIntervalSince(started)
        let published = Double(server.snapshot.generation - before)
        // At most one per 50 ms for the changes, one per 250 ms tick, and a few at the edges.
        let bound = seconds / 0.05 + seconds / 0.25 + 4
        #expect(published <= bound, "\(published) snapshots in \(seconds) s for 600 changes")
        // A change is still published soon.
        let (control, _) = try TunnelFuzzTests.host(port: port)
        #expect(eventually(within: 1) { server.snapshot.sessions == 1 })
        _ = control
    }
}
