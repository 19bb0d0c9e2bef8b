import Foundation
import Libretro
import Rollback
import Synchronization
import Testing

extension LibretroHostTests {
    @Test("input reaches the core as per-button states and as bitmasks, on every port")
    func inputCallbacks() throws {
        let core = try LibretroCore(corePath: try FakeCore.path(), contentPath: try FakeCore.content(),
                                    options: .init(portCount: 2))
        for bit in 0 ..< 16 {
            let pad0 = JoypadButtons(rawValue: UInt16(1 << bit))
            let pad1 = JoypadButtons(rawValue: ~UInt16(1 << bit))
            try core.setJoypad(pad0, port: 0)
            try core.setJoypad(pad1, port: 1)
            #expect(core.joypad(port: 0) == pad0 && core.joypad(port: 1) == pad1)
            core.run()
            let ram = try #require(core.memory(.systemRAM))
            #expect(FakeCore.uint16(ram, FakeCore.Layout.port0) == pad0.rawValue)
            #expect(FakeCore.uint16(ram, FakeCore.Layout.port1) == pad1.rawValue)
            #expect(ram[FakeCore.Layout.perButtonAgrees] == 1, "per-button answers match the bitmask")
        }
        #expect(core.inputPollCount == 16)
        #expect(core.videoFrameCount == 16)
        #expect(core.lastVideoSize == (4, 4))
        #expect(core.audioFrameCount == 32)
        #expect(core.framesRun == 16)
    }

    /// A closed core's callback slot goes to the next core opened: a stale reference setting
    /// buttons changed that live core's inputs (a silent desync in another match).
    @Test("a closed core's setters are refused and leave the core in its old slot alone")
    func closedCoreSettersAreRefused() throws {
        let old = try LibretroCore(corePath: try FakeCore.path(), contentPath: try FakeCore.content(), options: .init(portCount: 2))
        old.close()
        let live = try LibretroCore(corePath: try FakeCore.path(), contentPath: try FakeCore.content(), options: .init(portCount: 2))
        defer { live.close() }
        try live.setJoypad(JoypadButtons(rawValue: 0x0101), port: 0)
        #expect(throws: LibretroError.self) { try old.setJoypad(JoypadButtons(rawValue: 0xFFFF), port: 0) }
        #expect(throws: LibretroError.self) { try old.setAnalog(AnalogSticks(leftX: 99), port: 0) }
        #expect(live.joypad(port: 0).rawValue == 0x0101 && live.analog(port: 0) == AnalogSticks())
    }

    @Test("content is handed over as data, or as a path when the core needs the full path")
    func contentHandling() throws {
        let content = try FakeCore.content()
        let size = try #require(try FileManager.default.attributesOfItem(atPath: content)[.size] as? Int)
        let inMemory = try LibretroCore(corePath: try FakeCore.path(), contentPath: content)
        #expect(!inMemory.systemInfo.needsFullPath)
        let ram = try #require(inMemory.memory(.systemRAM))
        #expect(FakeCore.uint32(ram, FakeCore.Layout.contentSize) == UInt32(size))
        #expect(FakeCore.uint32(ram, FakeCore.Layout.pathLength) == UInt32(content.utf8.count))
        inMemory.close()

        let fullPath = try LibretroCore(corePath: try FakeCore.path(.init(needFullPath: true)), contentPath: content)
        #expect(fullPath.systemInfo.needsFullPath)
        let fullRAM = try #require(fullPath.memory(.systemRAM))
        #expect(FakeCore.uint32(fullRAM, FakeCore.Layout.contentSize) == 0, "no data when the core reads the file")
        #expect(FakeCore.uint32(fullRAM, FakeCore.Layout.pathLength) == UInt32(content.utf8.count))
    }

    @Test("core options: declared, defaulted, overridden")
    func coreOptions() throws {
        let path = try FakeCore.path()
        let content = try FakeCore.content()
        let byDefault = try LibretroCore(corePath: path, contentPath: content)
        let declared = try #require(byDefault.variables.first)
        #expect(byDefault.variables.count == 1)
        #expect(declared.key == "fake_mode" && declared.description == "Mode")
        #expect(declared.choices == ["alpha", "beta"] && declared.value == "alpha")
        #expect(try #require(byDefault.memory(.systemRAM))[FakeCore.Layout.mode] == 0)
        #expect(!byDefault.setVariable("fake_mode", to: "gamma"))
        #expect(byDefault.setVariable("fake_mode", to: "beta"))
        #expect(byDefault.variables.first?.value == "beta")
        byDefault.close()

        let beta = try LibretroCore(corePath: path, contentPath: content, options: .init(variables: ["fake_mode": "beta"]))
        #expect(try #require(beta.memory(.systemRAM))[FakeCore.Layout.mode] == 1)
    }

    @Test("the core's log lines reach the handler and the recent log")
    func logging() throws {
        let lines = Mutex<[String]>([])
        let core = try LibretroCore(corePath: try FakeCore.path(), contentPath: try FakeCore.content(),
                                    options: .init(logHandler: { level, message in
                                        lines.withLock { $0.append("\(level): \(message)") }
                                    }))
        for _ in 0 ..< 3 { core.run() }
        core.close()
        #expect(lines.withLock { $0 } == ["info: fake core: deinit after 3 frames"])
    }

