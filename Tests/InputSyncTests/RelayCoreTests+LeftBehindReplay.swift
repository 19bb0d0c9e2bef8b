import Foundation
import Glibc
import NetplayWire
import Testing
@testable import InputSync

// The replay a dead relay left behind: when it vouches for the match, which file it is, and a
// writer that fails leaving none to vouch.
extension RelayCoreTests {
    @Test func aLeftBehindReplayVouchesOnlyWhileFreshAndForItsOwnSession() throws {
        let dead = try deadRelay(playing: 150)
        let left = try #require(try LeftBehindReplay.find(dead.sessionId, in: dead.replayDirectory))
        #expect(left.end == 128 && left.confirmedBound == 192)
        #expect(left.vouches(for: dead.params, at: Date()))
        // The rebuilt start is the backlog before the file's end (or its first frame), whatever
        // the first peer back claims.
        func origin(claiming confirmed: Int, from history: Int, backlog: Int = 100) -> Int {
            RecoveryStart.origin(AttachRequest(resume: true, confirmedFrames: UInt32(confirmed), historyFromFrame: UInt32(history)),
                                 backlog: backlog, record: left)
        }
        #expect(origin(claiming: 5_000, from: 0) == 28 && origin(claiming: 5_000, from: 4_000) == 28)
        #expect(origin(claiming: 0, from: 0) == 28 && origin(claiming: 130, from: 100) == 28)
        #expect(origin(claiming: 130, from: 100, backlog: 600) == 0)
        #expect(!left.vouches(for: dead.params, at: Date(timeIntervalSinceNow: LeftBehindReplay.freshSeconds + 1)))
        // A damaged header whose frames no match can have (past the wire's last frame) vouches for nothing.
        var damaged = left.file
        damaged.startFrame = Int(UInt32.max) - 10
        #expect(!LeftBehindReplay(url: left.url, file: damaged, validBytes: left.validBytes, modifiedAt: left.modifiedAt)
            .vouches(for: dead.params, at: Date()))
        var other = dead.params
        other.inputSize = 2
        #expect(!left.vouches(for: other, at: Date()), "another session's shape")
        #expect(try LeftBehindReplay.find("another-session", in: dead.replayDirectory) == nil)
        // One the relay finished (a footer) is no match to continue.
        try dead.send(.detach(Detach(reason: .leaving)), from: a)
        try dead.send(.detach(Detach(reason: .leaving)), from: b)
        #expect(try LeftBehindReplay.find(dead.sessionId, in: dead.replayDirectory) == nil)
    }

    /// A rebuild reads only the end of a long match's replay (it seeds no more than its
    /// backlog): the same frames a whole read gives, from a record's start at most 64 frames
    /// before the backlog; and the continued file still counts the whole match in its footer.
    @Test func aRebuildReadsOnlyTheTailOfALongReplay() throws {
        let dead = try deadRelay(playing: 2_000)
        let url = try #require(dead.core.replayURL(of: dead.sessionId))
        let whole = try ReplayFile.read(url)
        let tail = try ReplayFile.read(url, lastFrames: 600)
        #expect(whole.file.startFrame == 0 && whole.file.frameCount == 1_984)
        #expect(tail.validBytes == whole.validBytes && tail.file.header == whole.file.header)
        #expect(tail.file.startFrame + tail.file.frameCount == 1_984)
        #expect(tail.file.startFrame <= 1_984 - 600 && tail.file.startFrame > 1_984 - 600 - 64)
        for frame in tail.file.startFrame ..< 1_984 {
            #expect(tail.file.input(frame: frame, slot: 0) == whole.file.input(frame: frame, slot: 0))
            #expect(tail.file.status(frame: frame, slot: 1) == whole.file.status(frame: frame, slot: 1))
        }
        #expect(try ReplayFile.read(url, lastFrames: 5_000).file.frameCount == 1_984, "all there is")

        let rig = RelayRig(restarting: dead)
        let first = try rig.attach(a, slot: 1, resume: true, confirmed: 2_000, historyFrom: 0)
        #expect(first.confirmedFrames == 1_984)
        let session = try #require(rig.core.sessions[rig.sessionId])
        #expect(session.timeline.origin == 1_984 - 600, "the backlog before the file's end")
        #expect(session.rebuiltFromReplayTo == 1_984 && session.timeline.stored(0) == 1_984)
        #expect(session.timeline.inputs(slot: 0, from: 1_384, to: 1_984) == (1_384 ..< 1_984).map { UInt8($0 & 0xFF) })
        _ = try rig.attach(b, slot: 2, resume: true, confirmed: 2_000, historyFrom: 0)
        for frame in 1_984 ..< 2_100 {
            try rig.batch(a, slot: 1, start: frame, [UInt8(frame & 0xFF)])
            try rig.batch(b, slot: 2, start: frame, [2])
        }
        try rig.send(.detach(Detach(reason: .leaving)), from: a)
        try rig.send(.detach(Detach(reason: .leaving)), from: b)
        let replay = try ReplayFile(contentsOf: url)
        #expect(replay.startFrame == 0 && replay.frameCount >= 2_099)
        #expect(replay.footer.map { Int($0.frameCount) } == replay.frameCount, "the footer counts the whole match")
    }

    /// Found reviewing the rebuild: a slot vacant when the relay died (its player left or was
    /// kicked, and is refused now) came back active, so every frame waited the lag tolerance for
    /// a player who was gone. The replay says the slot was vacant; it stays so.
    @Test func aSlotVacantBeforeTheRestartStaysVacant() throws {
        let dead = RelayRig(players: 3)
        try attachTrio(dead)
        for frame in 0 ..< 150 {
            try dead.batch(a, slot: 1, start: frame, [1])
            try dead.batch(b, slot: 2, start: frame, [2])
            if frame < 50 { try dead.batch(c, slot: 3, start: frame, [3]) }
            if frame == 50 { try dead.send(.detach(Detach(reason: .leaving)), from: c) }
            dead.advance(ms: 4)
        }
        let rig = RelayRig(restarting: dead)
        _ = try rig.attach(a, slot: 1, resume: true, confirmed: 150, historyFrom: 0)
        _ = try rig.attach(b, slot: 2, resume: true, confirmed: 150, historyFrom: 0)
        let session = try #require(rig.core.sessions[rig.sessionId])
        #expect(session.slotModes[2] == .vacant(.disconnected))
        try rig.batch(a, slot: 1, start: 128, Array(repeating: 1, count: 30))
        try rig.batch(b, slot: 2, start: 128, Array(repeating: 2, count: 30))
        rig.advance(ms: 8)
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 158, "no wait for the player who left")
    }

    @Test func theNewestReplayOfTheSessionIsTheOneLeftBehind() throws {
        let dead = try deadRelay(playing: 150)
        let directory = dead.replayDirectory
        let url = try #require(dead.core.replayURL(of: dead.sessionId))
        // An older file of the same session, ended, under a higher suffix (a lower one was free),
        // and a file of another session whose id shares the name's stem.
        let older = directory.appendingPathComponent("\(ReplayWriter.stem(of: dead.sessionId))-7.replay")
        try FileManager.default.copyItem(at: url, to: older)
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -300)], ofItemAtPath: older.path)
        #expect(try LeftBehindReplay.find(dead.sessionId, in: directory)?.url == url)
        #expect(try LeftBehindReplay.find("\(dead.sessionId)-7", in: directory) == nil, "not another session's file")
    }

    /// Found reviewing the rebuild from replays: a writer that failed (a full disk) stopped
    /// silently and left a file without a footer that a relay restarted soon after would take for
    /// the whole match, capping every claim at its end: the players' frames since could not be
    /// restored. Now the failure is reported and the file renamed `.replay.failed`.
    @Test func aReplayWriterThatFailsSaysSoAndLeavesNoRecord() throws {
        let rig = try deadRelay(playing: 100)
        let url = try #require(rig.core.replayURL(of: rig.sessionId))
        // The disk fills: the file's descriptor now writes to /dev/full (ENOSPC).
        let descriptor = try #require(try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").first {
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)")) == url.path
        }.flatMap { Int32($0) })
        let full = open("/dev/full", O_WRONLY)
        #expect(full >= 0 && dup2(full, descriptor) == descriptor)
        close(full)
        for frame in 100 ..< 200 {
            try rig.batch(a, slot: 1, start: frame, [1])
            try rig.batch(b, slot: 2, start: frame, [2])
        }
        #expect(rig.transport.published.contains { $0.topic == "sync.replay_failed" && $0.severity == .error })
        #expect(!FileManager.default.fileExists(atPath: url.path))
        #expect(FileManager.default.fileExists(atPath: url.path + ".failed"))
        #expect(try LeftBehindReplay.find(rig.sessionId, in: rig.replayDirectory) == nil)
        #expect(rig.core.replayURL(of: rig.sessionId) == nil, "nothing more is written")
    }
}
