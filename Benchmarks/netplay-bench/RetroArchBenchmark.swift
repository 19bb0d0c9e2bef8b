import ArgumentParser
import Foundation
import NetplayAuth
import NetplayService

/// `netplay-bench retroarch`: netplay-sync's RetroArch relay (the "MITM tunnel" protocol on its
/// own TCP port, a separate release process) beside a plain C TCP forwarder
/// (Benchmarks/c/tcp_forwarder.c: epoll, one thread, no parsing) and beside no relay at all (the
/// floor), under the same RetroArch-like sessions (Benchmarks/c/retroarch_load.c: per session a
/// host and a client; through the relay with the whole tunnel handshake, RATP echoed).
///
/// Two figures per target and run: throughput (both ends of every session write 16 KiB netplay
/// messages as fast as a window (256 KiB) per direction allows; MB/s received, both directions) and
/// round trips (every client sends a 64-byte INPUT message at 60 Hz, the host echoes it: p50,
/// p99, max). The three targets run interleaved, round after round, so a noisy neighbour on this
/// shared machine hits them alike; the table shows each figure's median over the rounds, then the
/// relay's throughput as a share of the forwarder's and the p99 each adds over the floor.
struct RetroArchBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "retroarch",
        abstract: "RetroArch relay throughput and added round-trip latency versus a plain C TCP forwarder."
    )

    @Option(help: "Concurrent sessions (a host and a client each).") var sessions = 100
    @Option(help: "Seconds of each throughput measurement (after 1 s of warm-up).") var seconds = 5.0
    @Option(help: "Seconds of each 60 Hz round-trip measurement (after 1 s of warm-up).") var latencySeconds = 5.0
    @Option(help: "Rounds; each runs relay, forwarder and direct once, in turn.") var rounds = 3
    @Option(help: "Bytes in flight per direction of a session in the throughput run (what a session keeps in flight, as RetroArch's own send buffers do).") var window = 262_144
    @OptionGroup var sync: SyncBinaryOption
    @Option(help: "Path of the C forwarder (built by `make bench-retroarch`).") var cForwarder = "Benchmarks/bin/tcp_forwarder"
    @Option(help: "Path of the C load generator (built by `make bench-retroarch`).") var load = "Benchmarks/bin/retroarch_load"

    func run() throws {
        signal(SIGPIPE, SIG_IGN)
        let syncPath = sync.path
        for (path, what) in [(syncPath, "netplay-sync (swift build -c release, or --sync-bin)"),
                             (cForwarder, "the C forwarder (make bench-retroarch, or --c-forwarder)"),
                             (load, "the C load generator (make bench-retroarch, or --load)")]
        where !FileManager.default.isExecutableFile(atPath: path) {
            throw ValidationError("\(what) is not built at \(path)")
        }
        let relay = try ChildProcess.startRelay(path: syncPath)
        defer { relay.stop() }
        let hostPort = try freePort()
        let forwarder = try ChildProcess.startForwarder(path: cForwarder, targetPort: hostPort)
        defer { forwarder.stop() }

        let targets: [(name: String, arguments: [String], process: ChildProcess?)] = [
            ("relay", ["tunnel", "127.0.0.1", "\(relay.port)"], relay),
            ("forwarder", ["forward", "127.0.0.1", "\(forwarder.port)", "--listen", "\(hostPort)"], forwarder),
            ("direct", ["direct"], nil),
        ]
        var runs: [String: [Run]] = [:]
        for round in 1 ... rounds {
            for target in targets {
                let cpuBefore = target.process?.cpuSeconds() ?? 0
                let started = DispatchTime.now().uptimeNanoseconds
                let figures = try drive(target.arguments, name: target.name)
                let wall = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
                var run = Run(figures)
                if let process = target.process { run.cpuPercent = 100 * (process.cpuSeconds() - cpuBefore) / max(wall, 0.001) }
                runs[target.name, default: []].append(run)
                FileHandle.standardError.write(Data(("retroarch: round \(round)/\(rounds) \(target.name): "
                    + "\(format(run.throughput, 0)) MB/s, p99 \(format(run.p99Us, 0)) us, \(run.errors) errors\n").utf8))
            }
        }
        report(relay: Median(runs["relay"]!), forwarder: Median(runs["forwarder"]!), direct: Median(runs["direct"]!))
    }

    /// One run's figures.
    struct Run {
        var throughput, p50Us, p99Us, maxUs, cpuPercent: Double
        var lost, errors: Int

        init(_ figures: LoadFigures) {
            throughput = figures.value("throughput_mb_s")
            p50Us = figures.value("rtt_p50_us")
            p99Us = figures.value("rtt_p99_us")
            maxUs = figures.value("rtt_max_us")
            lost = Int(figures.value("rtt_lost"))
            errors = Int(figures.value("errors"))
            cpuPercent = 0
        }
    }

    /// Each figure's median over the rounds (errors and lost messages: summed).
    struct Median {
        var throughput, p50Us, p99Us, maxUs, cpuPercent: Double
        var lost, errors: Int
        var throughputRange: (Double, Double)
        var p99Range: (Double, Double)

        init(_ runs: [Run]) {
            func median(_ values: [Double]) -> Double {
                let sorted = values.sorted()
                return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
            }
            throughput = median(runs.map(\.throughput))
            p50Us = median(runs.map(\.p50Us))
            p99Us = median(runs.map(\.p99Us))
            maxUs = median(runs.map(\.maxUs))
            cpuPercent = median(runs.map(\.cpuPercent))
            lost = runs.map(\.lost).reduce(0, +)
            errors = runs.map(\.errors).reduce(0, +)
            throughputRange = (runs.map(\.throughput).min()!, runs.map(\.throughput).max()!)
            p99Range = (runs.map(\.p99Us).min()!, runs.map(\.p99Us).max()!)
        }
    }

    private func drive(_ arguments: [String], name: String) throws -> LoadFigures {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: load)
        process.arguments = arguments + ["--sessions", "\(sessions)", "--seconds", "\(seconds)", "--latency-seconds", "\(latencySeconds)",
                                          "--window", "\(window)"]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw ValidationError("the load generator failed (status \(process.terminationStatus)) against \(name)")
        }
        return LoadFigures(output)
    }

    private func report(relay: Median, forwarder: Median, direct: Median) {
        print("RetroArch relay: \(sessions) sessions (host + client each) over tcp loopback; median of \(rounds) interleaved rounds; "
              + "throughput \(format(seconds, 0)) s (16 KiB writes, \(window / 1024) KiB window per direction), round trips \(format(latencySeconds, 0)) s "
              + "(64 bytes at 60 Hz, client -> host -> client)")
        print("These are ratios on a noisy, shared 2-core VM (the load generator shares the cores with what it measures): "
              + "compare the columns, not the absolute figures with another machine.")
        print(pad("figure", 30) + pad("relay", 12) + pad("C forwarder", 13) + pad("direct", 10) + "target")
        func row(_ name: String, _ value: (Median) -> Double, digits: Int = 0, _ note: String = "") {
            print(pad(name, 30) + pad(format(value(relay), digits), 12) + pad(format(value(forwarder), digits), 13)
                  + pad(format(value(direct), digits), 10) + note)
        }
        row("throughput (MB/s)", \.throughput, "(both directions received)")
        print(pad("  range over rounds", 30) + pad("\(format(relay.throughputRange.0, 0))-\(format(relay.throughputRange.1, 0))", 12)
              + pad("\(format(forwarder.throughputRange.0, 0))-\(format(forwarder.throughputRange.1, 0))", 13)
              + pad("\(format(direct.throughputRange.0, 0))-\(format(direct.throughputRange.1, 0))", 10))
        row("round trip p50 (us)", \.p50Us)
        row("round trip p99 (us)", \.p99Us)
        print(pad("  range over rounds", 30) + pad("\(format(relay.p99Range.0, 0))-\(format(relay.p99Range.1, 0))", 12)
              + pad("\(format(forwarder.p99Range.0, 0))-\(format(forwarder.p99Range.1, 0))", 13)
              + pad("\(format(direct.p99Range.0, 0))-\(format(direct.p99Range.1, 0))", 10))
        row("round trip max (us)", \.maxUs)
        print(pad("process CPU (% of a core)", 30) + pad(format(relay.cpuPercent, 0), 12) + pad(format(forwarder.cpuPercent, 0), 13)
              + pad("-", 10) + "(over the whole run: setup, round trips, throughput)")
        let share = relay.throughput / max(forwarder.throughput, 0.001)
        print(pad("relay / forwarder throughput", 30) + pad(format(share, 2), 35)
              + ">= 0.80: \(share >= 0.8 ? "PASS" : "MISS")")
        let relayAdded = relay.p99Us - direct.p99Us
        let forwarderAdded = forwarder.p99Us - direct.p99Us
        print(pad("added p99 over direct (us)", 30) + pad(format(relayAdded, 0), 12) + pad(format(forwarderAdded, 0), 13) + pad("-", 10)
              + "< 1000 us: relay \(relayAdded < 1000 ? "PASS" : "MISS"), forwarder \(forwarderAdded < 1000 ? "PASS" : "MISS")")
        for (name, figures) in [("relay", relay), ("C forwarder", forwarder), ("direct", direct)]
        where figures.errors > 0 || figures.lost > 0 {
            print("\(name): \(figures.errors) connection errors, \(figures.lost) round-trip messages lost (all rounds)")
        }
    }

    private func freePort() throws -> Int {
        guard let port = FreePort.tcp() else { throw ValidationError("no free loopback port") }
        return port
    }
}

