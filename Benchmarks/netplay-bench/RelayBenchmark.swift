import ArgumentParser
import Foundation
import InputSync
import NetplayAuth
import NetplayService
import NetplayWire

/// `netplay-bench relay`: the relay (netplay-sync, a separate process) under 1,000 concurrent
/// two-player sessions at 60 Hz, beside the same load through a plain C libzmq ROUTER forwarder
/// (Benchmarks/c/relay_forwarder.c): inputs delivered per second, one-way latency from a player's
/// send through the relay to the kernel's arrival stamp on the partner's socket (p50, p99; also
/// until the generator read it), the relay's CPU, and the most inputs per second each can forward
/// when players send as fast as a window allows.
///
/// Both targets get the same load generator (Benchmarks/c/relay_load.c: one TCP connection per
/// player speaking ZMTP 3.1 as a DEALER, with epoll and without libzmq, so a message costs the
/// generator one send()) and the same bytes from
/// players (an InputBatch envelope with an 8-byte send timestamp as the input); the C forwarder
/// passes them to the partner untouched, the relay validates, records, forwards
/// (InputBroadcast) and confirms them.
struct RelayBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relay",
        abstract: "Relay forwarding throughput and added latency versus a plain C ROUTER forwarder."
    )

    @Option(help: "Concurrent two-player sessions.") var sessions = 1000
    @Option(help: "Frames per second each session sends.") var rate = 60.0
    @Option(help: "Seconds measured at the sustained rate (after 2 s of warm-up).") var seconds = 8.0
    @Option(help: "Load generator threads.") var threads = 1
    @Option(help: "Sessions in the maximum-throughput run.") var floodSessions = 200
    @Option(help: "Frames a player may run ahead of its partner in the maximum-throughput run.") var window = 8
    @Option(help: "Seconds of the maximum-throughput run.") var floodSeconds = 4.0
    @OptionGroup var sync: SyncBinaryOption
    @Option(help: "Path of the C forwarder (built by `make bench`).") var cForwarder: String?
    @Option(help: "Path of the C load generator (built by `make bench`).") var load = "Benchmarks/bin/relay_load"

    @Flag(help: "Only measure the relay's logic in process (no sockets): nanoseconds per input, and the rebuild after a restart.") var coreOnly = false
    @Option(help: "Frames of the match whose replay the rebuild figure reads (216000: an hour at 60 Hz).") var rebuildFrames = 216_000

    func run() throws {
        signal(SIGPIPE, SIG_IGN)
        let core = try CoreBenchmark.measure(sessions: min(sessions, 1000), frames: 600)
        let rebuild = try RebuildBenchmark.measure(frames: rebuildFrames)
        if coreOnly {
            print("relay core (no sockets): \(format(core.nanosecondsPerInput, 0)) ns per input, "
                  + "\(format(core.nanosecondsPerSessionTick, 0)) ns per session per 5 ms timer tick, \(sessions) sessions")
            printRebuild(rebuild)
            return
        }
        let syncPath = sync.path
        guard FileManager.default.isExecutableFile(atPath: syncPath) else {
            throw ValidationError("netplay-sync not found at \(syncPath); build it (swift build -c release) or pass --sync-bin")
        }
        guard FileManager.default.isExecutableFile(atPath: load) else {
            throw ValidationError("the load generator is not built at \(load); run `make bench-c` or pass --load")
        }
        var swift = Figures()
        var c: Figures?
        do {
            let relay = try BenchTarget.startRelay(path: syncPath)
            defer { relay.stop() }
            swift = try measure(relay, load: load)
        }
        if let cForwarder {
            let forwarder = try BenchTarget.startForwarder(path: cForwarder)
            defer { forwarder.stop() }
            c = try measure(forwarder, load: load)
        }
        report(swift: swift, c: c)
        print(pad("relay logic per input (ns)", 34) + pad(format(core.nanosecondsPerInput, 0), 14) + pad("-", 14)
              + "in process, no sockets: decode, timeline, confirm, encode")
        print(pad("relay timers per session tick (ns)", 34) + pad(format(core.nanosecondsPerSessionTick, 0), 14) + pad("-", 14)
              + "in process: one session's share of the 5 ms timer")
        printRebuild(rebuild)
    }

    /// The rebuild after a restart, beside the file's raw read (the floor) and a whole decode.
    private func printRebuild(_ rebuild: RebuildBenchmark.Timing) {
        print("rebuild after a restart from the replay of a \(rebuild.frames)-frame match (\(format(Double(rebuild.fileBytes) / 1e6, 1)) MB), "
              + "medians of 7 alternating runs: the resumed attach that rebuilds it \(format(rebuild.rebuildMs, 2)) ms (on the relay's one thread), "
              + "\(format(rebuild.rebuildMs / max(rebuild.rawReadMs, 0.001), 2))x reading the whole file (\(format(rebuild.rawReadMs, 2)) ms); "
              + "decoding the whole file, as a rebuild did before it read only the tail: \(format(rebuild.wholeDecodeMs, 2)) ms")
        print("progress proof (HMAC-SHA256 under each cluster key, one key here; one proof per session per statistics interval): \(format(rebuild.proofNs, 0)) ns each")
    }

    struct Figures {
        var sustainedSent = 0.0
        var sustainedDelivered = 0.0
        var sustainedReceived = 0.0
        var p50Us = 0.0
        var p99Us = 0.0
        var maxUs = 0.0
        var readP50Us = 0.0
        var readP99Us = 0.0
        var cpuPercent = 0.0
        var floodDelivered = 0.0
        var errors = 0
        /// Players' connections that failed (reset, closed by the target) in the 60 Hz run and
        /// the maximum-throughput run: their inputs are missing from the figures.
        var connectionErrors = 0
    }

    private func measure(_ target: BenchTarget, load: String) throws -> Figures {
        var figures = Figures()
        // CPU over the whole run (connects and attaches included), divided by its wall time.
        let cpuBefore = target.cpuSeconds()
        let started = DispatchTime.now().uptimeNanoseconds
        let sustained = try target.drive(load: load, sessions: sessions, rate: rate, warmup: 2, seconds: seconds,
                                         window: 0, threads: threads, sessionOffset: 0)
        let wall = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        figures.cpuPercent = 100 * (target.cpuSeconds() - cpuBefore) / max(wall, 0.001)
        figures.sustainedSent = sustained.value("sent") / seconds
        figures.sustainedDelivered = sustained.value("delivered") / seconds
        figures.sustainedReceived = sustained.value("received") / seconds
        figures.p50Us = sustained.value("p50_us")
        figures.p99Us = sustained.value("p99_us")
        figures.maxUs = sustained.value("max_us")
        figures.readP50Us = sustained.value("read_p50_us")
        figures.readP99Us = sustained.value("read_p99_us")
        figures.errors = Int(sustained.value("errors"))
        figures.connectionErrors = Int(sustained.value("connection_errors"))
        let flood = try target.drive(load: load, sessions: floodSessions, rate: rate, warmup: 1, seconds: floodSeconds,
                                     window: window, threads: threads, sessionOffset: sessions)
        figures.floodDelivered = flood.value("delivered") / floodSeconds
        figures.errors += Int(flood.value("errors"))
        figures.connectionErrors += Int(flood.value("connection_errors"))
        return figures
    }

    private func report(swift: Figures, c: Figures?) {
        let expected = Double(sessions) * 2 * rate
        print("Relay: \(sessions) two-player sessions at \(format(rate, 0)) Hz over tcp loopback, \(format(seconds, 0)) s measured, "
              + "load generator \(threads) threads; max throughput: \(floodSessions) sessions, window \(window)")
        print(pad("figure", 34) + pad("Swift relay", 14) + pad("C forwarder", 14) + "target")
        let sustainedOK = swift.sustainedDelivered >= 0.99 * expected && swift.errors == 0
        print(pad("inputs delivered/s (60 Hz load)", 34) + pad(format(swift.sustainedDelivered, 0), 14)
              + pad(c.map { format($0.sustainedDelivered, 0) } ?? "n/a", 14)
              + "all \(format(expected, 0)) sustained: \(sustainedOK ? "PASS" : "MISS")")
        print(pad("messages to players/s", 34) + pad(format(swift.sustainedReceived, 0), 14)
              + pad(c.map { format($0.sustainedReceived, 0) } ?? "n/a", 14) + "(every message a player received)")
        print(pad("latency p50 (us)", 34) + pad(format(swift.p50Us, 0), 14) + pad(c.map { format($0.p50Us, 0) } ?? "n/a", 14)
              + "player's send -> relay -> partner's socket")
        let latencyOK = swift.p99Us < 1000
        print(pad("latency p99 (us)", 34) + pad(format(swift.p99Us, 0), 14) + pad(c.map { format($0.p99Us, 0) } ?? "n/a", 14)
              + "< 1000 us: \(latencyOK ? "PASS" : "MISS")")
        if let c {
            let added = swift.p99Us - c.p99Us
            print(pad("added p99 over C (us)", 34) + pad(format(added, 0), 14) + pad("-", 14) + "(relay p99 - forwarder p99)")
        }
        print(pad("latency max (us)", 34) + pad(format(swift.maxUs, 0), 14) + pad(c.map { format($0.maxUs, 0) } ?? "n/a", 14))
        print(pad("read by the generator p50 (us)", 34) + pad(format(swift.readP50Us, 0), 14)
              + pad(c.map { format($0.readP50Us, 0) } ?? "n/a", 14) + "(latency + the generator's own read delay)")
        print(pad("read by the generator p99 (us)", 34) + pad(format(swift.readP99Us, 0), 14)
              + pad(c.map { format($0.readP99Us, 0) } ?? "n/a", 14))
        print(pad("relay CPU (% of a core)", 34) + pad(format(swift.cpuPercent, 0), 14) + pad(c.map { format($0.cpuPercent, 0) } ?? "n/a", 14))
        let throughputVerdict = c.map { swift.floodDelivered >= 0.5 * $0.floodDelivered ? "PASS" : "MISS" } ?? "-"
        print(pad("max throughput (inputs/s)", 34) + pad(format(swift.floodDelivered, 0), 14)
              + pad(c.map { format($0.floodDelivered, 0) } ?? "n/a", 14)
              + ">= 50% of C (\(c.map { format(100 * swift.floodDelivered / max($0.floodDelivered, 1), 1) + "%" } ?? "-")): \(throughputVerdict)")
        if swift.errors > 0 { print("relay errors received: \(swift.errors)") }
        // A run whose connections failed measured fewer players than it says: named, not averaged in.
        for (name, figures) in [("Swift relay", swift)] + (c.map { [("C forwarder", $0)] } ?? []) where figures.connectionErrors > 0 {
            print("\(name): \(figures.connectionErrors) player connections failed during the runs (reset or closed): "
                  + "its figures leave those players out; run again")
        }
    }
}

