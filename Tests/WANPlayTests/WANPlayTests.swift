import Foundation
import Testing
import WANHarness
import NetplayTestSupport

/// Play on a real kernel network path: every player a `netplay-peer` process in its
/// own network namespace, 50 ms ± 5 ms one way to the relay through TUN devices and our
/// forwarder, loss from iptables. What a player must never feel: its own inputs substituted
/// while connected, rollbacks longer than the path makes necessary (the floor) or uneven
/// between players, stalls. `make test` runs this suite alone, after the others, so the
/// timings it checks are not those of a machine busy with the rest of the suite.
@Suite("Real-path play: 50 ms ± 5 ms one way", .serialized, .ownThread,
       .enabled(if: WANLab.unavailableReason == nil, "needs root, network namespaces, TUN and iptables"))
struct WANPlayTests {
    /// The directory of the netplay binaries (beside netplay-wanlink).
    static var binDirectory: String {
        get throws { URL(fileURLWithPath: try WANLab.locateWanlink()).deletingLastPathComponent().path }
    }

    /// Plays `scenario` and checks the bar of play on real paths: no substitution, mean rollbacks within one
    /// frame of each other, max rollback at most floor + `slack`, no stall longer than two frames
    /// (or, with loss, none over `maxStallMs`), equal checksums. A real-time match on a shared
    /// 2-core machine can meet a scheduling hiccup: a match that misses the bar is played once
    /// more, and the test fails if the second misses it too (both results are in the failure).
    func play(_ scenario: WANScenario, slack: Double, maxStallMs: Int? = nil) throws {
        var first: WANMatchResult?
        for attempt in 1 ... 2 {
            let result = try WANMatch.run(scenario, binDirectory: try Self.binDirectory, timeoutSeconds: 90)
            if meets(result, scenario: scenario, slack: slack, maxStallMs: maxStallMs) || attempt == 2 {
                check(result, scenario: scenario, slack: slack, maxStallMs: maxStallMs, earlier: first)
                return
            }
            first = result
            // Said in the log, so that a bar met only at the second try is seen.
            FileHandle.standardError.write(Data("WANPlayTests: missed the bar, playing once more: \(result)\n".utf8))
        }
    }

    func meets(_ result: WANMatchResult, scenario: WANScenario, slack: Double, maxStallMs: Int?) -> Bool {
        result.players.count == scenario.players && result.checksumsAgree && result.meanRollbackSpread <= 1
            && result.players.allSatisfy { player in
                player.ownSubstituted == 0 && Double(player.maxRollback) <= result.floorFrames + slack
                    && (maxStallMs.map { player.maxStallMs <= $0 } ?? (player.stallsOverTwoFrames == 0))
            }
    }

    func check(_ result: WANMatchResult, scenario: WANScenario, slack: Double, maxStallMs: Int?, earlier: WANMatchResult?) {
        let context = Comment(rawValue: "\(result)" + (earlier.map { "\nfirst attempt: \($0)" } ?? ""))
        #expect(result.players.count == scenario.players, context)
        #expect(result.checksumsAgree, context)
        for player in result.players {
            #expect(player.ownSubstituted == 0, context)
            #expect(Double(player.maxRollback) <= result.floorFrames + slack, context)
            if let maxStallMs {
                #expect(player.maxStallMs <= maxStallMs, context)
            } else {
                #expect(player.stallsOverTwoFrames == 0, context)
            }
        }
        #expect(result.meanRollbackSpread <= 1, context)
    }

    @Test func twoPlayersArena() throws {
        try play(WANScenario(delayMs: 50, jitterMs: 5, players: 2, frames: 480), slack: 2)
    }

    @Test func fourPlayersArena() throws {
        // Four players each wait for three partners: the longest of three jittered paths sets
        // each rollback. Their tail was at the start, when players began up to two frames apart
        // (each noticed the start, and the moment it named, on a once-a-frame tick); ticking every
        // millisecond while the first frame is near removed it (`NetplayMatch.firstFrameIsNear`).
        try play(WANScenario(delayMs: 50, jitterMs: 5, players: 4, frames: 480), slack: 2)
    }

    @Test func twoPlayersArenaWithWholeFramePacing() throws {
        var scenario = WANScenario(delayMs: 50, jitterMs: 5, players: 2, frames: 480)
        scenario.pacing = "whole-frames"
        try play(scenario, slack: 2)
    }

    @Test func twoPlayersNestopia() throws {
        var scenario = WANScenario(delayMs: 50, jitterMs: 5, players: 2, frames: 480)
        scenario.core = try Self.nestopia()
        try play(scenario, slack: 2)
    }

    @Test func fourPlayersNestopia() throws {
        var scenario = WANScenario(delayMs: 50, jitterMs: 5, players: 4, frames: 480)
        scenario.core = try Self.nestopia()
        try play(scenario, slack: 2)
    }

    @Test func twoPlayersNestopiaAtTwoPercentLoss() throws {
        var scenario = WANScenario(delayMs: 50, jitterMs: 5, lossPercent: 2, players: 2, frames: 480)
        scenario.core = try Self.nestopia()
        try play(scenario, slack: 4, maxStallMs: 100)
    }

    @Test func fourPlayersNestopiaAtTwoPercentLoss() throws {
        var scenario = WANScenario(delayMs: 50, jitterMs: 5, lossPercent: 2, players: 4, frames: 480)
        scenario.core = try Self.nestopia()
        try play(scenario, slack: 4, maxStallMs: 100)
    }

    @Test func twoPlayersArenaAtTwoPercentLoss() throws {
        try play(WANScenario(delayMs: 50, jitterMs: 5, lossPercent: 2, players: 2, frames: 480), slack: 4, maxStallMs: 100)
    }

    /// Four players at 2 % loss: the paths attached before the start and a frame's partners in
    /// one message keep every player within the floor + 4 (see docs/wan-harness.md).
    @Test func fourPlayersArenaAtTwoPercentLoss() throws {
        try play(WANScenario(delayMs: 50, jitterMs: 5, lossPercent: 2, players: 4, frames: 480), slack: 4, maxStallMs: 100)
    }

    /// nestopia and the NES test program, assembled with cc65.
    static func nestopia() throws -> (path: String, content: String) {
        (try LibretroFixtures.nestopiaCore(), try LibretroFixtures.testROM())
    }
}