    @Test("nestopia starts headless with the test program")
    func nestopiaStarts() throws {
        let core = try TestEnvironment.nestopia()
        #expect(core.systemInfo.libraryName == "Nestopia")
        #expect(core.systemInfo.validExtensions.contains("nes"))
        #expect(core.stateSize > 1000)
        #expect(abs(core.avInfo.framesPerSecond - 60) < 1)
        for _ in 0 ..< 5 { core.run() }
        let ram = try #require(core.memory(.systemRAM))
        #expect(ram.count == 2048)
        #expect(Array(ram[TestProgram.magic ..< TestProgram.magic + 2]) == Array("NP".utf8), "the program started")
        #expect(core.videoFrameCount == 5)
        #expect(core.audioFrameCount > 0)
    }

    @Test("the program reads both controllers every frame exactly as the host sets them")
    func inputMapping() throws {
        let core = try TestEnvironment.nestopia()
        let script = InputScript(seed: 7, mask: .nes)
        var model = TestProgram.Model()
        var frameLoopRuns = 0
        for frame in 0 ..< 600 {
            // nestopia drops opposite directions held together (a real D-pad cannot press
            // both), so the model's script never holds them.
            let pads = (0 ..< 2).map { script.buttons(player: $0, frame: frame, allowOpposites: false) }
            try core.setJoypad(pads[0], port: 0)
            try core.setJoypad(pads[1], port: 1)
            let before = TestProgram.Model(ram: try #require(core.memory(.systemRAM))).frames
            core.run()
            let after = TestProgram.Model(ram: try #require(core.memory(.systemRAM))).frames
            if after != before {
                // The NMI of this frame read this frame's pads.
                #expect(after == before &+ 1, "one NMI per frame (frame \(frame))")
                model.nmi(pads.map(TestProgram.nesPad))
                frameLoopRuns += 1
            } else {
                #expect(frameLoopRuns == 0, "no frame without an NMI once the loop runs (frame \(frame))")
            }
        }
        #expect(frameLoopRuns >= 594, "the program's frame loop starts within a few frames")
        let actual = TestProgram.Model(ram: try #require(core.memory(.systemRAM)))
        #expect(actual.frames == model.frames)
        #expect(actual.hash == model.hash)
        #expect(actual.x == model.x && actual.y == model.y)
        #expect(actual.aPresses == model.aPresses && actual.bPresses == model.bPresses)
        #expect(actual.history == model.history)
        #expect(Set(actual.history[0]).count > 20 && Set(actual.history[1]).count > 20, "varied input")
    }

    @Test("different inputs give different states, even one button of player 2 on one frame")
    func inputsMatter() throws {
        let core = try TestEnvironment.nestopia()
        let script = InputScript(seed: 11, mask: .nes)
        let start = try core.saveState()
        let reference = try runScript(core, { script.buttons(player: $0, frame: $1) }, frames: 0 ..< 300)
        let referenceRAM = try #require(core.memory(.systemRAM))

        try core.loadState(start)
        #expect(try runScript(core, { script.buttons(player: $0, frame: $1) }, frames: 0 ..< 300) == reference,
                "the same inputs give the same state")

        try core.loadState(start)
        let changed = try runScript(core, { player, frame in
            var buttons = script.buttons(player: player, frame: frame)
            if player == 1 && frame == 150 { buttons.formSymmetricDifference(.select) }
            return buttons
        }, frames: 0 ..< 300)
        #expect(changed != reference)
        let changedRAM = try #require(core.memory(.systemRAM))
        #expect(changedRAM[TestProgram.hash ..< TestProgram.hash + 4] != referenceRAM[TestProgram.hash ..< TestProgram.hash + 4])

        try core.loadState(start)
        let swapped = try runScript(core, { script.buttons(player: 1 - $0, frame: $1) }, frames: 0 ..< 300)
        #expect(swapped != reference, "swapping the controllers changes the state")
    }

    @Test("saving and loading restores the identical state")
    func saveLoadRoundTrip() throws {
        let core = try TestEnvironment.nestopia()
        let script = InputScript(seed: 3, mask: .nes)
        _ = try runScript(core, { script.buttons(player: $0, frame: $1) }, frames: 0 ..< 100)
        let saved = try core.saveState()
        let savedRAM = try #require(core.memory(.systemRAM))
        #expect(saved.bytes.count == core.stateSize)
        #expect(try core.stateChecksum() == saved.checksum)

        let ahead = try runScript(core, { script.buttons(player: $0, frame: $1) }, frames: 100 ..< 160)
        let aheadState = try core.saveState()
        #expect(ahead != saved.checksum)
        #expect(try #require(core.memory(.systemRAM)) != savedRAM)

        try core.loadState(saved)
        #expect(try #require(core.memory(.systemRAM)) == savedRAM, "RAM restored")
        #expect(try core.saveState() == saved, "saving right after loading gives the same bytes")
        #expect(try runScript(core, { script.buttons(player: $0, frame: $1) }, frames: 100 ..< 160) == ahead)
        #expect(try core.saveState() == aheadState, "re-running from the loaded state reproduces every byte")

        // A state travels as bytes (a state transfer) and loads the same.
        let received = try core.state(from: saved.bytes, expectedChecksum: saved.checksum)
        try core.loadState(received)
        #expect(try core.stateChecksum() == saved.checksum)
    }
}