/// A relay under test: netplay-sync or the C forwarder, as a child process.
final class BenchTarget: @unchecked Sendable {
    let endpoint: String
    let isRelay: Bool
    let keyRing: TicketKeyRing
    private let child: BenchChild

    private init(endpoint: String, isRelay: Bool, keyRing: TicketKeyRing, process: Process, directory: URL?) {
        self.endpoint = endpoint
        self.isRelay = isRelay
        self.keyRing = keyRing
        child = BenchChild(process: process, directory: directory)
    }

    static func startRelay(path: String) throws -> BenchTarget {
        let keyRing = TicketKeyRing.generate()
        let endpoint = FreePort.loopbackEndpoint()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("netplay-bench-relay-\(UUID().uuidString)")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = ["--endpoint", endpoint, "--events", "none", "--telemetry", "none", "--coordinator", "none",
                             "--instance", "bench-relay", "--data-dir", directory.path, "--cluster-secret", keyRing.text,
                             "--no-replays", "--log-level", "warning"]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let target = BenchTarget(endpoint: endpoint, isRelay: true, keyRing: keyRing, process: process, directory: directory)
        let probe = try BlockingClient(endpoint: endpoint, timeout: 0.2)
        for _ in 0 ..< 100 {
            if (try? probe.request(.healthRequest(HealthRequest()))) != nil { return target }
            usleep(50_000)
        }
        target.stop()
        throw ValidationError("netplay-sync did not start at \(endpoint)")
    }

