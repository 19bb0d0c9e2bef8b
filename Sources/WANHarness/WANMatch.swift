import Foundation
import NetplayAuth
import NetplayService
#if canImport(Glibc)
import Glibc
#endif

/// One match played for real across a ``WANLab``: discovery, a coordinator and a relay in the
/// root namespace on the lab's service address, and every player a `netplay-peer` process in its
/// own namespace behind the same delay, jitter and loss. Used by the end-to-end tests and by
/// `netplay-bench wan`.
public struct WANScenario: Sendable, CustomStringConvertible {
    /// One-way delay between each player and the relay, each direction, milliseconds.
    public var delayMs: Double
    /// Uniform jitter added to each packet's delay (order is kept), milliseconds.
    public var jitterMs: Double
    /// Random loss each way, percent.
    public var lossPercent: Double
    /// Players (2 ... 8).
    public var players: Int
    /// Frames to play (a multiple of 60: the last is a checksum frame).
    public var frames: Int
    /// A libretro core and its content instead of the arena sample game.
    public var core: (path: String, content: String)?
    /// `netplay-peer --frame-delay`: "auto" or a number of frames.
    public var frameDelay = "auto"
    /// `netplay-peer --paths`: connections per player (nil: netplay-peer's default).
    public var paths: Int?
    /// `netplay-peer --pacing`: frame-rate (its default) or whole-frames.
    public var pacing = "frame-rate"

    /// A scenario with the arena game.
    public init(delayMs: Double, jitterMs: Double = 0, lossPercent: Double = 0, players: Int = 2, frames: Int = 600) {
        self.delayMs = delayMs
        self.jitterMs = jitterMs
        self.lossPercent = lossPercent
        self.players = players
        self.frames = frames
    }

    public var description: String {
        "\(players)p \(core == nil ? "arena" : "core") one-way \(Int(delayMs))±\(Int(jitterMs)) ms loss \(lossPercent)%"
            + " delay \(frameDelay)\(paths.map { " paths \($0)" } ?? "")"
    }
}

/// What one player's `netplay-peer` reported at the end of a ``WANScenario``.
public struct WANPlayerFigures: Sendable, CustomStringConvertible {
    /// Every `key=value` of the RESULT line.
    public var fields: [String: String]

    /// The last RESULT line of a netplay-peer's `log`, or nil when there is none.
    public init?(log: String) {
        guard let line = log.split(separator: "\n").last(where: { $0.hasPrefix("RESULT ") }) else { return nil }
        fields = [:]
        for pair in line.dropFirst("RESULT ".count).split(separator: " ") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { fields[String(parts[0])] = String(parts[1]) }
        }
    }

    /// The fields the figures below read. A RESULT without one of them, or with one that is not a
    /// whole number, is refused by ``WANMatch``: read as -1, a renamed field would pass every
    /// bound a test sets on it.
    public static let requiredFields = ["slot", "rollbacks", "rollback_frames", "max_rollback", "own_substituted",
                                        "stalls_over_2", "max_stall_ms", "frame_delay", "relay_moves"]

    /// The ``requiredFields`` missing, or not whole numbers, and `checksum` when it is missing.
    public var missingFields: [String] {
        Self.requiredFields.filter { Int(fields[$0] ?? "") == nil } + (fields["checksum"] == nil ? ["checksum"] : [])
    }

    /// An integer field (-1 when missing; a RESULT ``WANMatch`` returns has every one of the
    /// ``requiredFields``).
    public func int(_ key: String) -> Int { Int(fields[key] ?? "") ?? -1 }
    /// The player's slot.
    public var slot: Int { int("slot") }
    /// The final checksum as printed.
    public var checksum: String { fields["checksum"] ?? "?" }
    /// Rollbacks and the frames they re-simulated.
    public var rollbacks: Int { int("rollbacks") }
    /// The mean rollback length, frames (0 without rollbacks).
    public var meanRollback: Double { rollbacks > 0 ? Double(int("rollback_frames")) / Double(rollbacks) : 0 }
    /// The longest rollback, frames.
    public var maxRollback: Int { int("max_rollback") }
    /// This player's own inputs the relay substituted.
    public var ownSubstituted: Int { int("own_substituted") }
    /// Stalls of more than two frames after the first frame.
    public var stallsOverTwoFrames: Int { int("stalls_over_2") }
    /// The longest stall after the first frame, ms.
    public var maxStallMs: Int { int("max_stall_ms") }
    /// The input delay in use at the end, frames.
    public var frameDelay: Int { int("frame_delay") }
    /// The relay endpoint the player ended on.
    public var relay: String { fields["relay"] ?? "?" }
    /// How often the session moved to another relay under the player.
    public var relayMoves: Int { int("relay_moves") }

    public var description: String {
        "P\(slot): rollback mean \(String(format: "%.2f", meanRollback)) max \(maxRollback), own substituted \(ownSubstituted), "
            + "stalls>2f \(stallsOverTwoFrames) (max \(maxStallMs) ms), delay \(frameDelay), checksum \(checksum)"
    }
}

