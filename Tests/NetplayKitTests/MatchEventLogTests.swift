import Games
import NetplayTestSupport
import NetplayAuth
import NetplayWire
import Testing
@testable import NetplayKit

/// A match keeps its last 512 events; a reader (netplay-peer's event log and RESULT counts)
/// stopped seeing new ones once the log was full, because it compared the log's length.
@Suite("NetplayKit: reading a match's events as they come", .ownThread)
struct MatchEventLogTests {
    @Test func aReaderThatKeepsUpSeesEveryEventAlsoPastTheFiveHundredTwelfth() throws {
        let ticket = try JoinTicketSigner(keyRing: TicketKeyRing.generate()).issue(
            sessionId: "s-events", participantId: "p0", role: .player, slot: 0, relayId: "r",
            relayEndpoint: "tcp://127.0.0.1:9", params: SyncParams(inputSize: 1, maxPlayers: 2), name: "p0",
            ttlMs: 60_000, nowUnixMs: UnixTime.nowMs())
        let match = try NetplayMatch(game: Arena(playerCount: 2), admission: Admission(ticket: ticket, relayEndpoint: "tcp://127.0.0.1:9"))
        var seen = 0, read: [Int] = []
        for round in 0 ..< 700 {
            match.note(.stateLoaded(frame: round, reason: .desync))
            if round % 3 == 0 {
                for case .stateLoaded(let frame, _) in match.events(since: seen) { read.append(frame) }
                seen = match.eventCount
            }
        }
        for case .stateLoaded(let frame, _) in match.events(since: seen) { read.append(frame) }
        #expect(read == Array(0 ..< 700))
        #expect(match.events.count == 512 && match.eventCount == 700)
        // A reader that fell behind by more than the log holds gets what is left, no more.
        #expect(match.events(since: 0).count == 512)
        #expect(match.events(since: 700).isEmpty)
    }
}
