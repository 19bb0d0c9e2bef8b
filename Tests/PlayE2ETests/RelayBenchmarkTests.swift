import Foundation
import NetplayTestSupport
import Testing

/// `make bench-relay` end to end at a small scale, so the benchmark cannot rot between runs of
/// `make bench`: the C load generator and forwarder build from Benchmarks/c without warnings, and
/// `netplay-bench relay` drives netplay-sync and the forwarder with them and prints figures that
/// hold together. No figure is compared with a speed target here (benchmarks print those).
@Suite("Relay benchmark, end to end at 4 sessions", .ownThread)
struct RelayBenchmarkTests {
    @Test func theBenchmarkDrivesTheRelayAndTheForwarderAndReportsConsistentFigures() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("relay-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let cc = try #require(tool("cc"), "cc is not installed")
        var built: [String: String] = [:]
        for (name, libraries) in [("relay_load", ["-lpthread"]), ("relay_forwarder", ["-lzmq"])] {
            let output = directory.appendingPathComponent(name).path
            let source = repositoryRoot.appendingPathComponent("Benchmarks/c/\(name).c").path
            let compiled = try run(cc, ["-O2", "-Wall", "-Wextra", "-o", output, source] + libraries)
            try #require(compiled.status == 0, "\(name) did not build: \(compiled.output)")
            #expect(!compiled.output.contains("warning"), "\(name): \(compiled.output)")
            built[name] = output
        }

        let sessions = 4
        let result = try run(BuildProducts.url(of: "netplay-bench").path,
                             ["relay", "--sessions", "\(sessions)", "--seconds", "2", "--flood-sessions", "2",
                              "--flood-seconds", "1", "--sync-bin", BuildProducts.url(of: "netplay-sync").path,
                              "--c-forwarder", try #require(built["relay_forwarder"]),
                              "--load", try #require(built["relay_load"])], timeout: 180)
        try #require(result.status == 0, "netplay-bench relay failed: \(result.output)")
        let table = BenchmarkTable(result.output)

        let expected = Double(sessions * 2 * 60)
        for delivered in try table.row("inputs delivered/s") {
            #expect(delivered >= 0.95 * expected && delivered <= 1.05 * expected, "\(result.output)")
        }
        let arrivalP50 = try table.row("latency p50 (us)"), arrivalP99 = try table.row("latency p99 (us)")
        let readP50 = try table.row("read by the generator p50 (us)"), readP99 = try table.row("read by the generator p99 (us)")
        for target in 0 ..< 2 {
            #expect(arrivalP50[target] > 0 && arrivalP50[target] <= arrivalP99[target], "\(result.output)")
            // Every input is read after the kernel received it, so each percentile is too.
            #expect(readP50[target] >= arrivalP50[target] && readP99[target] >= arrivalP99[target], "\(result.output)")
        }
        #expect(try table.row("max throughput (inputs/s)").allSatisfy { $0 > 0 }, "\(result.output)")
        #expect(try table.row("relay logic per input (ns)")[0] > 0, "\(result.output)")
        #expect(!result.output.contains("relay errors received"), "\(result.output)")
    }
}

/// The figures of `netplay-bench relay`'s table: a 34-column label, then the relay's and the C
/// forwarder's values.
struct BenchmarkTable {
    let lines: [Substring]

    init(_ output: String) { lines = output.split(separator: "\n") }

    /// The numbers after `label`'s column (the relay's, then the forwarder's where printed).
    func row(_ label: String) throws -> [Double] {
        let line = try #require(lines.first { $0.hasPrefix(label) }, "no '\(label)' row")
        let numbers = line.dropFirst(34).split(separator: " ").prefix(2).compactMap { Double($0) }
        return try #require(numbers.isEmpty ? nil : numbers, "no figures in '\(line)'")
    }
}
