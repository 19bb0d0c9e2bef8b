import Foundation
import Synchronization
import WANHarness

/// Two fresh network namespaces, a veth pair between them (10.77.0.1/24 in `a`, 10.77.0.2/24 in
/// `b`), and the processes started inside them; ``tearDown()`` removes all of it.
public final class NamespacePair {
    /// Why namespaces cannot be made here (not root, no `ip`, no permission), or nil when they can.
    public static let unavailableReason: String? = {
        guard getuid() == 0 else { return "network namespaces need root" }
        guard let ip = Shell.which("ip") else { return "iproute2 ('ip') is not installed" }
        let probe = "np-probe-\(getpid())"
        guard Shell.run(ip, ["netns", "add", probe]).status == 0 else { return "cannot create network namespaces here" }
        _ = Shell.run(ip, ["netns", "del", probe])
        return nil
    }()

    /// The `ip` executable.
    public let ip = Shell.which("ip")!
    /// The namespace holding 10.77.0.1.
    public let a: String
    /// The namespace holding 10.77.0.2.
    public let b: String
    /// A scratch directory removed at tear-down.
    public let directory: String
    private var processes: [Process] = []
    private var created: [String] = []

    private static let serial = Mutex(Int.random(in: 10...50))

    /// 10 to 99, a different one for each pair this process makes (wrapping after 90).
    private static func nextSerial() -> Int {
        serial.withLock { value in
            defer { value = value >= 99 ? 10 : value + 1 }
            return value
        }
    }

    public init() throws {
        // Unique within this process (tests run in parallel: two pairs with one tag would share
        // namespaces and a directory, and one's tear-down would remove the other's), and
        // short enough for interface names (15 characters).
        let tag = "\(getpid() % 100_000)\(Self.nextSerial())"
        a = "np-a-\(tag)"
        b = "np-b-\(tag)"
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("netplay-netns-\(tag)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        do {
            for namespace in [a, b] {
                try step(["netns", "add", namespace])
                created.append(namespace)
                // DNS inside the namespace goes to its own loopback (`ip netns exec` mounts this over /etc).
                try FileManager.default.createDirectory(atPath: "/etc/netns/\(namespace)", withIntermediateDirectories: true)
                try "nameserver 127.0.0.1\n".write(toFile: "/etc/netns/\(namespace)/resolv.conf", atomically: true, encoding: .utf8)
            }
            try step(["link", "add", "vna\(tag)", "type", "veth", "peer", "name", "vnb\(tag)"])
            try step(["link", "set", "vna\(tag)", "netns", a])
            try step(["link", "set", "vnb\(tag)", "netns", b])
            for (namespace, address, veth) in [(a, "10.77.0.1/24", "vna\(tag)"), (b, "10.77.0.2/24", "vnb\(tag)")] {
                try step(["-n", namespace, "addr", "add", address, "brd", "+", "dev", veth])
                try step(["-n", namespace, "link", "set", veth, "up"])
                try step(["-n", namespace, "link", "set", "lo", "up"])
            }
        } catch {
            tearDown()
            throw error
        }
    }

    private func step(_ arguments: [String]) throws {
        let result = Shell.run(ip, arguments)
        guard result.status == 0 else { throw HarnessError("ip \(arguments.joined(separator: " ")) failed: \(result.output)") }
    }

    /// Starts `executable` inside `namespace`, output to `log`.
    public func launch(in namespace: String, _ executable: String, _ arguments: [String], environment: [String: String],
                log: String) throws -> Process {
        let process = try LoggedProcess.launch(inNamespace: namespace, ip: ip, executable, arguments,
                                               environment: environment, log: log)
        processes.append(process)
        return process
    }

    /// Stops every process, deletes the namespaces (and with them the veth pair) and the files.
    public func tearDown() {
        LoggedProcess.stop(processes)
        processes.removeAll()
        for namespace in created {
            _ = Shell.run(ip, ["netns", "del", namespace])
            try? FileManager.default.removeItem(atPath: "/etc/netns/\(namespace)")
        }
        created.removeAll()
        try? FileManager.default.removeItem(atPath: directory)
    }

    deinit { tearDown() }
}

/// Runs short commands and finds executables (the names network-namespace code reads best with;
/// ``tool(_:)`` and ``run(_:_:timeout:currentDirectory:)`` do the work).
public enum Shell {
    /// The path of `name` in the usual system directories.
    public static func which(_ name: String) -> String? { tool(name) }

    /// Runs `executable` to its end (at most 10 minutes); its exit status and output (stdout and
    /// stderr together), or -1 and the reason when it cannot start.
    public static func run(_ executable: String, _ arguments: [String]) -> (status: Int32, output: String) {
        do {
            return try NetplayTestSupport.run(executable, arguments, timeout: 600)
        } catch {
            return (-1, "\(error)")
        }
    }
}