/// The outcome of a ``WANScenario``: every player's figures and the physical floor.
public struct WANMatchResult: Sendable, CustomStringConvertible {
    /// The scenario played.
    public var scenario: WANScenario
    /// Each player's figures, by slot.
    public var players: [WANPlayerFigures]
    /// Frame duration of the match, ms.
    public var frameMs: Double

    /// The rollback a perfectly synchronised player cannot avoid: an input travels player ->
    /// relay -> player, 2 × (delay + jitter) ms, less the input delay.
    public var floorFrames: Double {
        let delay = Double(players.map(\.frameDelay).max() ?? 0)
        return max(0, 2 * (scenario.delayMs + scenario.jitterMs) / frameMs - delay)
    }
    /// The largest difference between two players' mean rollbacks, frames.
    public var meanRollbackSpread: Double {
        let means = players.map(\.meanRollback)
        return (means.max() ?? 0) - (means.min() ?? 0)
    }
    /// Whether every player ended with the same checksum.
    public var checksumsAgree: Bool { Set(players.map(\.checksum)).count == 1 && players.first?.checksum != "?" }

    public var description: String {
        "\(scenario): floor \(String(format: "%.1f", floorFrames)) frames; " + players.map(\.description).joined(separator: "; ")
    }
}

/// Plays ``WANScenario``s on a ``WANLab``.
public enum WANMatch {
    /// Plays `scenario` with the binaries in `binDirectory` (netplay-discovery, -coordinator,
    /// -sync, -peer) on a fresh lab, and returns every player's figures. Throws when a process
    /// fails or a player reports nothing within `timeoutSeconds`; the logs are kept in the error.
    /// `keepLogsIn`: a directory that receives every process's log (kept after the lab is gone).
    public static func run(_ scenario: WANScenario, binDirectory: String, timeoutSeconds: Double = 120,
                           keepLogsIn: String? = nil) throws -> WANMatchResult {
        let lab = try WANLab(wanlinkPath: "\(binDirectory)/netplay-wanlink")
        let root = "\(lab.directory)/cluster"
        defer {
            if let keepLogsIn {
                try? FileManager.default.createDirectory(atPath: keepLogsIn, withIntermediateDirectories: true)
                for name in (try? FileManager.default.contentsOfDirectory(atPath: keepLogsIn)) ?? [] where name.hasSuffix(".log") {
                    try? FileManager.default.removeItem(atPath: "\(keepLogsIn)/\(name)")
                }
                for name in (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [] where name.hasSuffix(".log") {
                    try? FileManager.default.removeItem(atPath: "\(keepLogsIn)/\(name)")
                    try? FileManager.default.copyItem(atPath: "\(root)/\(name)", toPath: "\(keepLogsIn)/\(name)")
                }
            }
            lab.tearDown()
        }
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        var services: [Process] = []
        // A service stuck in its shutdown is killed after the grace time rather than waited for.
        defer { LoggedProcess.stop(services.reversed()) }
        let address = lab.serviceAddress
        let discovery = "tcp://\(address):\(try freePort(on: address))"
        let coordinator = "tcp://\(address):\(try freePort(on: address))"
        let relay = "tcp://\(address):\(try freePort(on: address))"
        let plan = ClusterLaunchPlan(discovery: discovery, coordinator: coordinator, dataRoot: root, secret: TicketKeyRing.generate().text,
                                     common: ["--telemetry", "none", "--log-level", "notice"])
        func launch(_ name: String, _ arguments: [String]) throws {
            services.append(try LoggedProcess.launch("\(binDirectory)/\(name)", arguments, log: "\(root)/\(name).log"))
        }
        try launch("netplay-discovery", plan.discoveryArguments(instance: "wan-discovery"))
        try launch("netplay-coordinator", plan.coordinatorArguments(instance: "wan-coordinator"))
        try launch("netplay-sync", plan.relayArguments(endpoint: relay, instance: "wan-sync", extra: ["--log-level", "info", "--no-replays"]))
        // Ready once the relay registered (the coordinator then has a relay to give the host).
        try waitFor(log: "\(root)/netplay-sync.log", containing: "registered", seconds: 20, services: services)

        var peers: [(WANPeer, String)] = []
        for index in 0 ..< scenario.players {
            let peer = try lab.addPeer(delayMs: scenario.delayMs, jitterMs: scenario.jitterMs, lossPercent: scenario.lossPercent)
            peers.append((peer, "\(root)/peer\(index + 1).log"))
        }
        var common = ["--discovery", discovery, "--coordinator", coordinator, "--room", "wan-\(lab.tag)",
                      "--frames", "\(scenario.frames)", "--timeout", "\(Int(timeoutSeconds))", "--pacing", scenario.pacing, "--hud-every", "1"]
        if let paths = scenario.paths { common += ["--paths", "\(paths)"] }
        if let core = scenario.core { common += ["--core", core.path, "--content", core.content] }
        let peerBinary = "\(binDirectory)/netplay-peer"
        try peers[0].0.launch(peerBinary, ["host", "--players", "\(scenario.players)", "--frame-delay", scenario.frameDelay,
                                           "--name", "P1", "--input-seed", "11"] + common, log: peers[0].1)
        usleep(300_000)  // the room is listed a round trip after the host asked
        for index in 1 ..< peers.count {
            try peers[index].0.launch(peerBinary, ["join", "--name", "P\(index + 1)", "--input-seed", "\(11 + index)"] + common,
                                      log: peers[index].1)
        }
        let deadline = Date().addingTimeInterval(timeoutSeconds + 10)
        let figures: [WANPlayerFigures]
        do {
            figures = try peers.map { peer in try awaitResult(log: peer.1, until: deadline, what: "\(scenario): a player") }
        } catch let error as WANHarnessError {
            // One player's silence is usually explained by another's log or a service's: show them all.
            let logs = peers.map(\.1) + ["netplay-discovery", "netplay-coordinator", "netplay-sync"].map { "\(root)/\($0).log" }
            throw WANHarnessError(error.description + "\n" + logs.map { Self.lastLines(of: $0) }.joined(separator: "\n"))
        }
        let frameMs = 1000 / (scenario.core == nil ? 60 : 60.0988)
        return WANMatchResult(scenario: scenario, players: figures.sorted { $0.slot < $1.slot }, frameMs: frameMs)
    }

    /// The RESULT a netplay-peer writes to `log`, waiting for it until `deadline`; throws
    /// (`what` reported nothing, with the log's end) when the peer failed or the time is up.
    static func awaitResult(log: String, until deadline: Date, what: String) throws -> WANPlayerFigures {
        while true {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            if let result = WANPlayerFigures(log: text) {
                guard result.missingFields.isEmpty else {
                    throw WANHarnessError("\(what) reported a RESULT without \(result.missingFields.joined(separator: ", ")): "
                                          + "nothing could be measured from it")
                }
                return result
            }
            if Date() > deadline || text.contains("netplay-peer: error") || text.contains("Error:") {
                throw WANHarnessError("\(what) reported nothing; its log ends:\n" + text.suffix(3_000))
            }
            usleep(100_000)
        }
    }

    /// The last lines of `log` that are not HUD lines, headed by its name.
    static func lastLines(of log: String, count: Int = 8) -> String {
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        let lines = text.split(separator: "\n").filter { !$0.hasPrefix("HUD ") }.suffix(count)
        return "--- \((log as NSString).lastPathComponent):\n" + lines.map { String($0.prefix(300)) }.joined(separator: "\n")
    }

    static func waitFor(log: String, containing text: String, seconds: Double, services: [Process]) throws {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            let content = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            if content.contains(text) { return }
            if let dead = services.first(where: { !$0.isRunning }) {
                throw WANHarnessError("\(dead.executableURL?.lastPathComponent ?? "a service") exited (\(dead.terminationStatus)); see \(log)")
            }
            if Date() > deadline { throw WANHarnessError("'\(text)' did not appear in \(log) within \(Int(seconds)) s") }
            usleep(50_000)
        }
    }

    /// A TCP port free on `address` now.
    public static func freePort(on address: String) throws -> Int {
        guard let port = FreePort.tcp(on: address) else { throw WANHarnessError("no TCP port can be bound on \(address)") }
        return port
    }
}
