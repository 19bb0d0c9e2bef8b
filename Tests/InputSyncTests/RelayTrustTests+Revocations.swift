import Foundation
import NetplayAuth
import NetplayService
import NetplayWire
import Testing
@testable import InputSync
import NetplayTestSupport

/// Kicks and leaves remembered: the revocation journal that outlives a restart, keeps what is in
/// force, stays bounded, and writes again once the disk takes it.
extension RelayTrustTests {
    /// Found reviewing the rebuild after a restart: the removals lived in memory only, so a player
    /// kicked before the relay died resumed its match on the restarted one with its old ticket.
    @Test func aKickOutlivesTheRelay() throws {
        let dead = RelayRig()
        _ = try dead.attach(a, slot: 1)
        _ = try dead.attach(b, slot: 2)
        dead.core.revoke(sessionId: dead.sessionId, participantId: "p2")
        let rig = RelayRig(restarting: dead)
        let refused = #expect(throws: ServiceError.self) { try rig.attach(b, slot: 2, resume: true, confirmed: 10) }
        #expect(refused?.code == .permissionDenied)
        #expect(rig.core.revocationsProblem == nil)
        _ = try rig.attach(a, slot: 1, resume: true, confirmed: 10)
    }

    @Test func theRevocationJournalKeepsWhatIsInForceAndStaysBounded() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("revocations-\(UUID().uuidString).jsonl")
        defer { try? FileManager.default.removeItem(at: url) }
        let book = RevocationBook(capacity: 4, journal: url, nowUnixMs: 0)
        book.revoke(sessionId: "s", participantId: "kicked", untilUnixMs: 1_000, kicked: true, nowUnixMs: 0)
        book.revoke(sessionId: "s", participantId: "left", untilUnixMs: 200, kicked: false, nowUnixMs: 0)
        // Read back after a restart at 500: what is still in force, nothing else.
        let again = RevocationBook(capacity: 4, journal: url, nowUnixMs: 500)
        #expect(again.isRevoked(sessionId: "s", participantId: "kicked", nowUnixMs: 500))
        #expect(!again.isRevoked(sessionId: "s", participantId: "left", nowUnixMs: 500) && again.count == 1)
        // Many departures: the file is rewritten with the live entries, never past twice the capacity.
        for index in 0 ..< 50 {
            again.revoke(sessionId: "s", participantId: "gone\(index)", untilUnixMs: 2_000, kicked: false, nowUnixMs: 600)
        }
        let lines = try String(contentsOf: url, encoding: .utf8).split(separator: "\n")
        #expect(lines.count <= 8, "\(lines.count) lines")
        #expect(RevocationBook(capacity: 4, journal: url, nowUnixMs: 700).isRevoked(sessionId: "s", participantId: "kicked", nowUnixMs: 700))
        // A damaged file: the lines that read are kept, the rest reported.
        try Data("not json\n".utf8 + (try Data(contentsOf: url))).write(to: url)
        let damaged = RevocationBook(capacity: 4, journal: url, nowUnixMs: 700)
        #expect(damaged.isRevoked(sessionId: "s", participantId: "kicked", nowUnixMs: 700))
        #expect(damaged.journal?.problem?.contains("1 unreadable lines skipped") == true)
        // More lines than the book holds (a smaller capacity after a restart): kicks are kept first.
        let crowded = url.appendingPathExtension("crowded")
        defer { try? FileManager.default.removeItem(at: crowded) }
        let crowd = (0 ..< 10).map { RevocationJournal.Line(session: "s", participant: "gone\($0)", until: 5_000 + UInt64($0), kicked: false) }
            + [RevocationJournal.Line(session: "s", participant: "kicked", until: 1_000, kicked: true)]
        try Data(crowd.map { try JSONEncoder().encode($0) + Data("\n".utf8) }.joined()).write(to: crowded)
        let small = RevocationBook(capacity: 4, journal: crowded, nowUnixMs: 0)
        #expect(small.count == 4 && small.isRevoked(sessionId: "s", participantId: "kicked", nowUnixMs: 10))
        #expect(small.isRevoked(sessionId: "s", participantId: "gone9", nowUnixMs: 10)
                && !small.isRevoked(sessionId: "s", participantId: "gone0", nowUnixMs: 10))
        // One that cannot be read at all is left as it is (not replaced by an empty one).
        let unreadable = url.appendingPathExtension("dir")
        try FileManager.default.createDirectory(at: unreadable, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: unreadable) }
        let blind = RevocationBook(capacity: 4, journal: unreadable, nowUnixMs: 0)
        #expect(blind.journal?.problem?.contains("cannot read") == true)
        var isDirectory: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: unreadable.path, isDirectory: &isDirectory) && isDirectory.boolValue)
        // A book full of kicks: a departure does not push one out.
        let kicks = RevocationBook(capacity: 2)
        kicks.revoke(sessionId: "s", participantId: "k1", untilUnixMs: 100, kicked: true, nowUnixMs: 0)
        kicks.revoke(sessionId: "s", participantId: "k2", untilUnixMs: 100, kicked: true, nowUnixMs: 0)
        kicks.revoke(sessionId: "s", participantId: "left", untilUnixMs: 1_000, kicked: false, nowUnixMs: 0)
        #expect(kicks.isRevoked(sessionId: "s", participantId: "k1", nowUnixMs: 50)
                && kicks.isRevoked(sessionId: "s", participantId: "k2", nowUnixMs: 50))
    }

    /// One failed write (a full disk) stopped the journal until the next restart: every kick
    /// after it lived in memory only. The file is tried again (at once, then every 10 s).
    @Test func theRevocationJournalWritesAgainOnceTheDiskTakesIt() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("revocations-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        // The journal's directory is a file at first: no write can succeed.
        try Data("blocking".utf8).write(to: directory)
        let url = directory.appendingPathComponent("revocations.jsonl")
        let book = RevocationBook(capacity: 100, journal: url, nowUnixMs: 0)
        book.revoke(sessionId: "s", participantId: "first", untilUnixMs: 1_000_000, nowUnixMs: 1_000)
        #expect(book.journal?.problem?.contains("cannot write") == true)
        // The disk is fine again; the next kick within 10 s waits, the one after writes everything.
        try FileManager.default.removeItem(at: directory)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        book.revoke(sessionId: "s", participantId: "second", untilUnixMs: 1_000_000, nowUnixMs: 5_000)
        #expect(!FileManager.default.fileExists(atPath: url.path))
        book.revoke(sessionId: "s", participantId: "third", untilUnixMs: 1_000_000, nowUnixMs: 12_000)
        #expect(book.journal?.problem == nil)
        book.revoke(sessionId: "s", participantId: "fourth", untilUnixMs: 1_000_000, nowUnixMs: 12_500)
        let restarted = RevocationBook(capacity: 100, journal: url, nowUnixMs: 13_000)
        for participant in ["first", "second", "third", "fourth"] {
            #expect(restarted.isRevoked(sessionId: "s", participantId: participant, nowUnixMs: 13_000), "\(participant)")
        }
    }

    /// The book is shared by every session: a host kicking sock-puppets by the thousand pushed
    /// other sessions' kicks out (the soonest expiring first), and those kicked players could
    /// attach again. A session's flood now gives room from its own entries first.
    @Test func oneSessionsKicksDoNotPushAnothersOut() {
        let book = RevocationBook(capacity: 10)
        for index in 0 ..< 3 {
            book.revoke(sessionId: "victim", participantId: "griefer\(index)", untilUnixMs: 1_000 + UInt64(index), nowUnixMs: 0)
        }
        for index in 0 ..< 500 {
            book.revoke(sessionId: "flooder", participantId: "puppet\(index)", untilUnixMs: 9_000 + UInt64(index), nowUnixMs: 0)
        }
        #expect(book.count == 10)
        for index in 0 ..< 3 { #expect(book.isRevoked(sessionId: "victim", participantId: "griefer\(index)", nowUnixMs: 10)) }
        #expect(book.isRevoked(sessionId: "flooder", participantId: "puppet499", nowUnixMs: 10))
        // A session with no entry yet gets room from the largest.
        book.revoke(sessionId: "third", participantId: "x", untilUnixMs: 500, nowUnixMs: 0)
        #expect(book.isRevoked(sessionId: "third", participantId: "x", nowUnixMs: 10))
        for index in 0 ..< 3 { #expect(book.isRevoked(sessionId: "victim", participantId: "griefer\(index)", nowUnixMs: 10)) }
    }

    @Test func removalsLastAsLongAsTheTicketsAndStayBounded() {
        var configuration = RelayConfiguration(relayId: "r", advertisedEndpoint: "")
        configuration.maxTicketLifetimeMs = 300_000
        configuration.resumeGraceMs = 600_000
        // The ticket seen lives longer than any issued now would: its expiry + the grace.
        #expect(RelayCore.revocationEnd(ticketExpiresAtUnixMs: 5_000_000, nowUnixMs: 1_000_000, configuration: configuration)
                == 5_600_000)
        // A ticket the relay never saw may have been issued just before the removal.
        #expect(RelayCore.revocationEnd(ticketExpiresAtUnixMs: 0, nowUnixMs: 1_000_000, configuration: configuration)
                == 1_900_000)

        let book = RevocationBook(capacity: 3)
        book.revoke(sessionId: "s", participantId: "p1", untilUnixMs: 400, nowUnixMs: 0)
        book.revoke(sessionId: "s", participantId: "p2", untilUnixMs: 100, nowUnixMs: 0)
        book.revoke(sessionId: "s", participantId: "p3", untilUnixMs: 300, nowUnixMs: 0)
        book.revoke(sessionId: "s", participantId: "p4", untilUnixMs: 200, nowUnixMs: 0)
        #expect(book.count == 3)
        // Full: the one expiring soonest was forgotten.
        #expect(!book.isRevoked(sessionId: "s", participantId: "p2", nowUnixMs: 50))
        #expect(book.isRevoked(sessionId: "s", participantId: "p4", nowUnixMs: 50))
        #expect(!book.isRevoked(sessionId: "other", participantId: "p4", nowUnixMs: 50))
        // Expired entries no longer refuse and are forgotten.
        #expect(!book.isRevoked(sessionId: "s", participantId: "p4", nowUnixMs: 200))
        book.purge(nowUnixMs: 350)
        #expect(book.count == 1 && book.isRevoked(sessionId: "s", participantId: "p1", nowUnixMs: 350))
        // Full of live entries, a new one still gets in.
        for index in 0 ..< 10 { book.revoke(sessionId: "s", participantId: "q\(index)", untilUnixMs: 1_000 + UInt64(index), nowUnixMs: 360) }
        #expect(book.count == 3 && book.isRevoked(sessionId: "s", participantId: "q9", nowUnixMs: 360))

        // Departures give way to kicks: a flood of joins and leaves does not push a kick out.
        let mixed = RevocationBook(capacity: 3)
        mixed.revoke(sessionId: "s", participantId: "kicked", untilUnixMs: 100, kicked: true, nowUnixMs: 0)
        for index in 0 ..< 50 {
            mixed.revoke(sessionId: "s", participantId: "left\(index)", untilUnixMs: 1_000 + UInt64(index), kicked: false, nowUnixMs: 0)
        }
        #expect(mixed.count == 3 && mixed.isRevoked(sessionId: "s", participantId: "kicked", nowUnixMs: 50))
        #expect(mixed.isRevoked(sessionId: "s", participantId: "left49", nowUnixMs: 50))
        // A kick of one who had left stays a kick.
        mixed.revoke(sessionId: "s", participantId: "left49", untilUnixMs: 1_000, kicked: true, nowUnixMs: 0)
        for index in 50 ..< 60 {
            mixed.revoke(sessionId: "s", participantId: "left\(index)", untilUnixMs: 5_000, kicked: false, nowUnixMs: 0)
        }
        #expect(mixed.isRevoked(sessionId: "s", participantId: "kicked", nowUnixMs: 50)
                && mixed.isRevoked(sessionId: "s", participantId: "left49", nowUnixMs: 50))
    }
}
