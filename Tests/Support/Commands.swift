import Foundation
import NetplayService
import Synchronization
import WANHarness

/// The binary of a Debian tool, or nil when it is not installed.
public func tool(_ name: String) -> String? {
    for directory in ["/usr/bin", "/usr/local/bin", "/bin", "/usr/sbin", "/sbin"] {
        let path = "\(directory)/\(name)"
        if FileManager.default.isExecutableFile(atPath: path) { return path }
    }
    return nil
}

/// Runs a command to completion (after `timeout` seconds: SIGTERM, then SIGKILL 5 s later, as
/// a child started from a test's thread inherits its blocked signals); returns its exit status
/// and combined standard output and error.
@discardableResult
public func run(_ executable: String, _ arguments: [String], timeout: Double = 60,
                currentDirectory: String? = nil) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let currentDirectory { process.currentDirectoryURL = URL(fileURLWithPath: currentDirectory) }
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    let output = OutputCollector()
    let drain = PipeDrain(pipe, deliver: { output.append($0) })
    try process.run()
    let deadline = Date().addingTimeInterval(timeout)
    while process.isRunning && Date() < deadline { usleep(20_000) }
    LoggedProcess.stop([process], grace: 5)
    process.waitUntilExit()
    // Its last words may still be in the pipe; a child it left behind may hold the pipe open.
    drain.waitForEnd(seconds: 5)
    return (process.terminationStatus, output.text)
}

/// Collects a child's output from a pipe's reader thread.
public final class OutputCollector: Sendable {
    private let storage = Mutex(Data())
    /// Creates an empty collector.
    public init() {}
    /// Appends bytes.
    public func append(_ more: Data) { storage.withLock { $0.append(more) } }
    /// Everything collected so far, as UTF-8 text.
    public var text: String { storage.withLock { String(decoding: $0, as: UTF8.self) } }
}

/// The repository's root directory (tests read compose/, Makefile, fixtures from it).
public let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// Debian tools the real-component tests drive. `make deps-test` installs them; when one is
/// missing and the tests run as root, it is installed here once (apt-get), so a fresh machine
/// still runs the tests.
public enum DebianTools {
    private static let attempted = Mutex<Set<String>>([])

    /// The tool's path, installing `package` first when needed and possible.
    public static func require(_ name: String, package: String) -> String? {
        if let path = tool(name) { return path }
        let first = attempted.withLock { $0.insert(package).inserted }
        if first, getuid() == 0 {
            _ = try? run("/bin/sh", ["-c", "flock /tmp/netplay-apt.lock sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \(package) >/dev/null 2>&1 || (apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \(package) >/dev/null 2>&1)'"],
                         timeout: 600)
        }
        return tool(name)
    }
}
