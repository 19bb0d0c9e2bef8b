import Foundation
import SystemTools
#if canImport(Glibc)
import Glibc
#endif

/// One peer of a ``WANLab``: a network namespace with address ``address`` whose default route is
/// a TUN device (`wan0`); its twin TUN device in the root namespace routes ``address``; a
/// `netplay-wanlink` process joins the two, holding packets for the delay; raw-table iptables
/// rules drop packets at random on arrival on either side (ingress, so a sender never sees the
/// drop as a send error, as it would for a rule on OUTPUT).
public final class WANPeer {
    /// 1...99 within its lab.
    public let index: Int
    /// The network namespace's name (`ip netns exec NAME ...`).
    public let namespace: String
    /// The peer's IPv4 address inside its namespace, e.g. "10.213.1.2".
    public let address: String
    /// The TUN device inside the namespace.
    public let innerDevice = "wan0"
    /// The twin TUN device in the root namespace.
    public let outerDevice: String
    /// The current one-way delay, each direction, in milliseconds.
    public private(set) var delayMs: Double = 0
    /// The current uniform jitter (±) in milliseconds.
    public private(set) var jitterMs: Double = 0
    /// The current loss each way, in percent.
    public private(set) var lossPercent: Double = 0
    /// Whether jitter may reorder packets.
    public private(set) var reorder = false
    /// The forwarder's log (its configuration line and, after it stops, its packet counts).
    public var forwarderLog: String { "\(lab.directory)/peer\(index)-wanlink.log" }

    private unowned let lab: WANLab
    private var forwarder: Process?
    private var processes: [Process] = []
    private var namespaceMade = false
    private var outerMade = false
    private var rules: [(inNamespace: Bool, arguments: [String])] = []
    private var torn = false

    init(lab: WANLab, index: Int) {
        self.lab = lab
        self.index = index
        namespace = "wan-\(lab.tag)-\(index)"
        outerDevice = "wo\(lab.tag)-\(index)"
        address = "10.\(lab.network).\(index).2"
    }

    func build(delayMs: Double, jitterMs: Double, lossPercent: Double, reorder: Bool) throws {
        let ip = lab.ip
        let ns = ["-n", namespace]
        try SystemCommand.require(ip, ["netns", "add", namespace])
        namespaceMade = true
        try SystemCommand.require(ip, ["tuntap", "add", "dev", outerDevice, "mode", "tun"])
        outerMade = true
        try SystemCommand.require(ip, ns + ["tuntap", "add", "dev", innerDevice, "mode", "tun"])
        // No IPv6 on the path: router solicitations and the like would only add noise.
        try? "1\n".write(toFile: "/proc/sys/net/ipv6/conf/\(outerDevice)/disable_ipv6", atomically: false, encoding: .utf8)
        SystemCommand.run(ip, ["netns", "exec", namespace, "sh", "-c", "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6"])
        try SystemCommand.require(ip, ["link", "set", outerDevice, "up"])
        try SystemCommand.require(ip, ["route", "add", "\(address)/32", "dev", outerDevice])
        try SystemCommand.require(ip, ns + ["link", "set", "lo", "up"])
        try SystemCommand.require(ip, ns + ["addr", "add", "\(address)/32", "dev", innerDevice])
        try SystemCommand.require(ip, ns + ["link", "set", innerDevice, "up"])
        try SystemCommand.require(ip, ns + ["route", "add", "default", "dev", innerDevice])
        try startForwarder(delayMs: delayMs, jitterMs: jitterMs, reorder: reorder)
        try setLoss(percent: lossPercent)
    }

    // MARK: Changing the path of a live peer

    /// Changes the delay and jitter (restarts the forwarder; packets it held are lost, like a
    /// route change).
    public func setDelay(ms: Double, jitterMs: Double = 0, reorder: Bool = false) throws {
        stopForwarder()
        try startForwarder(delayMs: ms, jitterMs: jitterMs, reorder: reorder)
    }

    /// Changes the random loss each way (replaces the iptables rules).
    public func setLoss(percent: Double) throws {
        guard percent >= 0, percent <= 100 else { throw WANHarnessError("loss \(percent)% is not in 0...100") }
        removeRules()
        lossPercent = percent
        guard percent > 0 else { return }
        let probability = String(format: "%.6f", percent / 100)
        let comment = ["-m", "comment", "--comment", namespace]
        let match = ["-m", "statistic", "--mode", "random", "--probability", probability]
        // Services -> peer: dropped on arrival in the namespace. Peer -> services: dropped on
        // arrival in the root namespace, only on this peer's device.
        let down = ["PREROUTING", "-i", innerDevice] + match + ["-j", "DROP"]
        let up = ["PREROUTING", "-i", outerDevice] + match + comment + ["-j", "DROP"]
        try SystemCommand.require(lab.ip, ["netns", "exec", namespace, lab.iptables, "-t", "raw", "-I"] + down)
        rules.append((true, down))
        try SystemCommand.require(lab.iptables, ["-t", "raw", "-I"] + up)
        rules.append((false, up))
    }

