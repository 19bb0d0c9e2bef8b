import Foundation

/// Builds 6502 programs with the cc65 suite's assembler and linker (`ca65`, `ld65`; Debian
/// package `cc65`). Tests, benchmarks and demos use it to turn the repository's NES test
/// program into an iNES file at run time, so no ROM is ever committed.
public enum CC65 {
    /// Why a build failed.
    public enum BuildError: Error, Sendable, Hashable, CustomStringConvertible {
        /// The tool is not on `PATH`.
        case toolNotFound(String)
        /// The tool ran and failed; `output` is what it printed.
        case toolFailed(tool: String, status: Int32, output: String)

        public var description: String {
            switch self {
            case .toolNotFound(let tool):
                return "\(tool) not found on PATH: install cc65 (Debian: apt-get install cc65)"
            case .toolFailed(let tool, let status, let output):
                return "\(tool) failed with status \(status): \(output)"
            }
        }
    }

    /// The path of `tool` on `PATH`, or nil.
    public static func find(_ tool: String) -> String? { SystemCommand.onPath(tool) }

    /// Whether both `ca65` and `ld65` are installed.
    public static var isAvailable: Bool { find("ca65") != nil && find("ld65") != nil }

    /// Assembles `source` with ca65 and links it with ld65 using `linkerConfig`, writing
    /// `output`. The object file goes next to `output`.
    public static func build(source: String, linkerConfig: String, output: String) throws {
        let object = output + ".o"
        defer { try? FileManager.default.removeItem(atPath: object) }
        try run("ca65", ["-o", object, source])
        try run("ld65", ["-C", linkerConfig, "-o", output, object])
    }

    private static func run(_ tool: String, _ arguments: [String]) throws {
        guard let executable = find(tool) else { throw BuildError.toolNotFound(tool) }
        let result = SystemCommand.run(executable, arguments)
        guard result.status == 0 else {
            throw BuildError.toolFailed(tool: tool, status: result.status, output: result.output)
        }
    }
}
