import Foundation
import Libretro
import SystemTools

/// What tests that run real emulator cores need from the machine, each made once per test
/// process: a scratch directory, nestopia (`libretro-nestopia`, or `NETPLAY_LIBRETRO_CORE`), the
/// NES test program assembled with cc65, and C programs or cores compiled with `cc`. Anything
/// missing fails the test with ``Missing``, which says what to install.
public enum LibretroFixtures {
    /// What the machine lacks, and how to get it.
    public struct Missing: Error, CustomStringConvertible {
        public let description: String
        /// A reason to show.
        public init(_ description: String) { self.description = description }
    }

    /// Held while a value is made, so suites running side by side never build the same file at
    /// once; recursive, because a value may need another (the ROM needs the scratch directory).
    private static let lock = NSRecursiveLock()
    nonisolated(unsafe) private static var values: [String: String] = [:]

    /// `make()`'s result, computed once per process under `key` (a failure is tried again by the
    /// next caller).
    public static func cached(_ key: String, _ make: () throws -> String) throws -> String {
        lock.lock()
        defer { lock.unlock() }
        if let value = values[key] { return value }
        let value = try make()
        values[key] = value
        return value
    }

    /// A directory for this test process's build products (ROM, compiled cores and programs),
    /// removed at exit.
    public static func scratchDirectory() throws -> String {
        try cached("scratch") {
            let path = scratchPath()
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            atexit { try? FileManager.default.removeItem(atPath: LibretroFixtures.scratchPath()) }
            return path
        }
    }

    private static func scratchPath() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("netplay-core-tests-\(getpid())", isDirectory: true).path
    }

    /// The nestopia core: `$NETPLAY_LIBRETRO_CORE`, or the installed one.
    public static func nestopiaCore() throws -> String {
        if let custom = ProcessInfo.processInfo.environment["NETPLAY_LIBRETRO_CORE"], !custom.isEmpty { return custom }
        guard let path = LibretroCore.installedCore(named: "nestopia") else {
            throw Missing("the nestopia libretro core is not installed: apt-get install libretro-nestopia "
                + "(or set NETPLAY_LIBRETRO_CORE to a core's path)")
        }
        return path
    }

    /// The NES test program (``SystemTools/NESTestProgram``) as an iNES file in the scratch directory.
    public static func testROM() throws -> String {
        try cached("rom") {
            guard CC65.isAvailable else {
                throw Missing("ca65/ld65 not found on PATH: install cc65 (apt-get install cc65) to build the NES test program")
            }
            let output = try scratchDirectory() + "/netplay_test.nes"
            try NESTestProgram.build(output: output)
            return output
        }
    }

    /// Runs `tool` from `PATH` to its end; throws ``Missing`` with its output when it is absent or
    /// fails (on `what`, when given).
    public static func runTool(_ tool: String, what: String? = nil, _ arguments: [String]) throws {
        guard let executable = CC65.find(tool) else { throw Missing("\(tool) not found on PATH") }
        let (status, output) = Shell.run(executable, arguments)
        guard status == 0 else { throw Missing("\(tool) failed\(what.map { " on \($0)" } ?? ""): \(output)") }
    }
}
