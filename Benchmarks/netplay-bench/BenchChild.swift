import Foundation
import WANHarness

/// A process a benchmark started (a relay, a C baseline), with the scratch directory it owns:
/// its CPU time so far, and a stop that cannot hang the benchmark.
final class BenchChild: @unchecked Sendable {
    let process: Process
    let directory: URL?

    init(process: Process, directory: URL?) {
        self.process = process
        self.directory = directory
    }

    /// CPU seconds (user + system) the process used so far.
    func cpuSeconds() -> Double {
        guard let text = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return 0 }
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// SIGTERM, then SIGKILL if it still runs 3 s later (a child that inherited a blocked
    /// SIGTERM would otherwise hang the benchmark); removes its directory.
    func stop() {
        LoggedProcess.stop([process])
        if let directory { try? FileManager.default.removeItem(at: directory) }
    }
}