    static func startForwarder(path: String) throws -> BenchTarget {
        let endpoint = FreePort.loopbackEndpoint()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = [endpoint]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        _ = pipe.fileHandleForReading.availableData  // "ready"
        return BenchTarget(endpoint: endpoint, isRelay: false, keyRing: TicketKeyRing.generate(), process: process, directory: nil)
    }

    /// Runs the C load generator against this target and returns its figures.
    func drive(load: String, sessions: Int, rate: Double, warmup: Double, seconds: Double, window: Int, threads: Int,
               sessionOffset: Int) throws -> LoadFigures {
        var attachFile = "-"
        if isRelay {
            let params = SyncParams(inputSize: 8, maxPlayers: 2, frameDelay: 0, frameRateMhz: UInt32(rate * 1000),
                                    predictionWindow: 8, lagToleranceFrames: 60, checksumIntervalFrames: 0)
            let signer = JoinTicketSigner(keyRing: keyRing)
            var bytes: [UInt8] = []
            for session in 0 ..< sessions {
                for slot in 1 ... 2 {
                    let ticket = try signer.issue(sessionId: "bench-\(session + sessionOffset)", participantId: "p\(slot)",
                                                  role: .player, slot: UInt32(slot), relayId: "bench-relay",
                                                  relayEndpoint: endpoint, params: params, name: "p\(slot)", ttlMs: 600_000)
                    let envelope = try Envelope(requestId: 1, body: .attachRequest(AttachRequest(ticket: ticket, protocolVersion: SyncProtocol.current))).encoded()
                    let length = UInt32(envelope.count)
                    bytes += [UInt8(length >> 24), UInt8((length >> 16) & 0xFF), UInt8((length >> 8) & 0xFF), UInt8(length & 0xFF)]
                    bytes += envelope
                }
            }
            attachFile = FileManager.default.temporaryDirectory.appendingPathComponent("netplay-bench-attach-\(UUID().uuidString)").path
            guard FileManager.default.createFile(atPath: attachFile, contents: Data(bytes)) else {
                throw ValidationError("cannot write \(attachFile)")
            }
        }
        defer { if attachFile != "-" { try? FileManager.default.removeItem(atPath: attachFile) } }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: load)
        process.arguments = [isRelay ? "relay" : "forwarder", endpoint, attachFile, "\(sessions)", "\(rate)", "\(warmup)",
                             "\(seconds)", "\(window)", "\(threads)"]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw ValidationError("the load generator failed (status \(process.terminationStatus)) against \(isRelay ? "the relay" : "the C forwarder")")
        }
        return LoadFigures(output)
    }

    /// CPU seconds (user + system) the process used so far.
    func cpuSeconds() -> Double { child.cpuSeconds() }

    /// Stops it (SIGTERM, then SIGKILL) and removes its directory.
    func stop() { child.stop() }
}


