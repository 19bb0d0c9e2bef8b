import Foundation
import Libretro
import NetplayService
import NetplayTestSupport
import NetplayWire
import Testing

/// A libretro core through the cluster: discovery, coordinator and one relay as real processes,
/// netplay-peer processes each running their own nestopia with the NES test program (assembled
/// by ca65 at test time), under simulated latency, jitter and loss.
@Suite(.serialized, .ownThread)
struct CoreMatchTests {
    /// Three players and a spectator over 1,200 frames (120 fps) at 100 ms ± 20 RTT and 5 % loss
    /// on every joiner's link: the same initial state everywhere, rollbacks, no desync, identical
    /// final checksums; the relay's replay replays to the same checksum; a joiner with other
    /// content is refused by the coordinator.
    @Test(.timeLimit(.minutes(2)))
    func threePlayersAndASpectatorAgree() throws {
        let rom = try LibretroFixtures.testROM()
        let core = try LibretroFixtures.nestopiaCore()
        let cluster = try CoreCluster()
        let frames = 1200
        let room = "nes-\(UUID().uuidString.prefix(8))"
        let coreArgs = ["--core", core, "--content", rom]
        func common(seed: Int) -> [String] {
            ["--room", room, "--frames", "\(frames)", "--timeout", "90", "--input-seed", "\(seed)"] + coreArgs
        }
        // Each peer's heap hands out memory filled with another byte (glibc's MALLOC_PERTURB_),
        // like frontends' heaps that differ: nestopia reads a byte it never wrote, so only
        // netplay-peer's deterministic heap while loading makes every peer start the same.
        func heap(_ seed: Int) -> [String: String] { ["MALLOC_PERTURB_": "\(seed * 67 % 255 + 1)"] }
        let network = ["--rtt", "100", "--jitter", "20", "--loss", "0.05"]
        let host = try cluster.peer("host", common(seed: 1) + [
            "--players", "3", "--frame-rate", "120", "--frame-delay", "3", "--prediction-window", "24",
            "--lag-tolerance", "12", "--checksum-interval", "60", "--rtt", "40",
        ], environment: heap(1))
        #expect(host.waitFor("session ", within: 20), "host did not create its room: \(host.log)")

        // Other content (one byte changed): the coordinator refuses it, netplay-peer says why in one line.
        var other = try [UInt8](Data(contentsOf: URL(fileURLWithPath: rom)))
        other[other.count - 7] ^= 0x01
        let otherPath = cluster.dataRoot + "/other.nes"
        try FileManager.default.createDirectory(atPath: cluster.dataRoot, withIntermediateDirectories: true)
        try Data(other).write(to: URL(fileURLWithPath: otherPath))
        let mismatch = try cluster.peer("join", ["--room", room, "--frames", "\(frames)", "--timeout", "30",
                                                 "--core", core, "--content", otherPath])
        let mismatchStatus = mismatch.waitForExit(seconds: 30)
        #expect(mismatchStatus != nil && mismatchStatus != 0, "a joiner with other content was not refused: \(mismatch.log)")
        #expect(mismatch.log.contains("Same ROM required"), "\(mismatch.log)")

        let joiners = try (2 ... 3).map { seed in try cluster.peer("join", common(seed: seed) + network, environment: heap(seed)) }
        let spectator = try cluster.peer("spectate", common(seed: 9) + network, environment: heap(9))

        var results: [PeerResult] = []
        for peer in [host] + joiners + [spectator] {
            guard let result = peer.result(within: 80) else {
                Issue.record("\(peer.name) failed: \(peer.log)")
                return
            }
            results.append(result)
        }
        let players = results.prefix(3)
        #expect(Set(results.map(\.checksum)).count == 1, "checksums differ: \(results)")
        #expect(Set(results.map { $0.fields["initial"] ?? "?" }).count == 1, "initial states differ: \(results)")
        #expect(results.allSatisfy { $0.frames == frames })
        #expect(results.last?.fields["role"] == "spectator")
        for result in players {
            #expect(result.int("desync_notices") == 0, "\(result)")
            #expect(result.int("states_loaded") == 0, "\(result)")
        }
        #expect(joinerRollbacks(players) > 0, "no rollbacks under 100 ms RTT: \(results)")

        // The relay's replay file, replayed through the same core, reaches the same checksum.
        let files = eventuallyValue(within: 10) { cluster.replayFiles.first }
        guard let file = files else {
            Issue.record("no replay file under \(cluster.dataRoot)")
            return
        }
        let replay = try ServiceProcess("netplay-peer", ["replay", file, "--frames", "\(frames)"] + coreArgs, environment: heap(5))
        guard let replayed = replay.result(within: 30) else {
            Issue.record("replay failed: \(replay.log)")
            return
        }
        #expect(replayed.checksum == results[0].checksum, "replay: \(replayed) vs \(results[0])")
        #expect(replayed.int("checked_checksums") >= frames / 60 - 1, "\(replayed)")
    }

    private func joinerRollbacks(_ players: ArraySlice<PeerResult>) -> Int {
        players.dropFirst().map { $0.int("rollbacks") }.reduce(0, +)
    }

    /// A missing core, a core that cannot save states, missing and unusable content, and
    /// mismatched options: one clear line each and a non-zero exit, before touching the cluster.
    @Test(.timeLimit(.minutes(1)))
    func clearErrors() throws {
        let rom = try LibretroFixtures.testROM()
        let core = try LibretroFixtures.nestopiaCore()
        let scratch = try LibretroFixtures.scratchDirectory()
        let garbage = scratch + "/not-a-rom-e2e.nes"  // LibretroTests keeps its own garbage.nes in the shared scratch directory
        try Data("this is not an iNES file\n".utf8).write(to: URL(fileURLWithPath: garbage))
        let noStates = try CoreTestEnvironment.coreWithoutSerialization()
        // Nothing listens there: the errors must come before any cluster request.
        let offline = ["--discovery", "tcp://127.0.0.1:1", "--coordinator", "tcp://127.0.0.1:1", "--timeout", "5"]
        let cases: [(arguments: [String], message: String)] = [
            (["host", "--core", scratch + "/missing_libretro.so", "--content", rom], "libretro core not found: no file at"),
            (["host", "--core", noStates, "--content", rom], "cannot save states"),
            (["host", "--core", core, "--content", scratch + "/missing.nes"], "content not found: no file at"),
            (["host", "--core", core, "--content", garbage], "failed to load content"),
            (["join", "--core", core], "--core and --content go together"),
            (["host", "--core", core, "--content", rom, "--inputs", "cooperate"], "--inputs must be random or idle"),
            (["replay", scratch + "/missing.replay", "--core", core, "--content", rom], "missing.replay"),
        ]
        for (arguments, message) in cases {
            let process = try ServiceProcess("netplay-peer", arguments + (arguments[0] == "replay" ? [] : offline))
            let status = process.waitForExit(seconds: 20)
            let lines = process.log.split(separator: "\n").filter { !$0.contains(", initial state 0x") }  // the load summary
            #expect(status != nil && status != 0, "\(arguments): exit \(String(describing: status)): \(process.log)")
            #expect(lines.count == 1, "\(arguments): not one line: \(process.log)")
            #expect(process.log.contains(message), "\(arguments): \(process.log)")
        }
    }
}

/// Polls until `make` returns a value.
func eventuallyValue<T>(within seconds: Double, _ make: () -> T?) -> T? {
    var value: T?
    _ = eventually(within: seconds) {
        value = make()
        return value != nil
    }
    return value
}
