import Foundation
import NetplayTestSupport
import Testing

/// "Network Play from the pause menu": the host is mid-game (it played alone first) and the
/// others join into its state, before frame 0; the host restarts the match from its state.
@Suite("Start a match from the host's state", .ownThread)
struct StartStateE2ETests {
    static let smallestWindow = ["--transfer-window", "256"]

    /// A host warmed up 500 frames, two joiners and a spectator from their boot: all load the
    /// host's state before frame 0 and finish with the same checksum, which the relay's replay
    /// (from the host's state it recorded) reproduces. The relay's transfer window is the
    /// smallest it takes (256 bytes, chunks of 64): the arena's 344-byte state reaches each
    /// only as NetplayKit acknowledges its chunks.
    @Test(.timeLimit(.minutes(4)))
    func joinersAndASpectatorStartFromTheWarmedHostsState() throws {
        let cluster = try PlayCluster(relayArguments: Self.smallestWindow)
        let room = "warm", frames = 1200
        let host = try cluster.peer("host", ["--players", "3", "--warmup-frames", "500"] + Match.host
                                        + Match.common(room: room, frames: frames, seed: 51))
        #expect(host.waitFor("session s-", within: 30), "host did not get a session: \(host.log)")
        // The spectator is in before the match starts: it too starts from the host's state.
        let spectator = try cluster.peer("spectate", ["--room", room, "--frames", "\(frames)", "--timeout", "150"])
        Thread.sleep(forTimeInterval: 2)
        #expect(!host.log.contains("match running"))
        let joiners = try [52, 53].map { try cluster.peer("join", Match.common(room: room, frames: frames, seed: $0)) }
        let processes = [host] + joiners + [spectator]
        let results = expectSameChecksums(processes, within: 150)
        // Everyone's simulation began at frame 0 from the host's warmed state, not its own boot.
        let starts = Set(results.compactMap { $0?.fields["start_checksum"] })
        #expect(starts.count == 1 && !starts.contains("0"), "start states differ: \(results.map { $0?.description ?? "none" })")
        for result in results.dropFirst().compactMap({ $0 }) {
            #expect(result.int("start") == 0 && result.int("states_loaded") >= 1, "did not load the host's state: \(result)")
        }
        #expect(results[0]?.int("states_loaded") == 0)
        // The relay's replay records the host's state: replayed from it, it ends where the match did.
        let replayed = try cluster.replayTheMatch(frames: frames)
        #expect(replayed?.checksum == results[0]?.checksum, "replay: \(replayed?.description ?? "none")")
        #expect((replayed?.int("checked_checksums") ?? 0) >= frames / 60 - 2)
    }

    /// The host restarts the match mid-way from the state it began from: the joiner and the
    /// spectator load it at the restart's frame (paced, as above), all three still agree at the
    /// end, and the relay's replay of the match after the restart reproduces it.
    @Test(.timeLimit(.minutes(4)))
    func theHostRestartsTheMatchFromItsState() throws {
        let cluster = try PlayCluster(relayArguments: Self.smallestWindow)
        let room = "restart", frames = 1200
        let host = try cluster.peer("host", ["--players", "2", "--warmup-frames", "300", "--restart-at", "600"] + Match.host
                                        + Match.common(room: room, frames: frames, seed: 61))
        #expect(host.waitFor("session s-", within: 30), "host did not get a session: \(host.log)")
        let spectator = try cluster.peer("spectate", ["--room", room, "--frames", "\(frames)", "--timeout", "150"])
        Thread.sleep(forTimeInterval: 2)
        let join = try cluster.peer("join", Match.common(room: room, frames: frames, seed: 62))
        let processes = [host, join, spectator]
        let results = expectSameChecksums(processes, within: 150)
        #expect(host.log.contains("restarted the match"), "the host did not restart: \(host.log.suffix(2000))")
        for result in results.dropFirst().compactMap({ $0 }) {
            #expect(result.int("states_loaded") >= 2, "the start state and the restart's should both load: \(result)")
        }
        // The relay's second replay file starts from the restart's state: replayed from it, it
        // ends where the match did.
        let replayed = try cluster.replayTheMatch(frames: frames, files: 2)
        #expect(replayed?.checksum == results[0]?.checksum, "replay: \(replayed?.description ?? "none")")
        #expect((replayed?.int("start_frame") ?? 0) > 0, "replay: \(replayed?.description ?? "none")")
    }

    /// The host's start options come with --help text and NETPLAY_* fallbacks; bad values are
    /// one line and a non-zero exit.
    @Test func theStartOptionsHaveHelpAndEnvironmentFallbacksAndRefuseBadValues() throws {
        let path = try BuildProducts.url(of: "netplay-peer").path
        let help = try run(path, ["host", "--help"], timeout: 30)
        for text in ["--warmup-frames", "--start-state", "--restart-at", "NETPLAY_WARMUP_FRAMES", "NETPLAY_START_STATE",
                     "NETPLAY_RESTART_AT"] {
            #expect(help.output.contains(text), "host --help lacks \(text)")
        }
        let refusals = [try run(path, ["host", "--warmup-frames=-1"], timeout: 30),
                        try run(path, ["host", "--start-state", "mid"], timeout: 30),
                        try run(path, ["host", "--restart-at", "0"], timeout: 30),
                        try run("/usr/bin/env", ["NETPLAY_START_STATE=mid", path, "host"], timeout: 30),
                        try run("/usr/bin/env", ["NETPLAY_WARMUP_FRAMES=lots", path, "host"], timeout: 30)]
        for (result, flag) in zip(refusals, ["--warmup-frames", "--start-state", "--restart-at", "--start-state", "--warmup-frames"]) {
            #expect(result.status != 0)
            #expect(result.output.split(separator: "\n").count == 1 && result.output.contains(flag), "\(result.output)")
        }
    }
}
