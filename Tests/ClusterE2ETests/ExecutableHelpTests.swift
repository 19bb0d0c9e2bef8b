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
}