/// The load generator's one-line result: `key=value ...`.
struct LoadFigures {
    var values: [String: Double] = [:]

    init(_ line: String) {
        for pair in line.split(whereSeparator: { $0 == " " || $0 == "\n" }) {
            let parts = pair.split(separator: "=", maxSplits: 1)
            if parts.count == 2, let value = Double(parts[1]) { values[String(parts[0])] = value }
        }
    }

    func value(_ key: String) -> Double { values[key] ?? 0 }
}

/// The relay's logic alone: a ``RelayCore`` fed encoded InputBatch frames through its hot path,
/// sending into a transport that only counts bytes.
enum CoreBenchmark {
    final class CountingTransport: RelayTransport {
        var messages = 0
        var bytes = 0
        func send(_ body: Envelope.Body, to peer: PeerAddress) { messages += 1 }
        func sendEncoded(_ envelope: UnsafeRawBufferPointer, to peer: PeerAddress) {
            messages += 1
            bytes += envelope.count
        }
        func publish(topic: String, _ body: Envelope.Body, severity: Severity, message: String, sessionId: String) {}
        func pushStats(_ stats: SessionStats) {}
    }

    struct Timing {
        /// Handling one player's batch (decode, timeline, confirm, encode, send).
        var nanosecondsPerInput: Double
        /// One session's share of one run of the relay's 5 ms timer.
        var nanosecondsPerSessionTick: Double
    }

