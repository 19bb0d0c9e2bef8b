import Foundation
import SystemTools
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A real-kernel WAN path for tests and benchmarks: services run in the root network namespace
/// on ``serviceAddress``; each ``WANPeer`` is a network namespace whose only route leads through
/// a pair of TUN devices joined by `netplay-wanlink` (delay and jitter, both directions) and
/// iptables `statistic` rules (random loss, both directions).
///
/// Addresses: the lab owns 10.X.0.0/16 for one X free on this machine; services use 10.X.255.1
/// (a /32 on `lo`), peer n is 10.X.n.2. Names carry this process's pid and a per-process serial,
/// so labs in parallel tests and in other processes never share anything, and leftovers of a
/// process that died are removed when the next lab is made. ``tearDown()`` (also run by deinit)
/// removes every namespace, device, address, rule and forwarder the lab made.
public final class WANLab {
    /// Why a lab cannot be built here (not root, no `ip`, no `iptables`, no /dev/net/tun, or
    /// namespaces not permitted), or nil when it can.
    public static let unavailableReason: String? = {
        guard getuid() == 0 else { return "the WAN harness needs root (network namespaces, TUN devices, iptables)" }
        guard let ip = SystemCommand.which("ip") else { return "iproute2 ('ip') is not installed" }
        guard SystemCommand.which("iptables") != nil else { return "iptables is not installed" }
        guard access("/dev/net/tun", R_OK | W_OK) == 0 else { return "/dev/net/tun is not available" }
        let probe = "wanprobe-\(getpid())"
        guard SystemCommand.run(ip, ["netns", "add", probe]).status == 0 else { return "cannot create network namespaces here" }
        defer { SystemCommand.run(ip, ["netns", "del", probe]) }
        let rule = SystemCommand.run(ip, ["netns", "exec", probe, SystemCommand.which("iptables")!, "-t", "raw", "-A", "PREROUTING",
                                           "-m", "statistic", "--mode", "random", "--probability", "0.5", "-j", "DROP"])
        guard rule.status == 0 else { return "iptables' statistic match does not work here: \(rule.output.prefix(200))" }
        return nil
    }()

    /// The address services bind (or connect from) in the root namespace, e.g. "10.213.255.1".
    public let serviceAddress: String
    /// The lab's tag: "<pid>-<serial>", part of every name it creates.
    public let tag: String
    /// A scratch directory for forwarder logs, removed at tear-down.
    public let directory: String
    /// The peers made so far.
    public private(set) var peers: [WANPeer] = []

    let ip: String
    let iptables: String
    let wanlink: String
    let network: Int
    private var torn = false
    /// `/proc/sys/net/ipv4/ip_forward` before ``routeBetweenPeers()`` set it, to restore.
    private var forwardingBefore: String?
    private var forwardRules: [[String]] = []

    private static let serial = Mutex(0)

    /// Builds the lab: removes leftovers of dead processes, picks a free 10.X.0.0/16, and puts
    /// ``serviceAddress`` on `lo`. `wanlinkPath` defaults to ``locateWanlink()``.
    public init(wanlinkPath: String? = nil) throws {
        if let reason = Self.unavailableReason { throw WANHarnessError("WAN harness unavailable: \(reason)") }
        ip = SystemCommand.which("ip")!
        iptables = SystemCommand.which("iptables")!
        wanlink = try wanlinkPath ?? Self.locateWanlink()
        let serial = Self.serial.withLock { value in
            defer { value = (value + 1) % 100 }
            return value
        }
        tag = "\(getpid())-\(serial)"
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("netplay-wan-\(tag)").path
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)

