import Foundation
import NetplayTestSupport
import NetplayWire
import Testing

/// `netplay-peer replay` of a file whose player counts no sample game takes: the file is
/// anyone's (shared, downloaded), and such a count used to trap the replayer (an arena of nine,
/// a dilemma of three) instead of refusing with a reason.
@Suite("netplay-peer replay refuses player counts the game cannot take", .ownThread)
struct ReplayPlayerCountTests {
    /// A replay holding only its header: `slots` recorded players, and the game options' words.
    private func replayFile(slots: UInt32, options: String) throws -> URL {
        let header = ReplayHeader(formatVersion: 1, sessionId: "s", content: ContentInfo(gameName: "sample"),
                                  params: SyncParams(inputSize: 1, maxPlayers: slots), startFrame: 0,
                                  gameOptions: Array(options.utf8))
        let envelope = try Envelope(body: .replayHeader(header)).encoded()
        let length = UInt32(envelope.count)
        let bytes = [UInt8(length >> 24), UInt8((length >> 16) & 0xFF), UInt8((length >> 8) & 0xFF), UInt8(length & 0xFF)] + envelope
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("netplay-replay-\(UUID().uuidString).replay")
        try Data(bytes).write(to: url)
        return url
    }

    @Test(arguments: [
        (UInt32(3), "game=pd;players=3;seed=1", "the prisoner's dilemma takes exactly 2 players"),
        (UInt32(8), "game=arena;players=9;seed=1", "the arena takes 2 ... 8 players"),
        (UInt32(4), "game=arena;players=2;seed=1", "the replay records 4 players' inputs, its game options say 2"),
    ])
    func aReplayWithPlayersTheGameCannotTakeIsRefused(slots: UInt32, options: String, reason: String) throws {
        let file = try replayFile(slots: slots, options: options)
        defer { try? FileManager.default.removeItem(at: file) }
        let replayer = try ServiceProcess("netplay-peer", ["replay", file.path])
        let status = replayer.waitForExit(seconds: 20)
        replayer.waitForOutputEnd()
        #expect(status == 2, "\(replayer.log)")
        #expect(replayer.log.contains(reason), "\(replayer.log)")
    }

    @Test func aReplayOfTwoArenaPlayersRuns() throws {
        let file = try replayFile(slots: 2, options: "game=arena;players=2;seed=1")
        defer { try? FileManager.default.removeItem(at: file) }
        let replayer = try ServiceProcess("netplay-peer", ["replay", file.path])
        let status = replayer.waitForExit(seconds: 20)
        replayer.waitForOutputEnd()
        #expect(status == 0, "\(replayer.log)")
    }
}
