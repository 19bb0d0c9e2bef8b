import CSupervisor
import Foundation
import MemberwiseInit

/// Finds a service's executable: a path is used as it is; a bare name is looked up in the
/// bin directories (the `--bin-dir` flag, then the supervisor's own directory), then in PATH.
@PublicMemberwiseInit
public struct CommandResolver: Sendable {
    /// Directories searched before PATH.
    public var directories: [String]
    /// The PATH value.
    public var path: String = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"

    /// The executable's absolute path, or nil when it cannot be found.
    public func resolve(_ command: String) -> String? {
        if command.contains("/") {
            let absolute = command.hasPrefix("/") ? command
                : (FileManager.default.currentDirectoryPath as NSString).appendingPathComponent(command)
            return FileManager.default.isExecutableFile(atPath: absolute) ? absolute : nil
        }
        for directory in directories + path.split(separator: ":").map(String.init) where !directory.isEmpty {
            let candidate = (directory as NSString).appendingPathComponent(command)
            if FileManager.default.isExecutableFile(atPath: candidate) {
                return candidate.hasPrefix("/") ? candidate
                    : (FileManager.default.currentDirectoryPath as NSString).appendingPathComponent(candidate)
            }
        }
        return nil
    }
}

/// Everything needed to start one instance: the resolved executable, its arguments and its
/// complete environment.
public struct LaunchPlan: Sendable, Equatable {
    /// Service name.
    public var service: String
    /// Instance name (also NETPLAY_INSTANCE).
    public var instance: String
    /// Replica index.
    public var replica: Int
    /// Absolute path of the executable.
    public var executable: String
    /// Arguments (without argv[0]).
    public var arguments: [String]
    /// The whole environment.
    public var environment: [String: String]
    /// The instance's request endpoint, if it has one.
    public var endpoint: String?

    /// The command line as one shell-like string (for logs and `--check`).
    public var commandLine: String {
        ([executable] + arguments).map { $0.contains(" ") || $0.isEmpty ? "'\($0)'" : $0 }.joined(separator: " ")
    }
}

/// Builds ``LaunchPlan``s from a ``ClusterConfig``.
@PublicMemberwiseInit
public struct LaunchPlanner: Sendable {
    /// The cluster.
    public let config: ClusterConfig
    /// Resolves commands.
    public let resolver: CommandResolver
    /// The supervisor's environment; NETPLAY_* variables are not passed on (the cluster file
    /// decides those).
    public let baseEnvironment: [String: String]
    /// The control endpoint children heartbeat to (as actually bound).
    public let supervisorEndpoint: String

    /// The cluster's trust store, given to every child (NETPLAY_KEYS_DIR), or nil.
    public var keysDirectory: String? = nil

    /// The plan for replica `replica` of `service`; throws a one-line reason when the command
    /// is missing or a template is wrong.
    public func plan(_ service: ServiceSpec, replica: Int) throws(ClusterConfigError) -> LaunchPlan {
        guard let executable = resolver.resolve(service.command) else {
            throw ClusterConfigError("services.\(service.name).command: '\(service.command)' not found in \(resolver.directories.joined(separator: ", ")) or PATH (build it first: swift build)")
        }
        let templates = TemplateContext(config: config, supervisorEndpoint: supervisorEndpoint)
        let instance = service.instanceName(replica: replica)
        func expand(_ text: String, _ path: String) throws(ClusterConfigError) -> String {
            do { return try templates.expand(text, service: service, replica: replica) } catch {
                throw ClusterConfigError("\(path): \(error.description)")
            }
        }
        var arguments: [String] = []
        for (key, _) in service.endpoints {
            arguments += ["--\(key)", service.endpoint(key, replica: replica)!]
        }
        for (index, argument) in service.arguments.enumerated() {
            arguments.append(try expand(argument, "services.\(service.name).args[\(index)]"))
        }
        var environment = baseEnvironment.filter { !$0.key.hasPrefix("NETPLAY_") }
        for (key, value) in config.environment { environment[key] = try expand(value, "environment.\(key)") }
        environment["NETPLAY_INSTANCE"] = instance
        environment["NETPLAY_SUPERVISOR"] = supervisorEndpoint
        environment["NETPLAY_DATA_DIR"] = templates.instanceDataDirectory(instance)
        if let keysDirectory { environment["NETPLAY_KEYS_DIR"] = keysDirectory }
        for (key, value) in service.environment { environment[key] = try expand(value, "services.\(service.name).environment.\(key)") }
        return LaunchPlan(service: service.name, instance: instance, replica: replica, executable: executable,
                          arguments: arguments, environment: environment, endpoint: service.endpoint("endpoint", replica: replica))
    }
}

/// A started child process: its pid (also its process group) and the read end of the pipe
/// that carries its stdout and stderr.
struct ChildProcess {
    let pid: pid_t
    let output: Int32

    /// Starts `plan`. Throws with the reason (e.g. exec failed: permission denied).
    static func spawn(_ plan: LaunchPlan) throws(ClusterConfigError) -> ChildProcess {
        var fds: [Int32] = [-1, -1]
        let piped = fds.withUnsafeMutableBufferPointer { nps_pipe($0.baseAddress!) }
        guard piped == 0 else { throw ClusterConfigError("cannot create a pipe: \(String(cString: strerror(-piped)))") }
        defer { close(fds[1]) }
        let argv = [plan.executable] + plan.arguments
        let envp = plan.environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        let pid = withCStrings(argv) { argvPointer in
            withCStrings(envp) { envPointer in
                nps_spawn(plan.executable, argvPointer, envPointer, fds[1], fds[1], nil)
            }
        }
        guard pid > 0 else {
            close(fds[0])
            throw ClusterConfigError("cannot start \(plan.executable): \(String(cString: strerror(-pid)))")
        }
        return ChildProcess(pid: pid, output: fds[0])
    }
}

/// Calls `body` with a NULL-terminated C array of C strings.
private func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R) -> R {
    var pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
    pointers.append(nil)
    defer { for pointer in pointers { free(pointer) } }
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}
