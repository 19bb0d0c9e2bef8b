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
        let due = [1_000, 1_199, 1_200].map { link.syncRequestDue(now: UInt64($0), retryMs: 200) }
        #expect(due == [true, false, true])
        link.phase = .running
        let again = link.syncRequestDue(now: 5_000, retryMs: 200)
        #expect(!again, "a running endpoint is not asked again")
    }

    @Test func theHandshakeCountsOnlyTheAwaitedReplyAndRunsAfterTheLast() {
        var link = endpoint()
        link.syncNonce = 7
        let stale = link.acceptSyncReply(SyncReply(nonce: 8), total: 2, now: 10)
        #expect(stale == .ignored && link.syncCount == 0 && link.lastSyncSendMs == nil)
        let first = link.acceptSyncReply(SyncReply(nonce: 7), total: 2, now: 20)
        #expect(first == .progressed(count: 1) && link.phase == .synchronizing)
        #expect(link.lastSyncSendMs == 20, "the next request's retry timer starts with the reply")
        link.syncNonce = 9
        let last = link.acceptSyncReply(SyncReply(nonce: 9), total: 2, now: 30)
        #expect(last == .completed(count: 2) && link.phase == .running)
        let late = link.acceptSyncReply(SyncReply(nonce: 9), total: 2, now: 40)
        #expect(late == .ignored && link.syncCount == 2, "a late duplicate after the handshake")
    }

    @Test func silenceInterruptsOnceThenTimesOut() {
        var link = endpoint()
        let unheard = link.silence(at: 99_000, interruptMs: 500, disconnectMs: 3_000)
        #expect(unheard == Endpoint.Silence(), "never heard: no verdict")
        let firstHeard = link.heard(at: 1_000)
        #expect(!firstHeard)
        let verdicts = [1_499, 1_600, 2_000, 4_000].map { link.silence(at: UInt64($0), interruptMs: 500, disconnectMs: 3_000) }
        #expect(verdicts == [Endpoint.Silence(), Endpoint.Silence(interruptedNow: 2_400), Endpoint.Silence(),
                             Endpoint.Silence(timedOut: true)], "interrupted once, then timed out")
        let resumed = [4_100, 4_200].map { link.heard(at: UInt64($0)) }
        #expect(resumed == [true, false], "heard again: resumed, once")
        #expect(link.stats.messagesReceived == 3)
    }

    @Test func aSilenceLongerThanBothIsBothAtOnceAndNoTimeoutMeansNever() {
        var link = endpoint()
        _ = link.heard(at: 0)
        let long = link.silence(at: 10_000, interruptMs: 500, disconnectMs: 3_000)
        #expect(long == Endpoint.Silence(interruptedNow: 0, timedOut: true))
        var patient = endpoint()
        _ = patient.heard(at: 0)
        let forever = patient.silence(at: 1_000_000, interruptMs: 500, disconnectMs: 0)
        #expect(forever == Endpoint.Silence(interruptedNow: .max))
    }

    @Test func aPingIsDueFirstThenEveryInterval() {
        var link = endpoint()
        let due = [100, 1_099, 1_100].map { link.qualityReportDue(now: UInt64($0), intervalMs: 1_000) }
        #expect(due == [true, false, true] && link.lastQualityMs == 1_100)
    }
}
