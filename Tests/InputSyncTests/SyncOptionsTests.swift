import ArgumentParser
import Foundation
import InputSync
import NetplayService
import RetroArchRelay
import Testing
import NetplayTestSupport

/// netplay-sync's flags resolve in the library, so the executable is only parsing (like
/// DiscoveryOptions and CoordinatorOptions).
@Suite("netplay-sync options", .ownThread)
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

    @Test func replaysAreSwitchedOffByTheFlagOrTheEnvironment() throws {
        let secret = ["NETPLAY_CLUSTER_SECRET": Self.secret]
        #expect(try resolve([], environment: secret).relay.replayDirectory != nil)
        #expect(try resolve([], environment: secret.merging(["NETPLAY_NO_REPLAYS": "1"]) { $1 }).relay.replayDirectory == nil)
        #expect(try resolve([], environment: secret.merging(["NETPLAY_NO_REPLAYS": "0"]) { $1 }).relay.replayDirectory != nil)
    }

    @Test func theTransferWindowMemoryAndMinimumRateComeFromTheFlagOrTheEnvironment() throws {
        #expect(try resolve(["--cluster-secret", Self.secret]).relay.transferWindowBytes == 1 << 20)
        #expect(try resolve(["--cluster-secret", Self.secret], environment: ["NETPLAY_TRANSFER_WINDOW": "4096"])
                .relay.transferWindowBytes == 4096)
        #expect(try resolve(["--cluster-secret", Self.secret, "--transfer-window", "256"],
                            environment: ["NETPLAY_TRANSFER_WINDOW": "4096"]).relay.transferWindowBytes == 256)
        #expect(message { try resolve(["--cluster-secret", Self.secret, "--transfer-window", "100"]) }
                == "--transfer-window must be a whole number from 256 to 67108864, got '100'")
        #expect(try resolve(["--cluster-secret", Self.secret]).relay.maxTransferBytes == 256 << 20)
        #expect(try resolve(["--cluster-secret", Self.secret], environment: ["NETPLAY_TRANSFER_MEMORY": "134217728"])
                .relay.maxTransferBytes == 128 << 20)
        #expect(message { try resolve(["--cluster-secret", Self.secret, "--transfer-memory", "1000"]) }
                == "--transfer-memory must be a whole number from 67108864 to 1099511627776, got '1000'")
        #expect(try resolve(["--cluster-secret", Self.secret]).relay.transferMinRateBytes == 256 << 10)
        #expect(try resolve(["--cluster-secret", Self.secret], environment: ["NETPLAY_TRANSFER_MIN_RATE": "65536"])
                .relay.transferMinRateBytes == 65536)
        #expect(try resolve(["--cluster-secret", Self.secret, "--transfer-min-rate", "2048"],
                            environment: ["NETPLAY_TRANSFER_MIN_RATE": "65536"]).relay.transferMinRateBytes == 2048)
        #expect(message { try resolve(["--cluster-secret", Self.secret, "--transfer-min-rate", "10"]) }
                == "--transfer-min-rate must be a whole number from 1024 to 1073741824, got '10'")
    }

    /// A configuration built in code (an embedding app, not flags) is checked too: no timeout,
    /// rate or state size that would stall or overflow a transfer's deadline.
    @Test func aTransfersLimitsAreCheckedInAConfigurationBuiltInCode() {
        func problem(_ change: (inout RelayConfiguration) -> Void) -> String? {
            var configuration = RelayConfiguration(relayId: "r", advertisedEndpoint: "tcp://127.0.0.1:1")
            change(&configuration)
            return configuration.validationError()
        }
        #expect(problem { _ in } == nil)
        #expect(problem { $0.transferTimeoutMs = 0 } == "the transfer timeout must be >= 1 ms")
        #expect(problem { $0.transferMinRateBytes = 10 } == "the transfer minimum rate must be 1024 ... 1073741824 bytes per second")
        #expect(problem { $0.maxStateBytes = 1 << 50 } == "the largest state must be 1 ... 1099511627776 bytes")
        // No ticket lifetime that refuses every ticket (a LAN host's own among them).
        #expect(problem { $0.maxTicketLifetimeMs = 0 } == "the longest ticket lifetime must be 1000 ... 86400000 ms")
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
                == "--replica must be a whole number from 0 to 99, got '100'")
        #expect(message { try resolve(["--cluster-secret", "zz"]) }.hasPrefix("--cluster-secret: "))
        #expect(message { try resolve(["--advertise", "tcp://*:7300", "--cluster-secret", Self.secret]) }
                .hasPrefix("--advertise must name a reachable host and port"))
        #expect(message { try resolve([], common: ["--data-dir", "/nonexistent/netplay/sync-0"]) }
                .hasPrefix("--cluster-secret (or NETPLAY_CLUSTER_SECRET, or a readable --cluster-secret-file) is required"))
    }

    @Test func theRetroArchRelayIsOffUntilAPortIsGiven() throws {
        #expect(try resolve(["--cluster-secret", Self.secret]).retroArch == nil)
        let plain = try #require(try resolve(["--cluster-secret", Self.secret, "--retroarch-port", "55435"]).retroArch)
        #expect(plain.port == 55435 && plain.bindHost == "0.0.0.0" && plain.advertiseHost == "127.0.0.1" && plain.sessionPorts == nil)
        #expect(plain.join(TunnelIDFixture.id) == "127.0.0.1|55435|AQIDBAUGBwgJCgsM")

        let tuned = try #require(try resolve(
            ["--cluster-secret", Self.secret, "--retroarch-port", "127.0.0.1:7306", "--advertise", "tcp://relay.example:7300",
             "--retroarch-session-ports", "40000-40099", "--retroarch-limits", "sessions=128,clients=8,link-timeout=120,buffer=4096,buffer-total=1048576"],
            environment: ["NETPLAY_RETROARCH_ADVERTISE": "ignored.example"]).retroArch)
        #expect(tuned.port == 7306 && tuned.bindHost == "127.0.0.1" && tuned.sessionPorts == 40000...40099)
        #expect(tuned.advertiseHost == "ignored.example", "the environment names the join host when no flag does")
        #expect(tuned.maxSessions == 128 && tuned.maxClientsPerSession == 8 && tuned.linkTimeoutSeconds == 120 && tuned.maxBufferedBytes == 4096
                && tuned.maxBufferedTotalBytes == 1 << 20)

        let advertised = try #require(try resolve(["--cluster-secret", Self.secret, "--retroarch-port", "55435",
                                                   "--advertise", "tcp://relay.example:7300", "--retroarch-advertise", "play.example:443"]).retroArch)
        #expect(advertised.advertiseHost == "play.example" && advertised.joinPort == 443)
        let fromEndpoint = try #require(try resolve(["--cluster-secret", Self.secret, "--retroarch-port", "55435",
                                                     "--advertise", "tcp://relay.example:7300"]).retroArch)
        #expect(fromEndpoint.advertiseHost == "relay.example")
    }

    @Test func badRetroArchValuesGetOneLine() {
        func refusal(_ flags: [String]) -> String { message { try resolve(["--cluster-secret", Self.secret] + flags) } }
        #expect(refusal(["--retroarch-port", "70000"]) == "--retroarch-port must be a TCP port (0 to 65535), HOST:PORT or 'off', got '70000'")
        #expect(refusal(["--retroarch-port", ":7306"]).hasPrefix("--retroarch-port must be"))
        #expect(refusal(["--retroarch-port", "55435", "--retroarch-session-ports", "9-2"])
                == "--retroarch-session-ports must be LOW-HIGH (ports 1-65535), got '9-2'")
        #expect(refusal(["--retroarch-port", "55435", "--retroarch-session-ports", "55430-55440"])
                == "--retroarch-session-ports 55430-55440 holds the main --retroarch-port 55435")
        #expect(refusal(["--retroarch-port", "55435", "--retroarch-limits", "sessions=-1"]).hasPrefix("--retroarch-limits: expected name=value"))
        #expect(refusal(["--retroarch-port", "55435", "--retroarch-limits", "tunnels=3"]).hasPrefix("--retroarch-limits: unknown limit 'tunnels'"))
        #expect(refusal(["--retroarch-port", "55435", "--retroarch-limits", "clients=2.5"]) == "--retroarch-limits: clients must be a whole number, got '2.5'")
        #expect(refusal(["--retroarch-port", "55435", "--retroarch-limits", "host-timeout=5"]).hasPrefix("--retroarch-limits: host-timeout (5.0 s) must be longer"))
        #expect(refusal(["--retroarch-port", "55435", "--retroarch-advertise", "a|b"]) == "--retroarch-advertise must be HOST or HOST:PORT, got 'a|b'")
    }
}

/// A fixed tunnel id for the join-string checks.
enum TunnelIDFixture {
    static let id = TunnelID(Array(1...12))!
}

extension SyncOptionsTests {
    @Test func helpNamesExactlyTheVariablesResolutionReads() {
        // Without a secret the secret file is looked for; with RetroArch's listener on, its own
        // settings are read too. The common options are resolved inside, so their help counts.
        let contract = EnvironmentContract(
            help: [SyncOptions.self, ServiceOptions.self],
            environments: [[:], ["NETPLAY_CLUSTER_SECRET": Self.secret],
                           ["NETPLAY_CLUSTER_SECRET": Self.secret, "NETPLAY_RETROARCH_PORT": "55435"]]) {
            _ = try SyncOptions.parse([]).resolve(common: try ServiceOptions.parse([]), environment: $0)
        }
        #expect(contract.named.count >= 25)
        #expect(contract.namedButNotRead.isEmpty, "--help names variables nothing reads")
        #expect(contract.readButNotNamed.isEmpty, "variables read that --help does not name")
        #expect(contract.defaultsDisagreeing.isEmpty, "\(contract.defaultsDisagreeing.joined(separator: "\n"))")
    }
}
