import Foundation
import Testing
@testable import WANHarness
#if canImport(Glibc)
import Glibc
import SystemTools
import NetplayTestSupport
#endif

/// Sockets for the tests: a listener on the lab's service address and a socket made inside a peer.
/// A bound UDP socket in the root namespace (on the lab's service address) and one in a peer's
/// namespace, each with a big receive buffer: numbered datagrams sent up or down the WAN path.
final class UDPPath {
    let lab: WANLab
    let peer: WANPeer
    let root: Int32
    let inPeer: Int32
    let rootPort: UInt16
    let peerPort: UInt16

    init(_ lab: WANLab, _ peer: WANPeer) throws {
        self.lab = lab
        self.peer = peer
        root = TestSockets.make(Int32(SOCK_DGRAM.rawValue))
        inPeer = try peer.withNamespace { TestSockets.make(Int32(SOCK_DGRAM.rawValue)) }
        rootPort = try TestSockets.bindAny(root, lab.serviceAddress)
        peerPort = try TestSockets.bindAny(inPeer, peer.address)
        TestSockets.bigReceiveBuffer(root)
        TestSockets.bigReceiveBuffer(inPeer)
    }

    deinit {
        close(root)
        close(inPeer)
    }

    /// Sends `count` datagrams from the peer to the root namespace; the numbers that arrived.
    func up(_ count: Int) -> [UInt32] {
        TestSockets.udpRun(from: inPeer, to: root, host: lab.serviceAddress, port: rootPort, count: count)
    }

    /// Sends `count` datagrams from the root namespace to the peer; the numbers that arrived.
    func down(_ count: Int) -> [UInt32] {
        TestSockets.udpRun(from: root, to: inPeer, host: peer.address, port: peerPort, count: count)
    }
}

enum TestSockets {
    static func make(_ type: Int32) -> Int32 { socket(AF_INET, type | Int32(SOCK_CLOEXEC.rawValue), 0) }

    static func address(_ host: String, _ port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        inet_pton(AF_INET, host, &address.sin_addr)
        return address
    }

