import Foundation
import NetplayTestSupport
import Testing

/// Every executable answers `--help` with its usage (exit 0) and a bad flag with one line and a
/// non-zero exit: the contract operators rely on.
@Suite("Every executable's --help and bad flags", .ownThread)
struct ExecutableHelpTests {
    static let executables = ["netplay-supervisor", "netplay-discovery", "netplay-coordinator", "netplay-sync",
                              "netplay-telemetry", "netplay-peer", "netplayctl"]

    @Test(arguments: executables)
    func helpPrintsUsageAndExitsZero(executable: String) throws {
        let path = try BuildProducts.url(of: executable).path
        let result = try run(path, ["--help"], timeout: 30)
        #expect(result.status == 0, "\(executable) --help exited \(result.status): \(result.output.prefix(400))")
        #expect(result.output.contains("USAGE: \(executable)"), "\(result.output.prefix(400))")
    }

    @Test(arguments: executables)
    func unknownFlagIsOneLineAndNonZero(executable: String) throws {
        let path = try BuildProducts.url(of: executable).path
        let result = try run(path, ["--no-such-flag"], timeout: 30)
        #expect(result.status != 0)
        let lines = result.output.split(separator: "\n")
        #expect(lines.count == 1, "\(executable): \(result.output)")
        #expect(lines.first?.hasPrefix("\(executable): ") == true, "\(result.output)")
    }

    /// Values that once got past validation and trapped (a deadline of `inf` seconds) or ran a
    /// child that refused them a minute later (a demo whose length no checksum interval divides)
    /// are one line and a non-zero exit at once.
    @Test(arguments: [
        ("netplayctl", ["tap", "tcp://127.0.0.1:1", "--duration", "inf"], "--duration"),
        ("netplayctl", ["rooms", "watch", "--duration", "1e300"], "--duration"),
        ("netplay-peer", ["demo", "--frames", "100"], "--frames must be a multiple of 60"),
    ])
    func valuesThatOnceTrappedAreOneLineAndNonZero(executable: String, arguments: [String], reason: String) throws {
        let path = try BuildProducts.url(of: executable).path
        let result = try run(path, arguments, timeout: 30)
        #expect(result.status != 0, "\(executable) \(arguments) exited \(result.status): \(result.output)")
        let lines = result.output.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].contains(reason), "\(result.output)")
    }

    /// Every flag of the services, the supervisor and netplay-peer (each subcommand) names the
    /// `NETPLAY_*` variable it falls back to, so a deployment can set anything through the
    /// environment. Not netplayctl: its connection flags have variables (its commands' own tests),
    /// while its commands' arguments (what to list, whom to kick, --json) are the call itself.
    @Test(arguments: ["netplay-supervisor", "netplay-discovery", "netplay-coordinator", "netplay-sync", "netplay-telemetry",
                      "netplay-peer"])
    func everyFlagNamesItsEnvironmentVariable(executable: String) throws {
        let path = try BuildProducts.url(of: executable).path
        var commands: [[String]] = [[]]
        var checked = 0
        while let command = commands.popLast() {
            let help = try run(path, command + ["--help"], timeout: 30).output
            for (flag, text) in Self.optionBlocks(of: help) where !Self.actions.contains(flag) {
                checked += 1
                #expect(text.contains("NETPLAY_"), "\(executable) \(command.joined(separator: " ")) \(flag) names no NETPLAY_* variable: \(text)")
            }
            commands += Self.subcommands(of: help).map { command + [$0] }
        }
        #expect(checked > 10, "\(executable): only \(checked) flags found")
    }

    /// Flags that are actions of one call, not settings: help, version, the supervisor's
    /// validate-and-exit.
    static let actions: Set<String> = ["-h", "--help", "--version", "--check"]

    /// The options sections of a help screen (OPTIONS:, and groups such as SERVICE OPTIONS (...):):
    /// each flag with its whole (wrapped) text.
    static func optionBlocks(of help: String) -> [(String, String)] {
        var blocks: [(String, String)] = []
        var inOptions = false
        for line in help.split(separator: "\n", omittingEmptySubsequences: false) {
            if let first = line.first, first != " " {
                inOptions = line.hasSuffix(":") && line.contains("OPTIONS")
            } else if inOptions, line.hasPrefix("  -"), let flag = line.split(separator: " ").first {
                blocks.append((String(flag.trimmingCharacters(in: CharacterSet(charactersIn: ","))), String(line)))
            } else if inOptions, line.hasPrefix(" "), !blocks.isEmpty {
                blocks[blocks.count - 1].1 += " " + line.trimmingCharacters(in: .whitespaces)
            }
        }
        return blocks
    }

    /// The names a SUBCOMMANDS section lists (not `help`).
    static func subcommands(of help: String) -> [String] {
        guard help.contains("SUBCOMMANDS:"), let section = help.components(separatedBy: "SUBCOMMANDS:").last else { return [] }
        var names: [String] = []
        for line in section.split(separator: "\n", omittingEmptySubsequences: false).dropFirst() {
            if line.isEmpty { break }
            guard line.hasPrefix("  "), !line.hasPrefix("   "), let name = line.split(separator: " ").first else { continue }
            if name != "help" { names.append(String(name.replacingOccurrences(of: "(default)", with: ""))) }
        }
        return names
    }
}
