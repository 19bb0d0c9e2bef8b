import ArgumentParser
import Foundation
import NetplayService
import NetplayWire

/// `netplay-bench cluster`: how fast the local cluster comes up and recovers.
///
/// Cold start: `make up` (binaries already built: NETPLAY_BIN_DIR points at them, so no build
/// runs) until the supervisor reports every instance ready, on shifted ports so a running
/// cluster is left alone. Restart: SIGKILL of each service until it is ready again.
struct ClusterBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cluster",
        abstract: "Cold `make up` to all-ready, and restart-to-ready after SIGKILL, of the local cluster.")

    @Option(help: "Cold starts to time.") var starts = 3
    @Option(help: "SIGKILL rounds over every service.") var rounds = 3
    @Option(help: ArgumentHelp("Repository root holding the Makefile (default: the current directory).", valueName: "path"))
    var repository = FileManager.default.currentDirectoryPath
    @Option(help: ArgumentHelp("Directory of the built executables (default: this benchmark's own directory).", valueName: "path"))
    var binDir: String?

    func validate() throws {
        guard (1...20).contains(starts), (1...20).contains(rounds) else { throw ValidationError("--starts and --rounds must be from 1 to 20") }
        guard FileManager.default.fileExists(atPath: "\(repository)/Makefile") else { throw ValidationError("no Makefile in \(repository); pass --repository") }
    }

    func run() throws {
        let bin = binDir ?? URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent().path
        guard FileManager.default.isExecutableFile(atPath: "\(bin)/netplay-supervisor") else {
            throw ValidationError("netplay-supervisor is not built in \(bin) (make release)")
        }
        print("cluster (compose/cluster.yaml via make up, binaries in \(bin))")
        var cold: [Double] = [], supervisorReady: [Double] = []
        var restart: [String: [Double]] = [:]
        var instances = 0
        for start in 0..<starts {
            let cluster = try BenchCluster(repository: repository, bin: bin)
            defer { cluster.stop() }
            let began = Date()
            guard let status = cluster.waitRunning(within: 120) else {
                throw ValidationError("make up did not reach all-ready:\n\(cluster.output.text.suffix(2000))")
            }
            cold.append(Date().timeIntervalSince(began))
            instances = status.services.count
            if let match = cluster.output.text.firstMatch(of: /cluster ready after="([0-9.]+) s"/), let value = Double(match.output.1) {
                supervisorReady.append(value)
            }
            guard start == starts - 1 else { continue }
            for _ in 0..<rounds {
                for victim in status.services {
                    var found: ServiceStatus?
                    let asked = Date()
                    while found == nil && Date().timeIntervalSince(asked) < 5 {
                        found = cluster.status()?.services.first { $0.instance == victim.instance && $0.state == .ready && $0.pid > 0 }
                        if found == nil { usleep(10_000) }
                    }
                    guard let current = found else { continue }
                    let killed = Date()
                    kill(Int32(current.pid), SIGKILL)
                    var ready = false
                    while Date().timeIntervalSince(killed) < 10 {
                        if let now = cluster.status()?.services.first(where: { $0.instance == victim.instance }),
                           now.state == .ready, now.pid != current.pid, now.pid > 0 {
                            ready = true
                            break
                        }
                        usleep(5_000)
                    }
                    if ready { restart[victim.instance, default: []].append(Date().timeIntervalSince(killed)) }
                    _ = cluster.waitRunning(within: 10)
                }
            }
        }
        func ms(_ seconds: Double) -> String { String(format: "%7.0f ms", seconds * 1000) }
        func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
        print("  cold make up -> all \(instances) ready   median \(ms(median(cold)))  min \(ms(cold.min()!))  max \(ms(cold.max()!))   (\(starts) starts; target < 10 s)")
        if !supervisorReady.isEmpty {
            print("  supervisor start -> cluster ready    median \(ms(median(supervisorReady)))")
        }
        // Kill k of the same instance within backoff.reset_after waits initial * 2^(k-1) first:
        // the first kill is the restart-to-ready figure, later ones show the backoff growing.
        let first = restart.values.compactMap(\.first)
        if !first.isEmpty {
            print("  SIGKILL -> ready again (first failure) median \(ms(median(first)))  max \(ms(first.max()!))   (\(first.count) services; target < 2000 ms)")
            for name in restart.keys.sorted() {
                print("    \(name.padding(toLength: 14, withPad: " ", startingAt: 0))                     \(ms(restart[name]![0]))")
            }
        }
        if rounds > 1 {
            let repeated = (1..<rounds).map { round in restart.values.compactMap { $0.count > round ? $0[round] : nil } }
            let text = repeated.enumerated().filter { !$0.element.isEmpty }.map { "kill \($0.offset + 2): \(ms(median($0.element)).trimmingCharacters(in: .whitespaces))" }
            print("  repeated kills within 30 s (backoff doubles from 100 ms): \(text.joined(separator: ", "))")
        }
    }
}

/// `make up` on a free port offset in a temporary run directory.
private final class BenchCluster {
    let process = Process()
    let output = BenchOutput()
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("netplay-bench-\(UUID().uuidString)")
    /// The operator's client to the supervisor, once `make up` has made the operator key.
    private var client: BlockingClient?

    init(repository: String, bin: String) throws {
        let offset = ClusterPorts.freeOffset()
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        process.executableURL = URL(fileURLWithPath: "/usr/bin/make")
        process.arguments = ["-C", repository, "--no-print-directory", "up", "RUN_DIR=\(directory.path)/run", "NETPLAY_BIN_DIR=\(bin)"]
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("NETPLAY_") }
        environment["NETPLAY_PORT_OFFSET"] = String(offset)
        environment["NETPLAY_RETROARCH_PORT"] = "0"
        environment["NETPLAY_DATA_ROOT"] = "\(directory.path)/data"
        environment["NETPLAY_QUIET"] = "1"
        environment["NETPLAY_MAX_RESTARTS"] = "1000"  // the benchmark kills far more often than the intensity limit allows
        process.environment = environment
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        pipe.fileHandleForReading.readabilityHandler = { [output] in output.append($0.availableData) }
        try process.run()
    }

    func status() -> ClusterStatusResponse? {
        if client == nil {
            // The cluster status is for the operator: the key `make up` generated in the data root.
            let store = TrustStore(directory: directory.appendingPathComponent("data/keys"))
            if let keys = try? store.localOperator(create: false), let supervisor = store.member(instance: "supervisor"),
               let control = supervisor.control {
                client = try? BlockingClient(endpoint: control, timeout: 0.5, serverKey: supervisor.publicKey, keys: keys)
            }
        }
        guard case .clusterStatusResponse(let status)? = try? client?.request(.clusterStatusRequest(ClusterStatusRequest())) else { return nil }
        return status
    }

    func waitRunning(within seconds: Double) -> ClusterStatusResponse? {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let status = status(), status.state == .running { return status }
            if !process.isRunning { return nil }
            usleep(5_000)
        }
        return nil
    }

    func stop() {
        if process.isRunning {
            kill(-process.processIdentifier, SIGINT)
            let deadline = Date().addingTimeInterval(30)
            while process.isRunning && Date() < deadline { usleep(20_000) }
            if process.isRunning { kill(-process.processIdentifier, SIGKILL) }
        }
        try? FileManager.default.removeItem(at: directory)
    }
}

private final class BenchOutput: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()
    func append(_ more: Data) { lock.lock(); data.append(more); lock.unlock() }
    var text: String { lock.lock(); defer { lock.unlock() }; return String(decoding: data, as: UTF8.self) }
}
