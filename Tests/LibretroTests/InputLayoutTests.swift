import Libretro
import Rollback
import Testing

/// Analog sticks in 10-byte inputs, and re-simulated frames hidden from the frontend and the
/// core. In the one serialized libretro suite (cores share process-wide callback slots).
extension LibretroHostTests {
    @Suite("Libretro inputs past the joypad, and re-simulated frames")
    struct InputLayoutTests {
        @Test func padInputsRoundTripThroughTenBytes() {
            let pad = LibretroPadInput(buttons: [.a, .up], sticks: AnalogSticks(leftX: -32768, leftY: 32767, rightX: -1, rightY: 1234))
            let input = pad.gameInput
            #expect(LibretroPadInput(input) == pad)
            #expect(input.masked(toSize: LibretroInputLayout.joypadAnalog.inputSize) == input, "fits in 10 bytes")
            #expect(LibretroPadInput(input.masked(toSize: 2)).buttons == pad.buttons)
            #expect(LibretroPadInput(input.masked(toSize: 2)).sticks == AnalogSticks())
            #expect(LibretroInputLayout(inputSize: 10) == .joypadAnalog && LibretroInputLayout(inputSize: 2) == .joypad)
            #expect(LibretroInputLayout(inputSize: 3) == nil)
        }

        @Test func analogSticksReachTheCoreOnEveryPort() throws {
            var options = LibretroCore.Options()
            options.inputLayout = .joypadAnalog
            let core = try LibretroCore(corePath: try FakeCore.path(), contentPath: try FakeCore.content(), options: options)
            defer { core.close() }
            var game = try LibretroGame(core: core, playerCount: 2, inputLayout: .joypadAnalog)
            let pads = [LibretroPadInput(buttons: [.b], sticks: AnalogSticks(leftX: 100, leftY: -200, rightX: 300, rightY: -400)),
                        LibretroPadInput(buttons: [.start], sticks: AnalogSticks(leftX: -32768, leftY: 32767, rightX: 0, rightY: 7))]
            game.advanceFrame(FrameInputs(frame: 0, inputs: pads.map(\.gameInput), statuses: [.confirmed, .confirmed]))
            let ram = try #require(core.memory(.systemRAM))
            func stick(_ base: Int, _ axis: Int) -> Int16 { Int16(bitPattern: FakeCore.uint16(ram, base + axis * 2)) }
            for (port, base) in [FakeCore.Layout.sticks0, FakeCore.Layout.sticks1].enumerated() {
                let read = AnalogSticks(leftX: stick(base, 0), leftY: stick(base, 1), rightX: stick(base, 2), rightY: stick(base, 3))
                #expect(read == pads[port].sticks, "port \(port)")
                #expect(core.analog(port: port) == pads[port].sticks)
            }
            #expect(FakeCore.uint16(ram, FakeCore.Layout.port0) == JoypadButtons.b.rawValue)
            #expect(core.analog(port: 9) == AnalogSticks(), "a port out of range reads centred")
            #expect(throws: LibretroError.invalidPort(2, portCount: 2)) { try core.setAnalog(AnalogSticks(), port: 2) }
        }

        @Test func aJoypadLayoutLeavesTheSticksCentred() throws {
            let core = try LibretroCore(corePath: try FakeCore.path(), contentPath: try FakeCore.content())
            defer { core.close() }
            var game = try LibretroGame(core: core, playerCount: 2)
            let pad = LibretroPadInput(buttons: [.a], sticks: AnalogSticks(leftX: 5, leftY: 5, rightX: 5, rightY: 5))
            game.advanceFrame(FrameInputs(frame: 0, inputs: [pad.gameInput, .zero], statuses: [.confirmed, .confirmed]))
            #expect(core.analog(port: 0) == AnalogSticks())
        }

        @Test func reSimulatedFramesAreHiddenAndTheCoreIsTold() throws {
            let core = try LibretroCore(corePath: try FakeCore.path(), contentPath: try FakeCore.content())
            defer { core.close() }
            let session = try SyncTestSession(game: try LibretroGame(core: core, playerCount: 2),
                                              configuration: SessionConfiguration(playerCount: 2, inputSize: LibretroGame.inputSize),
                                              checkDistance: 4)
            for frame in 0 ..< 50 {
                for player in 0 ..< 2 {
                    try session.addLocalInput(GameInput(low: UInt64((frame / 3 + player) & 0xFF)), for: player)
                }
                let mismatches = try session.advanceFrame()
                #expect(mismatches.isEmpty, "frame \(frame): \(mismatches)")
            }
            let resimulated = session.sessionStats.framesResimulated
            #expect(resimulated > 0)
            #expect(core.hiddenVideoFrameCount == resimulated)
            #expect(core.videoFrameCount - core.hiddenVideoFrameCount == 50, "each frame shown once")
            #expect(core.presentsOutput, "on again after the rollback")
            let side = try #require(core.memory(.saveRAM))
            #expect(FakeCore.uint32(side, FakeCore.Side.hiddenRuns) == UInt32(resimulated), "the core was told on each")
            // A sync test re-simulates after each shown frame, so the core's last answer was "off";
            // one plain run shows it back on.
            #expect(FakeCore.uint32(side, FakeCore.Side.lastAVEnable) == 0)
            core.run()
            #expect(FakeCore.uint32(try #require(core.memory(.saveRAM)), FakeCore.Side.lastAVEnable) == 3)
            #expect(!core.unsupportedEnvironmentCommands.contains(47 | 0x10000))
        }
    }
}
