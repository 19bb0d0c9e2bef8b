import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Starting the lab's long-running processes (services, peers) with their output in a log file,
/// in this network namespace or another one, and stopping a group of them. Shared by the WAN
/// lab and the test support's namespace pairs.
public enum LoggedProcess {
    /// Starts `executable` with `arguments`, standard output and error to `log` (created empty),
    /// standard input from /dev/null. The `NETPLAY_*` variables of this process are not passed
    /// on; `environment` is added.
    public static func launch(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
                              log: String) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for key in env.keys where key.hasPrefix("NETPLAY_") { env[key] = nil }
        env.merge(environment) { _, new in new }
        process.environment = env
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// Starts `executable` inside network namespace `namespace` (`ip netns exec`, `ip` the path
    /// of iproute2's tool), as ``launch(_:_:environment:log:)``.
    public static func launch(inNamespace namespace: String, ip: String, _ executable: String, _ arguments: [String],
                              environment: [String: String] = [:], log: String) throws -> Process {
        try launch(ip, ["netns", "exec", namespace, executable] + arguments, environment: environment, log: log)
    }

    /// Asks every process of `processes` still running to terminate, waits up to `grace`
    /// seconds, then kills (SIGKILL) and reaps whichever still runs. Also the test support's and
    /// the benchmarks' stop for their children.
    public static func stop(_ processes: [Process], grace: Double = 3) {
        for process in processes where process.isRunning { process.terminate() }
        let deadline = Date().addingTimeInterval(grace)
        while processes.contains(where: \.isRunning), Date() < deadline { usleep(10_000) }
        for process in processes where process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}
