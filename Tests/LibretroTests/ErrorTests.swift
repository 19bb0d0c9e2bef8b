import Foundation
import Libretro
import NetplayTestSupport
import Rollback
import Testing

extension LibretroHostTests {
    @Test("a missing core file is reported as such")
    func missingCore() throws {
        let path = "/nonexistent/nestopia_libretro.so"
        let error = #expect(throws: LibretroError.self) {
            try LibretroCore(corePath: path, contentPath: try FakeCore.content())
        }
        #expect(error == .coreNotFound(path: path))
        #expect(error?.description.contains("libretro core not found: no file at \(path)") == true)
    }

    @Test("a file that is not a shared library cannot be loaded")
    func notASharedLibrary() throws {
        let path = try LibretroFixtures.scratchDirectory() + "/text_libretro.so"
        try "not an ELF file".write(toFile: path, atomically: true, encoding: .utf8)
        let error = #expect(throws: LibretroError.self) {
            try LibretroCore(corePath: path, contentPath: try FakeCore.content())
        }
        guard case .cannotLoadCore(let reported, let reason)? = error else {
            Issue.record("expected cannotLoadCore, got \(String(describing: error))")
            return
        }
        #expect(reported == path)
        #expect(!reason.isEmpty)
        #expect(error!.description.hasPrefix("cannot load \(path) as a shared library: "))
    }

    @Test("a shared library without the libretro entry points is not a core")
    func missingEntryPoints() throws {
        let path = try FakeCore.path(.init(omitRun: true))
        let error = #expect(throws: LibretroError.self) {
            try LibretroCore(corePath: path, contentPath: try FakeCore.content())
        }
        #expect(error == .notALibretroCore(path: path, missingSymbols: ["retro_run"]))
        #expect(error?.description == "\(path) is not a libretro core: it lacks retro_run")
    }

    @Test("a core speaking another API version is refused")
    func apiVersionMismatch() throws {
        let path = try FakeCore.path(.init(apiVersion: 2))
        let error = #expect(throws: LibretroError.self) {
            try LibretroCore(corePath: path, contentPath: try FakeCore.content())
        }
        #expect(error == .apiVersionMismatch(path: path, core: 2, host: 1))
        #expect(error?.description.contains("API version 2; this host implements version 1") == true)
    }

    @Test("a core that cannot save states cannot run under rollback")
    func serializationUnsupported() throws {
        let path = try FakeCore.path(.init(stateSize: 0))
        let error = #expect(throws: LibretroError.self) {
            try LibretroCore(corePath: path, contentPath: try FakeCore.content())
        }
        #expect(error == .serializationUnsupported(core: "FakeCore", reason: "retro_serialize_size is 0"))
        #expect(error?.description.contains("cannot run under rollback") == true)
        // A size of (size_t)-1 or of a terabyte is a broken core too, not a trap in the allocation.
        for (size, reason) in [(-1, "retro_serialize_size is -1"),
                               (1 << 40, "retro_serialize_size is 1099511627776, over 268435456")] {
            let broken = try FakeCore.path(.init(stateSize: size))
            let refused = #expect(throws: LibretroError.self) {
                try LibretroCore(corePath: broken, contentPath: try FakeCore.content())
            }
            #expect(refused == .serializationUnsupported(core: "FakeCore", reason: reason))
        }
        // The failed start released its callback slot: every slot is still free.
        let cores = try (0 ..< LibretroCore.maximumActiveCores).map { _ in
            try LibretroCore(corePath: try FakeCore.path(), contentPath: try FakeCore.content())
        }
        #expect(cores.count == LibretroCore.maximumActiveCores)
    }

    @Test("missing content is reported before the core sees it")
    func contentNotFound() throws {
        let path = "/nonexistent/game.nes"
        let error = #expect(throws: LibretroError.self) {
            try LibretroCore(corePath: try LibretroFixtures.nestopiaCore(), contentPath: path)
        }
        #expect(error == .contentNotFound(path: path))
        #expect(error?.description == "content not found: no file at \(path)")
    }

    @Test("content the core rejects is reported with the core's log")
    func contentRejected() throws {
        let garbage = try TestEnvironment.garbageROM()
        let error = #expect(throws: LibretroError.self) {
            try LibretroCore(corePath: try LibretroFixtures.nestopiaCore(), contentPath: garbage)
        }
        guard case .contentRejected(let path, let core, _)? = error else {
            Issue.record("expected contentRejected, got \(String(describing: error))")
            return
        }
        #expect(path == garbage)
        #expect(core == "Nestopia")
        #expect(error!.description.hasPrefix("Nestopia failed to load content \(garbage)"))

        let bad = try FakeCore.content(bad: true)
        let fakeError = #expect(throws: LibretroError.self) {
            try LibretroCore(corePath: try FakeCore.path(), contentPath: bad)
        }
        #expect(fakeError == .contentRejected(path: bad, core: "FakeCore",
                                              coreLog: ["fake core: content \(bad) is marked bad"]))
    }

    @Test("states of the wrong size, corrupt states and bad checksums are refused")
    func stateErrors() throws {
        let core = try TestEnvironment.nestopia()
        let fake = try LibretroCore(corePath: try FakeCore.path(), contentPath: try FakeCore.content())
        let foreign = try fake.saveState()
        #expect(foreign.bytes.count == 64)

        let sizeError = #expect(throws: LibretroError.self) { try core.loadState(foreign) }
        #expect(sizeError == .stateSizeMismatch(expected: core.stateSize, actual: 64))
        #expect(sizeError?.description.contains("this core and content use \(core.stateSize)-byte states, got 64") == true)
        #expect(throws: LibretroError.stateSizeMismatch(expected: core.stateSize, actual: 10)) {
            try core.state(from: Array(repeating: 0, count: 10))
        }

        let zeros = [UInt8](repeating: 0, count: core.stateSize)
        #expect(throws: LibretroError.unserializeFailed(core: "Nestopia", size: core.stateSize)) {
            try core.unserialize(zeros)
        }

        let good = try core.saveState()
        #expect(try core.state(from: good.bytes, expectedChecksum: good.checksum) == good)
        var corrupted = good.bytes
        corrupted[100] ^= 0x40
        let checksumError = #expect(throws: LibretroError.self) {
            try core.state(from: corrupted, expectedChecksum: good.checksum)
        }
        guard case .stateChecksumMismatch(let expected, _)? = checksumError else {
            Issue.record("expected stateChecksumMismatch, got \(String(describing: checksumError))")
            return
        }
        #expect(expected == good.checksum)
    }

    @Test("options and ports are checked")
    func invalidOptions() throws {
        let fake = try FakeCore.path()
        let content = try FakeCore.content()
        #expect(throws: LibretroError.invalidOptions("portCount must be 1 ... 8")) {
            try LibretroCore(corePath: fake, contentPath: content, options: .init(portCount: 0))
        }
        #expect(throws: LibretroError.invalidOptions("FakeCore has no core option fake_speed")) {
            try LibretroCore(corePath: fake, contentPath: content, options: .init(variables: ["fake_speed": "2x"]))
        }
        #expect(throws: LibretroError.invalidOptions("core options with invalid values: fake_mode=gamma (choices: alpha|beta)")) {
            try LibretroCore(corePath: fake, contentPath: content, options: .init(variables: ["fake_mode": "gamma"]))
        }
        let core = try LibretroCore(corePath: fake, contentPath: content, options: .init(portCount: 2))
        #expect(throws: LibretroError.invalidPort(2, portCount: 2)) { try core.setJoypad(.a, port: 2) }
        #expect(throws: LibretroError.invalidPort(2, portCount: 2)) { try LibretroGame(core: core, playerCount: 3) }
    }

    @Test("at most maximumActiveCores cores at once, each an independent instance with its own input")
    func callbackSlots() throws {
        let path = try FakeCore.path()
        let content = try FakeCore.content()
        var cores = try (0 ..< LibretroCore.maximumActiveCores).map { _ in
            try LibretroCore(corePath: path, contentPath: content)
        }
        #expect(cores.filter { !$0.isPrivateCopy }.count == 1, "one instance uses the file, the others copies")
        let error = #expect(throws: LibretroError.self) { try LibretroCore(corePath: path, contentPath: content) }
        #expect(error == .tooManyCores(limit: LibretroCore.maximumActiveCores))
        #expect(error?.description.contains("at most 8 at a time") == true)

        // Every core gets its own input and keeps its own emulator state.
        for (index, core) in cores.enumerated() {
            try core.setJoypad(JoypadButtons(rawValue: UInt16(1 << index)), port: 0)
            try core.setJoypad(JoypadButtons(rawValue: UInt16(0x8000 >> index)), port: 1)
            for _ in 0 ... index { core.run() }
        }
        for (index, core) in cores.enumerated() {
            let ram = try #require(core.memory(.systemRAM))
            #expect(FakeCore.uint32(ram, FakeCore.Layout.frames) == UInt32(index + 1))
            #expect(FakeCore.uint16(ram, FakeCore.Layout.port0) == UInt16(1 << index))
            #expect(FakeCore.uint16(ram, FakeCore.Layout.port1) == UInt16(0x8000 >> index))
        }

        // Closing one frees its slot for a new core.
        cores[3].close()
        #expect(cores[3].isClosed)
        cores.append(try LibretroCore(corePath: path, contentPath: content))
        cores.removeAll()
        let again = try LibretroCore(corePath: path, contentPath: content)
        #expect(!again.isPrivateCopy, "after every instance is closed the file itself is loaded again")
    }
}