    /// Binds `fd` to host:0 and returns the port the kernel chose.
    static func bindAny(_ fd: Int32, _ host: String) throws -> UInt16 {
        var address = address(host, 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard ok else { throw WANHarnessError("bind \(host): \(String(cString: strerror(errno)))") }
        return UInt16(bigEndian: address.sin_port)
    }

    static func connect(_ fd: Int32, _ host: String, _ port: UInt16) -> Bool {
        var address = address(host, port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    static func setReceiveTimeout(_ fd: Int32, seconds: Int) {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    static func bigReceiveBuffer(_ fd: Int32) {
        var size: Int32 = 8 << 20
        setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, 4)
    }

    /// Sends `count` numbered UDP datagrams from `from` to host:port, 300 µs apart, and returns the
    /// numbers `to` received, in arrival order (waiting until 1 s passes with nothing new).
    static func udpRun(from: Int32, to: Int32, host: String, port: UInt16, count: Int) -> [UInt32] {
        var target = address(host, port)
        for number in 0..<count {
            var value = UInt32(number).littleEndian
            _ = withUnsafePointer(to: &target) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(from, &value, 4, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            usleep(300)
        }
        setReceiveTimeout(to, seconds: 1)
        var received: [UInt32] = []
        var value: UInt32 = 0
        while recv(to, &value, 4, 0) == 4 { received.append(UInt32(littleEndian: value)) }
        return received
    }
}

@Suite("WAN harness: real kernel packets through netplay-wanlink", .serialized, .ownThread)
struct WANHarnessTests {
    @Test("a TCP echo through a peer at one-way 50 ms ± 5 ms takes about 100-115 ms per round trip",
          .enabled(if: WANLab.unavailableReason == nil, "\(WANLab.unavailableReason ?? "")"))
    func roundTripIsTwiceTheOneWayDelay() throws {
        let lab = try WANLab()
        defer { lab.tearDown() }
        let peer = try lab.addPeer(delayMs: 50, jitterMs: 5)
        let listener = TestSockets.make(Int32(SOCK_STREAM.rawValue))
        defer { close(listener) }
        let port = try TestSockets.bindAny(listener, lab.serviceAddress)
        #expect(listen(listener, 1) == 0)
        let client = try peer.withNamespace { TestSockets.make(Int32(SOCK_STREAM.rawValue)) }
        defer { close(client) }
        var one: Int32 = 1
        setsockopt(client, Int32(IPPROTO_TCP), TCP_NODELAY, &one, 4)
        #expect(TestSockets.connect(client, lab.serviceAddress, port))
        let server = accept(listener, nil, nil)
        defer { close(server) }
        setsockopt(server, Int32(IPPROTO_TCP), TCP_NODELAY, &one, 4)
        TestSockets.setReceiveTimeout(server, seconds: 5)
        TestSockets.setReceiveTimeout(client, seconds: 5)
        var rtts: [Double] = []
        for _ in 0..<20 {
            var byte: UInt8 = 7
            let start = monotonicNanoseconds()
            guard send(client, &byte, 1, 0) == 1, recv(server, &byte, 1, 0) == 1, send(server, &byte, 1, 0) == 1,
                  recv(client, &byte, 1, 0) == 1 else { Issue.record("echo failed: \(String(cString: strerror(errno)))"); return }
            rtts.append(Double(monotonicNanoseconds() - start) / 1e6)
        }
        rtts.sort()
        let median = rtts[rtts.count / 2]
        // Two one-way delays of 45...55 ms each, plus scheduling on a busy machine.
        #expect(rtts.first! >= 89, "fastest round trip \(rtts.first!) ms: the delay is missing or applied once")
        #expect(median >= 95 && median <= 125, "median round trip \(median) ms, expected ~100-115 (all: \(rtts))")
    }

    @Test("jitter keeps packets in order each way; --reorder lets it reorder them",
          .enabled(if: WANLab.unavailableReason == nil, "\(WANLab.unavailableReason ?? "")"))
    func orderIsKeptPerDirection() throws {
        let lab = try WANLab()
        defer { lab.tearDown() }
        for reorder in [false, true] {
            let peer = try lab.addPeer(delayMs: 20, jitterMs: 10, reorder: reorder)
            let path = try UDPPath(lab, peer)
            let (up, down) = (path.up(500), path.down(500))
            for (name, received) in [("up", up), ("down", down)] {
                #expect(received.count == 500, "\(name): \(received.count) of 500 arrived")
                let inversions = zip(received, received.dropFirst()).filter { $0 >= $1 }.count
                if reorder {
                    #expect(inversions > 10, "\(name) with --reorder: only \(inversions) out-of-order pairs: is jitter applied?")
                } else {
                    #expect(inversions == 0, "\(name): \(inversions) out-of-order pairs")
                }
            }
        }
    }

    @Test("10% loss drops about 10% of the datagrams each way",
          .enabled(if: WANLab.unavailableReason == nil, "\(WANLab.unavailableReason ?? "")"))
    func lossHitsBothDirections() throws {
        let lab = try WANLab()
        defer { lab.tearDown() }
        let peer = try lab.addPeer(delayMs: 5, lossPercent: 10)
        let path = try UDPPath(lab, peer)
        let (up, down) = (path.up(2000), path.down(2000))
        for (name, received) in [("up", up), ("down", down)] {
            let loss = 100 * Double(2000 - received.count) / 2000
            #expect(loss >= 5 && loss <= 16, "\(name): \(loss)% lost, configured 10%")
        }
        // Back to a clean path on the live peer.
        try peer.setLoss(percent: 0)
        let clean = path.up(300)
        #expect(clean.count == 300, "after setLoss(0): \(clean.count) of 300")
    }

    @Test("tear-down leaves no namespace, device, address, rule or forwarder behind",
          .enabled(if: WANLab.unavailableReason == nil, "\(WANLab.unavailableReason ?? "")"))
    func tearDownRemovesEverything() throws {
        let lab = try WANLab()
        let peers = [try lab.addPeer(delayMs: 10, lossPercent: 2), try lab.addPeer(delayMs: 30, jitterMs: 3, lossPercent: 5)]
        let ip = SystemCommand.which("ip")!, iptables = SystemCommand.which("iptables")!
        #expect(SystemCommand.run(ip, ["netns", "list"]).output.contains(peers[1].namespace))
        #expect(SystemCommand.run(iptables, ["-t", "raw", "-S", "PREROUTING"]).output.contains(peers[0].namespace))
        lab.tearDown()
        let namespaces = SystemCommand.run(ip, ["netns", "list"]).output
        let links = SystemCommand.run(ip, ["-o", "link", "show"]).output
        let addresses = SystemCommand.run(ip, ["-o", "addr", "show"]).output
        let rules = SystemCommand.run(iptables, ["-t", "raw", "-S", "PREROUTING"]).output
        let tag = "\(lab.tag)-"
        #expect(!namespaces.contains("wan-\(tag)"), "namespaces left: \(namespaces)")
        #expect(!links.contains("wo\(tag)"), "devices left: \(links)")
        #expect(!addresses.contains(lab.serviceAddress + "/"), "service address left: \(addresses)")
        #expect(!rules.contains("wan-\(tag)"), "rules left: \(rules)")
        let forwarders = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).filter { entry in
            guard Int(entry) != nil, let data = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline") else { return false }
            let arguments = data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            return arguments.first?.hasSuffix("netplay-wanlink") == true && arguments.contains { $0.hasPrefix("wo\(tag)") }
        }
        #expect(forwarders.isEmpty, "forwarders left: \(forwarders)")
    }

    @Test("leftovers of a process that died are removed when the next lab is made",
          .enabled(if: WANLab.unavailableReason == nil, "\(WANLab.unavailableReason ?? "")"))
    func staleLeftoversAreRemoved() throws {
        // A pid that is certainly gone: a child that has exited and been reaped.
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/bin/true")
        try child.run()
        child.waitUntilExit()
        let dead = child.processIdentifier
        #expect(processIsGone(dead))
        let ip = SystemCommand.which("ip")!, iptables = SystemCommand.which("iptables")!
        let namespace = "wan-\(dead)-7-1", device = "wo\(dead)-7-1"
        try SystemCommand.require(ip, ["netns", "add", namespace])
        try SystemCommand.require(ip, ["tuntap", "add", "dev", device, "mode", "tun"])
        try SystemCommand.require(ip, ["addr", "add", "10.99.255.1/32", "dev", "lo", "label", "lo:w\(dead)-7"])
        try SystemCommand.require(iptables, ["-t", "raw", "-I", "PREROUTING", "-i", device, "-m", "statistic", "--mode", "random",
                                             "--probability", "0.5", "-m", "comment", "--comment", namespace, "-j", "DROP"])
        let lab = try WANLab()
        defer { lab.tearDown() }
        #expect(!SystemCommand.run(ip, ["netns", "list"]).output.contains(namespace))
        #expect(!SystemCommand.run(ip, ["-o", "link", "show"]).output.contains(device))
        #expect(!SystemCommand.run(ip, ["-o", "addr", "show", "dev", "lo"]).output.contains("10.99.255.1"))
        #expect(!SystemCommand.run(iptables, ["-t", "raw", "-S", "PREROUTING"]).output.contains(namespace))
    }

    @Test("a stream at 60 Hz over one-way 50 ms ± 5 ms without loss arrives in ~50 ms with little extra delay",
          .enabled(if: WANLab.unavailableReason == nil, "\(WANLab.unavailableReason ?? "")"))
    func tcpProbeMeasuresTheCleanPath() throws {
        let lab = try WANLab()
        defer { lab.tearDown() }
        let peer = try lab.addPeer(delayMs: 50, jitterMs: 5)
        let result = try TCPLossProbe.run(lab: lab, peer: peer, seconds: 4, options: .init(connections: 2))
        #expect(result.received == result.sent, "\(result)")
        #expect(result.minimumLatencyMs >= 44 && result.minimumLatencyMs <= 60, "\(result)")
        #expect(result.p50Ms < 15 && result.lateOver100 == 0, "\(result)")
    }

    @Test("netplay-wanlink: --help, and a one-line reason with exit 2 on bad configuration")
    func wanlinkRejectsBadConfiguration() throws {
        let binary = try WANLab.locateWanlink()
        let help = SystemCommand.run(binary, ["--help"])
        #expect(help.status == 0 && help.output.contains("--delay-ms"))
        for arguments in [[], ["--inner", "a"], ["--inner", "a", "--outer", "b", "--delay-ms", "fast"],
                          ["--inner", "a", "--outer", "b", "--jitter-ms", "-1"], ["--inner", "a", "--outer", "a"],
                          ["--inner", "a", "--outer", "b", "--loss-percent", "101"], ["--inner", "a", "--outer", "b", "--bogus"],
                          ["--inner", "a-name-longer-than-15", "--outer", "b"], ["--inner", "a", "--outer", "b", "--seed", "x"]] {
            let result = SystemCommand.run(binary, arguments)
            let lines = result.output.split(separator: "\n")
            #expect(result.status == 2 && lines.count == 1, "\(arguments): \(result.status) \(result.output)")
        }
    }

    /// A flag beats its variable, a general `--delay-ms` flag beats the per-direction variables,
    /// an empty variable is unset, and a reorder variable that is no yes or no is refused. Each
    /// case ends in a later bad flag (`--loss-percent 101`), so the reason shows which value was
    /// taken before any device is touched.
    @Test("netplay-wanlink: flags beat variables, empty variables are unset, NETPLAY_WANLINK_REORDER is checked")
    func wanlinkTakesFlagsOverVariables() throws {
        let binary = try WANLab.locateWanlink()
        let late = ["--inner", "a", "--outer", "b", "--loss-percent", "101"]
        let cases: [([String: String], [String], String)] = [
            (["NETPLAY_WANLINK_UP_DELAY_MS": "fast"], ["--delay-ms", "5"] + late, "--loss-percent '101'"),
            (["NETPLAY_WANLINK_DOWN_DELAY_MS": "fast"], ["--delay-ms=5"] + late, "--loss-percent '101'"),
            (["NETPLAY_WANLINK_UP_DELAY_MS": "fast"], late, "--up-delay-ms 'fast'"),
            (["NETPLAY_WANLINK_INNER_NETNS": ""], late, "--loss-percent '101'"),
            (["NETPLAY_WANLINK_REORDER": "maybe"], late, "NETPLAY_WANLINK_REORDER 'maybe' is not 1, true, 0 or false"),
            (["NETPLAY_WANLINK_REORDER": "0"], late, "--loss-percent '101'"),
        ]
        for (environment, arguments, reason) in cases {
            let result = SystemCommand.run("/usr/bin/env", environment.map { "\($0.key)=\($0.value)" } + [binary] + arguments)
            #expect(result.status == 2 && result.output.contains(reason), "\(environment) \(arguments): \(result.status) \(result.output)")
        }
    }

    /// A RESULT line that lacks a field a test bounds (a renamed `max_stall_ms`) read as -1 and
    /// passed every bound; the harness now refuses it.
    @Test("a player's RESULT without a field the figures read is refused, not read as -1")
    func aResultWithoutAFieldIsRefused() throws {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("wan-result-\(getpid()).log").path
        defer { try? FileManager.default.removeItem(atPath: log) }
        let complete = "RESULT frames=600 checksum=0x1f slot=1 rollbacks=3 rollback_frames=9 max_rollback=4 own_substituted=0 "
            + "stalls_over_2=0 max_stall_ms=12 frame_delay=2 relay_moves=0"
        try (complete + "\n").write(toFile: log, atomically: true, encoding: .utf8)
        let figures = try WANMatch.awaitResult(log: log, until: Date().addingTimeInterval(5), what: "P1")
        #expect(figures.maxStallMs == 12 && figures.meanRollback == 3)
        for missing in ["max_stall_ms=12", "rollbacks=3", "checksum=0x1f"] {
            try (complete.replacingOccurrences(of: missing, with: "") + "\n").write(toFile: log, atomically: true, encoding: .utf8)
            let error = #expect(throws: WANHarnessError.self) { try WANMatch.awaitResult(log: log, until: Date().addingTimeInterval(5), what: "P1") }
            let field = String(missing.prefix { $0 != "=" })
            #expect(error?.description.contains("without \(field)") == true, "\(String(describing: error))")
        }
        try (complete.replacingOccurrences(of: "max_stall_ms=12", with: "max_stall_ms=soon") + "\n").write(toFile: log, atomically: true, encoding: .utf8)
        #expect(throws: WANHarnessError.self) { try WANMatch.awaitResult(log: log, until: Date().addingTimeInterval(5), what: "P1") }
    }

    @Test("TCP loss probe: options it cannot run are refused with the reason")
    func tcpProbeOptionsAreChecked() {
        var options = TCPLossProbe.Options()
        #expect(options.problem(seconds: 4) == nil)
        #expect(options.problem(seconds: -1)?.contains("seconds must be") == true)
        #expect(options.problem(seconds: .nan)?.contains("seconds must be") == true)
        options.rateHz = 0
        #expect(options.problem(seconds: 4)?.contains("rateHz must be") == true)
        options = TCPLossProbe.Options(connections: 0)
        #expect(options.problem(seconds: 4)?.contains("connections must be") == true)
        options = TCPLossProbe.Options(rtoMinMs: 3_000_000)
        #expect(options.problem(seconds: 4)?.contains("rtoMinMs must be") == true)
        options = TCPLossProbe.Options()
        options.messageBytes = 11
        #expect(options.problem(seconds: 4)?.contains("messageBytes must be") == true)
    }

    /// A path that dies mid-probe, its sender's small buffer full: the sender sat in send() until
    /// TCP gave up (a quarter of an hour). It is woken once the receiving side's time is up.
    @Test("TCP loss probe: a path that dies mid-probe ends the probe instead of hanging it",
          .enabled(if: WANLab.unavailableReason == nil, "\(WANLab.unavailableReason ?? "")"), .timeLimit(.minutes(1)))
    func tcpProbeEndsWhenThePathDies() throws {
        let lab = try WANLab()
        defer { lab.tearDown() }
        let peer = try lab.addPeer(delayMs: 5)
        var options = TCPLossProbe.Options()
        options.rateHz = 200
        options.messageBytes = 2_000
        options.sendBufferBytes = 4_096
        let cut = UncheckedBox(peer)
        let cutter = Thread {
            Thread.sleep(forTimeInterval: 1)
            try? cut.value.setLoss(percent: 100)
        }
        cutter.start()
        let started = ContinuousClock.now
        let result = try TCPLossProbe.run(lab: lab, peer: peer, seconds: 2, options: options)
        #expect(result.received > 0 && result.received < result.sent, "\(result)")
        #expect(ContinuousClock.now - started < .seconds(30))
        while !cutter.isFinished { usleep(10_000) }
    }

    /// The measurement behind docs/wan-harness.md: set NETPLAY_WAN_TCP_PROBE_SECONDS (e.g. 30).
    @Test("TCP under 2% loss each way at one-way 50 ms ± 5 ms (figures; NETPLAY_WAN_TCP_PROBE_SECONDS)",
          .enabled(if: WANLab.unavailableReason == nil && ProcessInfo.processInfo.environment["NETPLAY_WAN_TCP_PROBE_SECONDS"] != nil,
                   "set NETPLAY_WAN_TCP_PROBE_SECONDS to measure"))
    func tcpUnderLossFigures() throws {
        let seconds = Double(ProcessInfo.processInfo.environment["NETPLAY_WAN_TCP_PROBE_SECONDS"] ?? "") ?? 30
        let lab = try WANLab()
        defer { lab.tearDown() }
        let variants: [TCPLossProbe.Options] = [
            .init(noDelay: false), .init(), .init(thinLinearTimeouts: true), .init(rtoMinMs: 20),
            .init(connections: 2), .init(connections: 2, thinLinearTimeouts: true, rtoMinMs: 20),
        ]
        for options in variants {
            let peer = try lab.addPeer(delayMs: 50, jitterMs: 5, lossPercent: 2)
            let result = try TCPLossProbe.run(lab: lab, peer: peer, seconds: seconds, options: options)
            print("TCP probe | \(options) | \(result)")
            #expect(result.received == result.sent)
        }
    }
}

/// Hands a value to another thread where the test knows the two never use it at once.
final class UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
