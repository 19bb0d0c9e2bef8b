import ArgumentParser
import NetplayKit
import NetplayTestSupport
import Testing
@testable import PeerCommand

/// netplay-peer's RESULT counts: over the whole match, one per event of each kind.
@Suite("netplay-peer counts a match's events", .ownThread)
struct MatchEventTallyTests {
    @Test func theTallyCountsEachKindItReports() {
        var tally = MatchEventTally()
        for event: MatchEvent in [.reconnected, .reconnected, .desync(frame: 60, diverged: [1], resyncStarted: true),
                                  .stateLoaded(frame: 60, reason: .desync), .relayMoved(from: "a", to: "b")] {
            tally.count(event)
        }
        #expect(tally == MatchEventTally(reconnects: 2, desyncs: 1, statesLoaded: 1, relayMoves: 1))
    }
}

/// `netplay-peer demo`'s verdict: a desynced match is a failure (`make demo` exited 0 on one).
@Suite("netplay-peer demo's verdict", .ownThread)
struct DemoVerdictTests {
    @Test func peersOnOneStatePassAndPeersOnTwoFail() throws {
        let same = ["RESULT frames=60 checksum=0xabc role=player", "RESULT frames=60 checksum=0xabc role=player"]
        #expect(try Demo.verdict(results: same, hostStatus: 0, joinStatus: 0).contains("checksum=0xabc"))
        let differ = ["RESULT frames=60 checksum=0xabc role=player", "RESULT frames=60 checksum=0xdef role=player"]
        #expect(throws: ValidationError.self) { try Demo.verdict(results: differ, hostStatus: 0, joinStatus: 0) }
        let noChecksum = ["RESULT frames=60 role=player", "RESULT frames=60 role=player"]
        #expect(throws: ValidationError.self) { try Demo.verdict(results: noChecksum, hostStatus: 0, joinStatus: 0) }
        #expect(throws: ValidationError.self) { try Demo.verdict(results: same, hostStatus: 1, joinStatus: 0) }
        #expect(throws: ValidationError.self) { try Demo.verdict(results: [same[0]], hostStatus: 0, joinStatus: 0) }
    }
}