    static func measure(sessions: Int, frames: Int) throws -> Timing {
        let keyRing = TicketKeyRing.generate()
        let transport = CountingTransport()
        var configuration = RelayConfiguration(relayId: "bench-core", advertisedEndpoint: "tcp://127.0.0.1:1")
        configuration.replayDirectory = nil
        configuration.startSyncSamples = 0  // the benchmark's peers answer no pings
        let core = RelayCore(configuration: configuration, verifier: JoinTicketVerifier(keyRing: keyRing), transport: transport)
        let params = SyncParams(inputSize: 8, maxPlayers: 2, frameDelay: 0, frameRateMhz: 60_000, predictionWindow: 8,
                                lagToleranceFrames: 60, checksumIntervalFrames: 0)
        let signer = JoinTicketSigner(keyRing: keyRing)
        var now: UInt64 = 1_000
        var peers: [[PeerAddress]] = []
        for session in 0 ..< sessions {
            var pair: [PeerAddress] = []
            for slot in 1 ... 2 {
                let peer = PeerAddress(routingId: Array("s\(session)-\(slot)".utf8))
                let ticket = try signer.issue(sessionId: "core-\(session)", participantId: "p\(slot)", role: .player,
                                              slot: UInt32(slot), relayId: "bench-core", relayEndpoint: "", params: params,
                                              name: "p", ttlMs: 600_000)
                _ = try core.handle(Envelope(body: .attachRequest(AttachRequest(ticket: ticket, protocolVersion: SyncProtocol.current))),
                                    from: peer, now: now)
                pair.append(peer)
            }
            peers.append(pair)
        }
        // Every frame of every session: both players' batches, then the relay's timers as the
        // service runs them (every 5 ms: three ticks per 60 Hz frame), timed apart.
        var inputs = 0
        var ticks = 0
        var inputNanoseconds: UInt64 = 0
        var tickNanoseconds: UInt64 = 0
        for frame in 0 ..< frames {
            let batches = try (1 ... 2).map { slot in
                try Envelope(body: .inputBatch(InputBatch(slot: UInt32(slot), startFrame: UInt32(frame), inputSize: 8,
                                                          inputs: Array(repeating: UInt8(frame & 0xFF), count: 8),
                                                          awaitedFrame: UInt32(frame), currentFrame: UInt32(frame)))).encoded()
            }
            let started = DispatchTime.now().uptimeNanoseconds
            for pair in peers {
                for slot in 0 ..< 2 {
                    batches[slot].withUnsafeBytes { raw in _ = core.handleFast(raw, from: pair[slot], now: now) }
                    inputs += 1
                }
            }
            let ticked = DispatchTime.now().uptimeNanoseconds
            inputNanoseconds += ticked - started
            for step: UInt64 in [5, 5, 6] {
                now += step
                core.tick(now: now)
                ticks += 1
            }
            tickNanoseconds += DispatchTime.now().uptimeNanoseconds - ticked
        }
        return Timing(nanosecondsPerInput: Double(inputNanoseconds) / Double(max(inputs, 1)),
                      nanosecondsPerSessionTick: Double(tickNanoseconds) / Double(max(ticks * sessions, 1)))
    }
}
