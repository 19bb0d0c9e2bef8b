import Foundation
import NetplayService
import Synchronization

/// Starts the toolkit's built executables as real processes for end-to-end tests, captures
/// their output, and makes sure none outlives the test.
public final class ServiceProcess: @unchecked Sendable {
    /// The running process.
    public let process: Process
    /// The executable's name.
    public let name: String
    private let output = OutputCollector()
    private let drain: PipeDrain

    /// Launches `executable` (a product name such as `netplay-discovery`) with `arguments`.
    /// `standardOutput`, when given, takes its standard output instead (the log then holds only
    /// standard error).
    public convenience init(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
                            standardOutput: FileHandle? = nil) throws {
        try self.init(url: try BuildProducts.url(of: executable), arguments, environment: environment, standardOutput: standardOutput)
    }

    /// Launches the program at `url` (a built product, or a system tool such as make) with
    /// `arguments`, in this process's environment without its `NETPLAY_*` variables and `unset`,
    /// plus `environment`.
    public init(url: URL, _ arguments: [String], environment: [String: String] = [:], unset: Set<String> = [],
                standardOutput: FileHandle? = nil) throws {
        name = url.lastPathComponent
        process = Process()
        process.executableURL = url
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("NETPLAY_") && !unset.contains($0.key) }
        env.merge(environment) { _, new in new }
        process.environment = env
        let pipe = Pipe()
        process.standardOutput = standardOutput ?? pipe
        process.standardError = pipe
        drain = PipeDrain(pipe, deliver: { [output] in output.append($0) })
        try process.run()
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
    }

    /// Everything the process wrote to stdout and stderr so far.
    public var log: String { output.text }

    /// The process id.
    public var pid: Int32 { process.processIdentifier }

    /// Sends `signal` to the process.
    public func send(_ signal: Int32) { kill(process.processIdentifier, signal) }

    /// Waits (briefly) until the output pipe reached its end: after the process exits, its last
    /// lines may still be in the pipe.
    public func waitForOutputEnd() { drain.waitForEnd(seconds: 2) }

    /// Waits up to `seconds` for the process to exit; returns its exit status, or nil if it is
    /// still running.
    @discardableResult
    public func waitForExit(seconds: Double) -> Int32? {
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { return nil }
        // Its last words may still be in the pipe: wait (briefly) until the reader saw the end.
        drain.waitForEnd(seconds: 2)
        return process.terminationStatus
    }

    /// How the process ended: `.exit` or `.uncaughtSignal`.
    public var terminationReason: Process.TerminationReason { process.terminationReason }

    /// Kills the process if it is still running.
    public func kill9() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
    }
}

/// Finds the built executables next to the test bundle.
public enum BuildProducts {
    /// The directory holding the built products.
    public static var directory: URL {
        if let override = ProcessInfo.processInfo.environment["NETPLAY_BIN_DIR"] {
            return URL(fileURLWithPath: override)
        }
        var candidate = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        for _ in 0..<4 {
            candidate.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: candidate.appendingPathComponent("netplayctl").path) {
                return candidate
            }
        }
        return URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(".build/debug")
    }

    /// The URL of `executable` (a product name, or an absolute path to another program); throws
    /// when it has not been built.
    public static func url(of executable: String) throws -> URL {
        let url = executable.hasPrefix("/") ? URL(fileURLWithPath: executable) : directory.appendingPathComponent(executable)
        guard FileManager.default.isExecutableFile(atPath: url.path) else {
            throw HarnessError("\(executable) is not built in \(directory.path): run `swift build` first")
        }
        return url
    }
}

/// Loopback ports for test processes, chosen so parallel tests do not clash: each is free when
/// picked and handed out once per test run.
///
/// They come from 10000-16999, below the kernel's ephemeral range (32768+) and below the
/// shifted clusters' ports (`ClusterPorts`: 17000+) and the supervisor suites' blocks (20000+).
/// A port from the ephemeral range can be taken by any outgoing connection (or a client's
/// reconnect to itself) while the service on it is down, and a test that restarts a killed
/// service on its old endpoint then fails to bind it ("address already in use").
public enum TestPorts {
    private static let handedOut = Mutex<Set<Int>>([])
    /// Where the ports come from.
    public static let range = 10000...16999

    /// A currently free TCP port on 127.0.0.1, from `range`.
    public static func free() -> Int {
        while true {
            let port = Int.random(in: range)
            let fresh = handedOut.withLock { $0.insert(port).inserted }
            if fresh && FreePort.isFree(port) { return port }
        }
    }

    /// A `tcp://127.0.0.1:PORT` endpoint on a free port.
    public static func endpoint() -> String { "tcp://127.0.0.1:\(free())" }
}

/// Polls `condition` every 20 ms until it holds or `seconds` pass; returns whether it held.
public func eventually(within seconds: Double, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    repeat {
        if try condition() { return true }
        usleep(20_000)
    } while Date() < deadline
    return try condition()
}

/// A test-harness failure with a message.
public struct HarnessError: Error, CustomStringConvertible {
    /// The message.
    public let description: String
    /// Creates an error.
    public init(_ description: String) { self.description = description }
}

/// The resident memory of process `pid`, from /proc (0 when it cannot be read).
public func residentBytes(_ pid: Int32) -> Int {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
          let kib = Int(line.split(separator: " ").dropFirst().first { !$0.isEmpty } ?? "") else { return 0 }
    return kib << 10
}
