import Foundation
import InputSync
import NetplayService
import NetplayTestSupport
import NetplayWire
import Testing

/// Discovery, coordinator and one relay as real processes on free loopback ports, sharing a
/// cluster secret, plus helpers to run netplay-peer processes against them.
final class PlayCluster: TestCluster, @unchecked Sendable {
    static let secret = String(repeating: "a7", count: 32)

    /// `curveSecretKey` (Z85): every service encrypts its public endpoint with it
    /// (NETPLAY_CURVE_SECRET_KEY); nil: plain. `relayArguments`: netplay-sync's own flags.
    init(curveSecretKey: String? = nil, relayArguments: [String] = []) throws {
        var options = Options(secret: Self.secret)
        options.name = "play"
        options.coordinatorArguments = ["--password-cost", "minimum", "--relay-refresh-interval", "0.5"]
        options.relayArguments = relayArguments
        options.curveSecretKey = curveSecretKey
        try super.init(options)
    }

    /// Creates a relay session for the arena at the coordinator, hosted by "alice".
    func createSession(room: String, maxPlayers: UInt32, coordinator: BlockingClient) throws -> CreateSessionResponse {
        let settings = SessionSettings(roomName: room, content: Self.arena, transport: .relay, maxPlayers: maxPlayers,
                                       inputSize: 1, frameRateMhz: 60_000, predictionWindow: 8, lagToleranceFrames: 12,
                                       checksumIntervalFrames: 60)
        guard case .createSessionResponse(let created) = try coordinator.request(.createSessionRequest(
            CreateSessionRequest(settings: settings, hostName: "alice"))), created.ticket != nil else {
            throw HarnessError("the coordinator created no session with a ticket for room \(room)")
        }
        return created
    }

    /// The sample arena as content.
    static let arena = ContentInfo(gameName: "Arena", coreId: "netplay.games.arena", coreVersion: "1")

    /// Starts a netplay-peer hosting `room` for `players` with the shared match settings, and
    /// waits until it holds a session.
    func host(room: String, players: Int, seed: Int,
              sourceLocation: SourceLocation = #_sourceLocation) throws -> ServiceProcess {
        let host = try peer("host", ["--players", "\(players)"] + Match.host + Match.common(room: room, seed: seed))
        #expect(host.waitFor("session s-", within: 30), "host did not get a session: \(host.log)",
                sourceLocation: sourceLocation)
        return host
    }

    /// A host and one joiner in `room`, once their match runs.
    func runningPair(room: String, hostSeed: Int, joinSeed: Int,
                     sourceLocation: SourceLocation = #_sourceLocation) throws -> (host: ServiceProcess, join: ServiceProcess) {
        let host = try host(room: room, players: 2, seed: hostSeed, sourceLocation: sourceLocation)
        let join = try peer("join", Match.common(room: room, seed: joinSeed))
        #expect(host.waitFor("match running", within: 60), "the match did not start: \(host.log)\n\(join.log)",
                sourceLocation: sourceLocation)
        return (host, join)
    }

    /// Waits (20 s at most) for the relay to finish the match's one replay file, replays it with
    /// `netplay-peer replay` up to `frames`, and returns the replayer's result (nil, with the
    /// failure recorded, when there is no finished file or no result).
    func replayTheMatch(frames: Int, files: Int = 1) throws -> PeerResult? {
        // A restart ends a file and starts the next from its state: the last one ends the match.
        let finished = eventually(within: 20) {
            replayFiles.count == files && replayFiles.allSatisfy { (try? ReplayFile(contentsOf: URL(fileURLWithPath: $0)))?.footer != nil }
        }
        #expect(finished, "replays: \(replayFiles)\n\(relay?.log.suffix(2000) ?? "")")
        let file = try #require(try replayFiles.max { try ReplayFile(contentsOf: URL(fileURLWithPath: $0)).startFrame
                                                        < ReplayFile(contentsOf: URL(fileURLWithPath: $1)).startFrame })
        let replayer = try ServiceProcess("netplay-peer", ["replay", file, "--frames", "\(frames)"])
        let replayed = replayer.result(within: 60)
        #expect(replayed != nil, "replay (exit status \(replayer.waitForExit(seconds: 0).map(String.init) ?? "none: still running")): \(replayer.log)")
        return replayed
    }
}

/// The match settings every end-to-end match uses: 120 frames per second (twice real time, to
/// keep the suite short), 4 frames of input delay, a 24-frame rollback window, 100 ms round trip
/// with 20 ms jitter and 5 % loss of input traffic on every peer's link.
enum Match {
    static let frames = 3000
    static let host = ["--frame-rate", "120", "--frame-delay", "4", "--prediction-window", "24", "--lag-tolerance", "12",
                       "--checksum-interval", "60"]
    static let network = ["--rtt", "100", "--jitter", "20", "--loss", "0.05"]
    static func common(room: String, frames: Int = frames, seed: Int) -> [String] {
        ["--room", room, "--frames", "\(frames)", "--timeout", "150", "--input-seed", "\(seed)"] + network
    }
}

/// Expects every process to exit with a result of `frames` frames and the same checksum.
func expectSameResults(_ processes: [ServiceProcess], frames: Int, within seconds: Double = 90,
                       sourceLocation: SourceLocation = #_sourceLocation) {
    let results = expectSameChecksums(processes, within: seconds, sourceLocation: sourceLocation)
    #expect(results.allSatisfy { $0?.frames == frames }, sourceLocation: sourceLocation)
}

/// Expects every process to exit with a result and all results to carry the same checksum;
/// returns the results (nil for a process that gave none), in the order of `processes`.
@discardableResult
func expectSameChecksums(_ processes: [ServiceProcess], within seconds: Double,
                         sourceLocation: SourceLocation = #_sourceLocation) -> [PeerResult?] {
    let results = processes.map { $0.result(within: seconds) }
    for (process, result) in zip(processes, results) {
        #expect(result != nil, "\(process.name) failed:\n\(process.log.suffix(3000))", sourceLocation: sourceLocation)
    }
    let checksums = Set(results.compactMap { $0?.checksum })
    #expect(checksums.count == 1, "checksums differ: \(results.map { $0?.description ?? "none" })", sourceLocation: sourceLocation)
    return results
}