/// netplay-sync with the RetroArch relay, or the C TCP forwarder, as a child process.
final class ChildProcess {
    /// The port RetroArch hosts and clients connect to.
    let port: Int
    private let child: BenchChild

    private init(port: Int, process: Process, directory: URL?) {
        self.port = port
        child = BenchChild(process: process, directory: directory)
    }

    static func startRelay(path: String) throws -> ChildProcess {
        guard let port = FreePort.tcp() else { throw ValidationError("no free loopback port") }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("netplay-bench-retroarch-\(UUID().uuidString)")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = ["--coordinator", "none", "--cluster-secret", TicketKeyRing.generate().text, "--data-dir", directory.path,
                             "--endpoint", FreePort.loopbackEndpoint(), "--events", "none", "--retroarch-port", "\(port)",
                             "--retroarch-bind", "127.0.0.1", "--instance", "bench-retroarch", "--no-replays", "--log-level", "warning",
                             // Every generated player comes from 127.0.0.1: lift the per-address share.
                             "--retroarch-limits", "per-address=1000000"]
        var environment = ProcessInfo.processInfo.environment
        environment["NETPLAY_TELEMETRY"] = "none"
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let child = ChildProcess(port: port, process: process, directory: directory)
        for _ in 0 ..< 200 where process.isRunning {
            if canConnect(port: port) { return child }
            usleep(50_000)
        }
        child.stop()
        throw ValidationError("netplay-sync did not listen for RetroArch on 127.0.0.1:\(port)")
    }

    static func startForwarder(path: String, targetPort: Int) throws -> ChildProcess {
        guard let port = FreePort.tcp() else { throw ValidationError("no free loopback port") }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = ["\(port)", "127.0.0.1", "\(targetPort)"]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        _ = pipe.fileHandleForReading.availableData  // "ready"
        guard process.isRunning else { throw ValidationError("the C forwarder did not start on port \(port)") }
        return ChildProcess(port: port, process: process, directory: nil)
    }

    /// True when a TCP connection to 127.0.0.1:`port` opens (it is closed at once).
    private static func canConnect(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }

    /// CPU seconds (user + system) the process used so far.
    func cpuSeconds() -> Double { child.cpuSeconds() }

    /// Stops it (SIGTERM, then SIGKILL) and removes its directory.
    func stop() { child.stop() }
}
