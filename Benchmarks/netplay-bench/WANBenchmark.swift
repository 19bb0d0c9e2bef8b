import ArgumentParser
import Foundation
import Libretro
import WANHarness
import SystemTools

/// `netplay-bench wan`: real matches on the real-path harness (network namespaces, TUN devices
/// joined by netplay-wanlink, iptables loss) across a grid of one-way delays, losses and player
/// counts, with each player's rollbacks, substituted inputs and stalls beside the floor.
struct WANBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wan",
        abstract: "Matches on the real-path WAN harness: rollbacks, substitutions and stalls beside the floor."
    )

    @Option(help: "One-way delays to the relay, ms (comma-separated).") var delays = "10,50,100"
    @Option(help: "Random loss each way, percent (comma-separated).") var losses = "0,2,5"
    @Option(help: "Player counts (comma-separated).") var players = "2,4"
    @Option(help: "Jitter as a fraction of the delay (50 ms -> ±5 ms at 0.1).") var jitterFraction = 0.1
    @Option(help: "Frames per match (a multiple of 60).") var frames = 900
    @Option(help: "Input delay: auto or frames.") var frameDelay = "auto"
    @Option(help: "Connections per player (netplay-peer --paths); default: netplay-peer's.") var paths: Int?
    @Option(help: "Time sync pacing: frame-rate or whole-frames.") var pacing = "frame-rate"
    @Flag(help: "Play the nestopia core (the NES test program) instead of the arena game.") var core = false
    @Option(help: "Where the netplay binaries are (default: beside this one).") var binDirectory: String?
    @Option(help: "Keep every process's log of the last match here.") var keepLogs: String?

    func validate() throws {
        guard frames > 0, frames % 60 == 0 else { throw ValidationError("--frames must be a positive multiple of 60") }
        guard frameDelay == "auto" || Int(frameDelay) != nil else { throw ValidationError("--frame-delay must be auto or a number") }
    }

    func run() throws {
        if let reason = WANLab.unavailableReason { throw ValidationError("the WAN harness cannot run here: \(reason)") }
        let bin = binDirectory ?? URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent().path
        func list(_ text: String) throws -> [Double] {
            try text.split(separator: ",").map { part in
                guard let value = Double(part.trimmingCharacters(in: .whitespaces)) else { throw ValidationError("not a number: \(part)") }
                return value
            }
        }
        var coreFiles: (path: String, content: String)?
        if core {
            guard let path = LibretroCore.installedCore(named: "nestopia") else {
                throw ValidationError("nestopia is not installed (apt-get install libretro-nestopia)")
            }
            coreFiles = (path, try Self.buildTestProgram())
        }
        print("WAN harness: real kernel path per player (netns + TUN + netplay-wanlink delay, iptables loss), "
              + "\(core ? "nestopia" : "arena"), \(frames) frames, delay \(frameDelay), pacing \(pacing)")
        print("floor = 2 x (one-way + jitter) / frame - input delay: what a perfectly synchronised player must predict")
        print("delay  loss  players  input-delay  floor  mean rollback (each player)      max rollback  subst  stalls>2f  max stall  checksums")
        for delay in try list(delays) {
            for loss in try list(losses) {
                for count in try list(players) {
                    var scenario = WANScenario(delayMs: delay, jitterMs: (delay * jitterFraction).rounded(), lossPercent: loss,
                                               players: Int(count), frames: frames)
                    scenario.core = coreFiles
                    scenario.frameDelay = frameDelay
                    scenario.paths = paths
                    scenario.pacing = pacing
                    do {
                        let result = try WANMatch.run(scenario, binDirectory: bin, timeoutSeconds: Double(frames) / 60 * 4 + 60,
                                                           keepLogsIn: keepLogs)
                        let means = result.players.map { String(format: "%.1f", $0.meanRollback) }.joined(separator: "/")
                        let maxima = result.players.map { "\($0.maxRollback)" }.joined(separator: "/")
                        let substituted = result.players.map(\.ownSubstituted).reduce(0, +)
                        let stalls = result.players.map(\.stallsOverTwoFrames).reduce(0, +)
                        let longest = result.players.map(\.maxStallMs).max() ?? 0
                        let delays = Set(result.players.map(\.frameDelay)).sorted().map(String.init).joined(separator: "/")
                        print(String(format: "%5.0f  %3.0f%%  %7d  %11@  %5.1f  %-28@  %-12@  %5d  %9d  %6d ms  %@",
                                     delay, loss, Int(count), delays as NSString, result.floorFrames, means as NSString,
                                     maxima as NSString, substituted, stalls, longest, (result.checksumsAgree ? "same" : "DIFFER") as NSString))
                    } catch {
                        print(String(format: "%5.0f  %3.0f%%  %7d  failed: %@", delay, loss, Int(count), "\(error)".prefix(300).description as NSString))
                    }
                }
            }
        }
    }

    /// Assembles the NES test program into a temporary iNES file.
    static func buildTestProgram() throws -> String {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("netplay_wan-\(getpid()).nes").path
        try NESTestProgram.build(output: output)
        return output
    }
}
