import Foundation
import Libretro
import NetplayTestSupport
import SystemTools

/// The C side of these tests: libNetplayC as built, the C programs in `c/` compiled against it
/// with `cc` (only netplay.h, and libretro's API for the core), nestopia and the NES test ROM.
/// Each is made once per test process (static lets are lazy and thread-safe); anything missing
/// fails the test with an explanation.
enum CFrontend {
    struct Missing: Error, CustomStringConvertible {
        let description: String
    }

    /// The package's root (this file is Tests/CAPITests/CFrontend.swift).
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    /// A directory for this test process's build products, removed at exit.
    private static let scratchDirectory = Result<String, any Error> {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("netplay-capi-\(getpid())").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        atexit { try? FileManager.default.removeItem(atPath: FileManager.default.temporaryDirectory.appendingPathComponent("netplay-capi-\(getpid())").path) }
        return path
    }

    static func scratch() throws -> String { try scratchDirectory.get() }

    private static let errorsProgram = Result<String, any Error> { try build("np_errors") }
    private static let nestopiaProgram = Result<String, any Error> { try build("np_nestopia") }

    /// `c/np_errors.c` or `c/np_nestopia.c` compiled against libNetplayC; its path.
    static func compile(_ name: String) throws -> String {
        try (name == "np_errors" ? errorsProgram : nestopiaProgram).get()
    }

    private static func build(_ name: String) throws -> String {
        let products = BuildProducts.directory.path
        guard FileManager.default.fileExists(atPath: products + "/libNetplayC.so") else {
            throw Missing(description: "libNetplayC.so is not built in \(products): run `swift build --build-tests` (or --product NetplayC)")
        }
        guard let cc = CC65.find("cc") else { throw Missing(description: "cc not found on PATH") }
        let output = try scratch() + "/" + name
        let result = SystemCommand.run(cc, [
            "-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-o", output, root + "/Tests/CAPITests/c/\(name).c",
            "-I", root + "/Sources/CNetplayAPI/include", "-I", root + "/Sources/CLibretro/include",
            "-L", products, "-lNetplayC", "-ldl", "-Wl,-rpath," + products,
        ])
        guard result.status == 0 else { throw Missing(description: "cc failed on \(name).c: \(result.output)") }
        return output
    }

    /// nestopia (`libretro-nestopia`, or `NETPLAY_LIBRETRO_CORE`).
    static func nestopiaCore() throws -> String {
        if let custom = ProcessInfo.processInfo.environment["NETPLAY_LIBRETRO_CORE"] { return custom }
        guard let path = LibretroCore.installedCore(named: "nestopia") else {
            throw Missing(description: "the nestopia libretro core is not installed: apt-get install libretro-nestopia")
        }
        return path
    }

    private static let rom = Result<String, any Error> {
        guard CC65.isAvailable else { throw Missing(description: "ca65/ld65 not found on PATH: install cc65") }
        let fixtures = root + "/Tests/Fixtures/nes"
        let output = try scratch() + "/netplay_test.nes"
        try CC65.build(source: fixtures + "/netplay_test.s", linkerConfig: fixtures + "/netplay_test.cfg", output: output)
        return output
    }

    /// Tests/Fixtures/nes/netplay_test.s assembled with ca65/ld65 into an iNES file.
    static func testROM() throws -> String { try rom.get() }
}
