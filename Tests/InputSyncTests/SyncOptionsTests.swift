import ArgumentParser
import Foundation
import InputSync
import NetplayService
import Testing

/// netplay-sync's flags resolve in the library, so the executable is only parsing (like
/// DiscoveryOptions and CoordinatorOptions).
@Suite("netplay-sync options")
struct SyncOptionsTests {
    static let secret = String(repeating: "ab", count: 32)

    func resolve(_ sync: [String], common: [String] = [], environment: [String: String] = [:]) throws -> SyncOptions.Resolved {
        try SyncOptions.parse(sync).resolve(common: try ServiceOptions.parse(common), environment: environment)
    }

    func message(_ body: () throws -> Any) -> String {
        do { _ = try body(); return "" } catch let error as ValidationError { return error.message } catch { return "\(error)" }
    }

    @Test func aReplicaTakesItsRowOfTheTableAndItsName() throws {
        let resolved = try resolve(["--replica", "2", "--cluster-secret", Self.secret])
        #expect(resolved.service.endpoint == "tcp://127.0.0.1:7320" && resolved.service.events == "tcp://127.0.0.1:7321")
        #expect(resolved.service.control == "tcp://127.0.0.1:7325")
        #expect(resolved.service.instance == "sync-2" && resolved.relay.relayId == "sync-2")
        #expect(resolved.coordinator == ServiceDefaults.coordinatorEndpoint)
        #expect(resolved.relay.replayDirectory?.lastPathComponent == "replays")
    }

    @Test func flagsWinOverTheEnvironment() throws {
        let resolved = try resolve(["--region", "eu", "--coordinator", "none", "--no-replays"],
                                   environment: ["NETPLAY_CLUSTER_SECRET": Self.secret, "NETPLAY_REGION": "us",
                                                 "NETPLAY_MAX_SESSIONS": "7"])
        #expect(resolved.relay.region == "eu" && resolved.relay.maxSessions == 7)
        #expect(resolved.coordinator == nil && resolved.relay.replayDirectory == nil)
    }

    @Test func theClusterSecretIsFoundBesideTheDataDirectory() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("netplay-sync-options-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        try FileManager.default.createDirectory(at: root.appendingPathComponent("coordinator"), withIntermediateDirectories: true)
        try Self.secret.write(to: root.appendingPathComponent("coordinator/cluster-secret"), atomically: true, encoding: .utf8)
        let resolved = try resolve([], common: ["--data-dir", root.appendingPathComponent("sync-0").path])
        #expect(resolved.keyRing.text.contains(Self.secret))
    }

    @Test func badValuesGetOneLine() {
        #expect(message { try resolve(["--replica", "100", "--cluster-secret", Self.secret]) }
                == "--replica must be a number from 0 to 99, got '100'")
        #expect(message { try resolve(["--cluster-secret", "zz"]) }.hasPrefix("--cluster-secret: "))
        #expect(message { try resolve(["--advertise", "tcp://*:7300", "--cluster-secret", Self.secret]) }
                .hasPrefix("--advertise must name a reachable host and port"))
        #expect(message { try resolve([], common: ["--data-dir", "/nonexistent/netplay/sync-0"]) }
                .hasPrefix("--cluster-secret (or NETPLAY_CLUSTER_SECRET, or a readable --cluster-secret-file) is required"))
    }
}
