import NetplayTestSupport
import Testing
@testable import Rollback

/// The rules P2P and spectator sessions share for each endpoint: handshake timing and progress,
/// silence (interrupted, then timed out), being heard again, and the ping timer.
@Suite("Endpoint rules every session applies", .ownThread)
struct EndpointRulesTests {
    func endpoint() -> Endpoint { Endpoint(id: PeerID(1), kind: .peer, players: [1]) }

    @Test func aSyncRequestIsDueFirstThenOnlyAfterTheRetryInterval() {
        var link = endpoint()
        #expect(link.syncRequestDue(now: 1_000, retryMs: 200))
        link.lastSyncSendMs = 1_000
        #expect(!link.syncRequestDue(now: 1_199, retryMs: 200))
        #expect(link.syncRequestDue(now: 1_200, retryMs: 200))
        link.phase = .running
        #expect(!link.syncRequestDue(now: 5_000, retryMs: 200), "a running endpoint is not asked again")
    }

    @Test func theHandshakeCountsOnlyTheAwaitedReplyAndRunsAfterTheLast() {
        var link = endpoint()
        link.syncNonce = 7
        let stale = link.acceptSyncReply(SyncReply(nonce: 8), total: 2)
        #expect(stale == .ignored && link.syncCount == 0)
        let first = link.acceptSyncReply(SyncReply(nonce: 7), total: 2)
        #expect(first == .progressed(count: 1) && link.phase == .synchronizing)
        link.syncNonce = 9
        let last = link.acceptSyncReply(SyncReply(nonce: 9), total: 2)
        #expect(last == .completed(count: 2) && link.phase == .running)
        let late = link.acceptSyncReply(SyncReply(nonce: 9), total: 2)
        #expect(late == .ignored && link.syncCount == 2, "a late duplicate after the handshake")
    }

    @Test func silenceInterruptsThenTimesOutAndIsNothingNewMeanwhile() {
        var link = endpoint()
        #expect(link.silence(at: 99_000, interruptMs: 500, disconnectMs: 3_000) == nil, "never heard: no verdict")
        let firstHeard = link.heard(at: 1_000)
        #expect(!firstHeard)
        #expect(link.silence(at: 1_499, interruptMs: 500, disconnectMs: 3_000) == nil)
        #expect(link.silence(at: 1_600, interruptMs: 500, disconnectMs: 3_000) == Endpoint.Silence(interruptedNow: 2_400))
        link.interrupted = true
        #expect(link.silence(at: 2_000, interruptMs: 500, disconnectMs: 3_000) == nil, "an interruption already reported")
        #expect(link.silence(at: 4_000, interruptMs: 500, disconnectMs: 3_000) == Endpoint.Silence(timedOut: true))
        let resumed = [4_100, 4_200].map { link.heard(at: UInt64($0)) }
        #expect(resumed == [true, false], "heard again: resumed, once")
        #expect(!link.interrupted && link.lastReceiveMs == 4_200 && link.stats.messagesReceived == 3)
    }

    @Test func aSilenceLongerThanBothIsBothAtOnceAndNoTimeoutMeansNever() {
        var link = endpoint()
        _ = link.heard(at: 0)
        #expect(link.silence(at: 10_000, interruptMs: 500, disconnectMs: 3_000) == Endpoint.Silence(interruptedNow: 0, timedOut: true))
        #expect(link.silence(at: 1_000_000, interruptMs: 500, disconnectMs: 0) == Endpoint.Silence(interruptedNow: .max))
    }

    @Test func aPingIsDueFirstThenEveryInterval() {
        var link = endpoint()
        #expect(link.qualityReportDue(now: 100, intervalMs: 1_000))
        link.lastQualityMs = 100
        #expect(!link.qualityReportDue(now: 1_099, intervalMs: 1_000))
        #expect(link.qualityReportDue(now: 1_100, intervalMs: 1_000))
    }
}