        // Machine-wide: other processes pick networks too, so choose and claim under a file lock.
        let lock = open("/run/netplay-wan.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        if lock >= 0 { flock(lock, LOCK_EX) }
        defer { if lock >= 0 { flock(lock, LOCK_UN); close(lock) } }
        Self.removeLeftovers(ip: ip, iptables: iptables)
        let used = SystemCommand.run(ip, ["-o", "addr", "show"]).output + SystemCommand.run(ip, ["route", "show", "table", "all"]).output
        let candidates = Array(100...249).shuffled()
        guard let free = candidates.first(where: { !used.contains(" 10.\($0).") && !used.contains("\n10.\($0).") && !used.hasPrefix("10.\($0).") }) else {
            throw WANHarnessError("no free 10.X.0.0/16 network for a WAN lab (100...249 all in use)")
        }
        network = free
        serviceAddress = "10.\(free).255.1"
        do {
            try SystemCommand.require(ip, ["addr", "add", "\(serviceAddress)/32", "dev", "lo", "label", "lo:w\(tag)"])
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
    }

    /// Adds a peer: its own namespace reaching ``serviceAddress`` at a one-way delay of
    /// `delayMs` ± `jitterMs` (uniform) each way and `lossPercent` random loss each way.
    /// Packets stay in order per direction unless `reorder` is true.
    @discardableResult
    public func addPeer(delayMs: Double, jitterMs: Double = 0, lossPercent: Double = 0, reorder: Bool = false) throws -> WANPeer {
        guard !torn else { throw WANHarnessError("the lab has been torn down") }
        guard peers.count < 99 else { throw WANHarnessError("a lab holds at most 99 peers") }
        let peer = WANPeer(lab: self, index: peers.count + 1)
        peers.append(peer)
        try peer.build(delayMs: delayMs, jitterMs: jitterMs, lossPercent: lossPercent, reorder: reorder)
        return peer
    }

    /// Lets peers reach each other through the root namespace (a peer standing in for a relay's
    /// host, the others for players): IPv4 forwarding on (restored at tear-down) and FORWARD
    /// rules accepting the lab's network. A packet between two peers crosses both peers' paths,
    /// so it meets both delays and both losses.
    public func routeBetweenPeers() throws {
        guard forwardingBefore == nil else { return }
        let path = "/proc/sys/net/ipv4/ip_forward"
        forwardingBefore = (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "0"
        do {
            try "1\n".write(toFile: path, atomically: false, encoding: .utf8)
        } catch {
            throw WANHarnessError("cannot turn IPv4 forwarding on: \(error)")
        }
        for direction in ["-s", "-d"] {
            let rule = ["FORWARD", direction, "10.\(network).0.0/16", "-m", "comment", "--comment", "wan-\(tag)", "-j", "ACCEPT"]
            try SystemCommand.require(iptables, ["-I"] + rule)
            forwardRules.append(rule)
        }
    }

    /// Stops every peer's processes and forwarder, deletes namespaces, devices, rules and the
    /// service address (and turns forwarding back as it was). Safe to call twice.
    public func tearDown() {
        guard !torn else { return }
        torn = true
        for peer in peers { peer.tearDown() }
        for rule in forwardRules { SystemCommand.run(iptables, ["-D"] + rule) }
        if let forwardingBefore { try? (forwardingBefore + "\n").write(toFile: "/proc/sys/net/ipv4/ip_forward", atomically: false, encoding: .utf8) }
        SystemCommand.run(ip, ["addr", "del", "\(serviceAddress)/32", "dev", "lo"])
        try? FileManager.default.removeItem(atPath: directory)
    }

    deinit { tearDown() }

    // MARK: Finding netplay-wanlink

    /// The `netplay-wanlink` binary: `NETPLAY_WANLINK_BIN`, `NETPLAY_BIN_DIR`, beside the running
    /// executable (or up to three directories above it, as for a test bundle), `.build/debug` or
    /// `.build/release` under the current directory, or `swift build --show-bin-path`.
    public static func locateWanlink() throws -> String {
        let environment = ProcessInfo.processInfo.environment
        let name = "netplay-wanlink"
        var candidates: [String] = []
        if let explicit = environment["NETPLAY_WANLINK_BIN"] { candidates.append(explicit) }
        if let directory = environment["NETPLAY_BIN_DIR"] { candidates.append("\(directory)/\(name)") }
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        for _ in 0..<4 {
            directory.deleteLastPathComponent()
            candidates.append(directory.appendingPathComponent(name).path)
        }
        let cwd = FileManager.default.currentDirectoryPath
        candidates += ["\(cwd)/.build/debug/\(name)", "\(cwd)/.build/release/\(name)"]
        if let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) { return found }
        if let swift = SystemCommand.which("swift") {
            let result = SystemCommand.run(swift, ["build", "--show-bin-path"])
            let path = result.output.trimmingCharacters(in: .whitespacesAndNewlines) + "/\(name)"
            if result.status == 0, FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        throw WANHarnessError("\(name) is not built (looked beside \(CommandLine.arguments[0]) and in .build): run `swift build` first")
    }

    // MARK: Leftovers of dead processes

    /// The pid in a name "PREFIX<pid>-...", or nil.
    static func pid(in name: Substring, after prefix: String) -> Int32? {
        guard name.hasPrefix(prefix) else { return nil }
        let digits = name.dropFirst(prefix.count).prefix(while: \.isNumber)
        guard !digits.isEmpty, name.dropFirst(prefix.count + digits.count).first == "-" else { return nil }
        return Int32(digits)
    }

    /// Removes namespaces `wan-<pid>-*`, devices `wo<pid>-*`, `lo:w<pid>-*` addresses and raw-table
    /// and FORWARD rules commented `wan-<pid>-*` whose process is gone (a test that crashed).
    static func removeLeftovers(ip: String, iptables: String) {
        for line in SystemCommand.run(ip, ["netns", "list"]).output.split(separator: "\n") {
            let name = line.split(separator: " ").first ?? ""
            if let pid = pid(in: name, after: "wan-"), processIsGone(pid) {
                SystemCommand.run(ip, ["netns", "del", String(name)])
            }
        }
        for line in SystemCommand.run(ip, ["-o", "link", "show"]).output.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count > 1 else { continue }
            let name = fields[1].split(separator: ":").first.map { $0.split(separator: "@").first ?? $0 } ?? ""
            if let pid = pid(in: name, after: "wo"), processIsGone(pid) {
                SystemCommand.run(ip, ["link", "del", String(name)])
            }
        }
        for line in SystemCommand.run(ip, ["-o", "-4", "addr", "show", "dev", "lo"]).output.split(separator: "\n") {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\\" })
            guard let inet = fields.firstIndex(of: "inet"), inet + 1 < fields.count,
                  let label = fields.first(where: { $0.hasPrefix("lo:w") }),
                  let pid = pid(in: label, after: "lo:w"), processIsGone(pid) else { continue }
            SystemCommand.run(ip, ["addr", "del", String(fields[inet + 1]), "dev", "lo"])
        }
        for (table, chain) in [("raw", "PREROUTING"), ("filter", "FORWARD")] {
            for line in SystemCommand.run(iptables, ["-t", table, "-S", chain]).output.split(separator: "\n") {
                var fields = line.split(separator: " ").map(String.init)
                guard fields.first == "-A", let comment = fields.firstIndex(of: "--comment"), comment + 1 < fields.count,
                      let pid = pid(in: Substring(fields[comment + 1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))), after: "wan-"),
                      processIsGone(pid) else { continue }
                fields[0] = "-D"
                SystemCommand.run(iptables, ["-t", table] + fields)
            }
        }
    }
}
