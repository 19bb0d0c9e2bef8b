import CNetplayAPI
@testable import NetplayC
import NetplayKit
import NetplayWire
import Rollback
import Testing
import NetplayTestSupport

/// The bridge between the engine and a frontend's C callbacks, under the engine's own sync
/// test (every frame rolled back and re-simulated): what `advance` is given.
@Suite(.ownThread)
struct CallbackGameTests {
    /// A C game: its state is one word mixing every input byte; it records what it was given.
    final class Recorder {
        var state: UInt64 = 1
        var firstRuns = 0
        var reruns = 0
        var inputSizes: Set<Int> = []
        var lastBytes: [UInt8] = []
        var statuses: Set<UInt8> = []
    }

    static func recorder(_ user: UnsafeMutableRawPointer?) -> Recorder {
        Unmanaged<Recorder>.fromOpaque(user!).takeUnretainedValue()
    }

    static func callbacks(_ recorder: Recorder) -> np_game_callbacks {
        np_game_callbacks(
            user: Unmanaged.passUnretained(recorder).toOpaque(),
            state_size: { _ in 8 },
            save: { user, buffer, size in
                withUnsafeBytes(of: CallbackGameTests.recorder(user).state.littleEndian) { buffer!.update(from: $0.bindMemory(to: UInt8.self).baseAddress!, count: size) }
                return 0
            },
            load: { user, data, size in
                guard size == 8, let data else { return 1 }
                var value: UInt64 = 0
                withUnsafeMutableBytes(of: &value) { $0.copyMemory(from: UnsafeRawBufferPointer(start: data, count: 8)) }
                CallbackGameTests.recorder(user).state = UInt64(littleEndian: value)
                return 0
            },
            advance: { user, inputs, inputSize, players, statuses, resimulating in
                let game = CallbackGameTests.recorder(user)
                let bytes = Array(UnsafeBufferPointer(start: inputs, count: inputSize * Int(players)))
                for byte in bytes { game.state = game.state &* 31 &+ UInt64(byte) }
                game.inputSizes.insert(inputSize)
                game.lastBytes = bytes
                for index in 0 ..< Int(players) { game.statuses.insert(statuses![index]) }
                if resimulating != 0 { game.reruns += 1 } else { game.firstRuns += 1 }
            },
            checksum: nil)
    }

    /// 40-byte inputs of two players reach `advance` whole, in player order; frames re-run by a
    /// rollback say so (`resimulating`), first runs do not; the default checksum (a hash of the
    /// save) finds no mismatch.
    @Test func advanceGetsEveryInputByteAndTheResimulatingFlag() throws {
        let recorder = Recorder()
        var raw = Self.callbacks(recorder)
        let callbacks = try withUnsafePointer(to: &raw) { try GameCallbacks($0) }
        callbacks.inputSize = 40
        let session = try SyncTestSession(game: CallbackGame(callbacks: callbacks),
                                          configuration: SessionConfiguration(playerCount: 2, inputSize: 40), checkDistance: 2)
        for frame in 0 ..< 20 {
            for player in 0 ..< 2 {
                var bytes = [UInt8](repeating: 0, count: 40)
                bytes[0] = UInt8(player + 1)
                bytes[39] = UInt8(frame)
                try session.addLocalInput(GameInput(bytes: bytes), for: player)
            }
            try session.advanceFrame()
        }
        #expect(session.mismatches.isEmpty)
        #expect(recorder.firstRuns == 20)
        #expect(recorder.reruns == 19 * 2, "from frame 1 on, every frame re-runs the last 2")
        #expect(recorder.inputSizes == [40])
        #expect(recorder.lastBytes.count == 80 && recorder.lastBytes[0] == 1 && recorder.lastBytes[40] == 2)
        #expect(recorder.lastBytes[39] == 19 && recorder.lastBytes[79] == 19)
        #expect(recorder.statuses == [UInt8(NP_INPUT_CONFIRMED)])
        #expect(callbacks.failure == nil)
    }

    /// A `load` that refuses a state stops every later callback and records why (the match
    /// then leaves with NP_ERR_GAME).
    @Test func aRefusedLoadStopsTheCallbacks() throws {
        let recorder = Recorder()
        var raw = Self.callbacks(recorder)
        raw.load = { _, _, _ in 3 }
        let callbacks = try withUnsafePointer(to: &raw) { try GameCallbacks($0) }
        callbacks.inputSize = 2
        var game = CallbackGame(callbacks: callbacks)
        let state = game.saveState()
        game.loadState(state)
        game.advanceFrame(FrameInputs(frame: 0, inputs: [.zero], statuses: [.confirmed]))
        #expect(callbacks.failure?.contains("load returned 3") == true)
        #expect(recorder.firstRuns == 0)
        #expect(game.saveState().isEmpty && game.checksum() == 0)
    }

    /// What a lobby, a LAN beacon (anyone's to send) or a relay says is copied into the C
    /// structs clamped: a room claiming 2^32 - 1 players trapped the frontend in np_client_browse.
    @Test func numbersFromTheNetworkAreClampedIntoTheCStructs() {
        var room = NetplayRoom(Room(roomId: "r", sessionId: "s"))
        room.maxPlayers = Int(UInt32.max)
        room.currentPlayers = Int(UInt32.max)
        room.currentSpectators = Int(UInt32.max)
        room.frameDelay = Int(UInt32.max)
        room.pingMs = Int.max
        let row = np_room(room)
        #expect(row.max_players == Int32.max && row.players == Int32.max && row.spectators == Int32.max)
        #expect(row.frame_delay == Int32.max && row.ping_ms == Int32.max)
    }
}