    private func removeRules() {
        for rule in rules {
            if rule.inNamespace {
                SystemCommand.run(lab.ip, ["netns", "exec", namespace, lab.iptables, "-t", "raw", "-D"] + rule.arguments)
            } else {
                SystemCommand.run(lab.iptables, ["-t", "raw", "-D"] + rule.arguments)
            }
        }
        rules.removeAll()
    }

    private func startForwarder(delayMs: Double, jitterMs: Double, reorder: Bool) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: lab.wanlink)
        process.arguments = ["--inner", innerDevice, "--inner-netns", namespace, "--outer", outerDevice,
                             "--delay-ms", String(delayMs), "--jitter-ms", String(jitterMs),
                             "--watch-pid", String(getpid())] + (reorder ? ["--reorder"] : [])
        var environment = ProcessInfo.processInfo.environment
        for key in environment.keys where key.hasPrefix("NETPLAY_WANLINK_") { environment[key] = nil }
        process.environment = environment
        // Appended to: a restarted forwarder (``setDelay(ms:jitterMs:reorder:)``) keeps the
        // counts the one before it wrote when it stopped.
        if !FileManager.default.fileExists(atPath: forwarderLog) {
            _ = FileManager.default.createFile(atPath: forwarderLog, contents: nil)
        }
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: forwarderLog))
        log.seekToEndOfFile()
        process.standardOutput = log
        process.standardError = log
        process.standardInput = FileHandle.nullDevice
        try process.run()
        forwarder = process
        // Attached: both devices report a carrier (LOWER_UP) once the forwarder holds them.
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline {
            guard process.isRunning else {
                let text = (try? String(contentsOfFile: forwarderLog, encoding: .utf8)) ?? ""
                throw WANHarnessError("netplay-wanlink exited (\(process.terminationStatus)): \(text.trimmingCharacters(in: .whitespacesAndNewlines))")
            }
            let outer = SystemCommand.run(lab.ip, ["-o", "link", "show", "dev", outerDevice]).output
            let inner = SystemCommand.run(lab.ip, ["-n", namespace, "-o", "link", "show", "dev", innerDevice]).output
            if outer.contains("LOWER_UP"), inner.contains("LOWER_UP") {
                self.delayMs = delayMs
                self.jitterMs = jitterMs
                self.reorder = reorder
                return
            }
            usleep(10_000)
        }
        stopForwarder()
        throw WANHarnessError("netplay-wanlink did not attach \(outerDevice) and \(namespace)/\(innerDevice) within 5 s")
    }

    private func stopForwarder() {
        guard let process = forwarder else { return }
        forwarder = nil
        LoggedProcess.stop([process])
    }

    // MARK: Processes and sockets inside the namespace

    /// Starts `executable` inside the namespace (`ip netns exec`), stdout and stderr to `log`;
    /// `NETPLAY_*` variables of this process are not passed on, `environment` is added. The lab
    /// stops it at tear-down.
    @discardableResult
    public func launch(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
                       log: String) throws -> Process {
        guard !torn else { throw WANHarnessError("the peer has been torn down") }
        let process = try LoggedProcess.launch(inNamespace: namespace, ip: lab.ip, executable, arguments,
                                               environment: environment, log: log)
        processes.append(process)
        return process
    }

    /// Runs `body` on the calling thread inside the peer's namespace: sockets it creates belong
    /// to the peer (they keep working after `body` returns, from any thread).
    public func withNamespace<T>(_ body: () throws -> T) throws -> T {
        try inNetworkNamespace(namespace, body)
    }

    /// Stops the peer's processes and forwarder; deletes its rules, namespace and devices.
    func tearDown() {
        guard !torn else { return }
        torn = true
        LoggedProcess.stop(processes)
        processes.removeAll()
        if namespaceMade { removeRules() }
        stopForwarder()
        if outerMade { SystemCommand.run(lab.ip, ["link", "del", outerDevice]) }
        if namespaceMade { SystemCommand.run(lab.ip, ["netns", "del", namespace]) }
    }
}
