import Foundation
import NetplayTestSupport
import NetplayWire
import Testing
@testable import NetplayService

@Suite("A service as a real process", .serialized, .ownThread)
struct ProcessTests {
    /// The trust store of the samples this suite starts (one per test run of the suite).
    static let root = FileManager.default.temporaryDirectory.appendingPathComponent("netplay-sample-\(UUID().uuidString)").path
    /// netplayctl finds the operator key of the suite's trust store.
    static let keysEnvironment = ["NETPLAY_KEYS_DIR": root + "/keys"]

    func startSample(_ extra: [String] = []) throws -> (ServiceProcess, String, String) {
        let endpoint = TestPorts.endpoint(), events = TestPorts.endpoint()
        let data = Self.root + "/sample-\(UUID().uuidString.prefix(8))"
        let process = try ServiceProcess("netplay-sample-service",
                                         ["--endpoint", endpoint, "--events", events, "--instance", "sample-1",
                                          "--data-dir", data, "--room", "r1"] + extra,
                                         environment: ["NETPLAY_TELEMETRY": "none"])
        let client = try BlockingClient(endpoint: endpoint, timeout: 0.2)
        let up = eventually(within: 10) { (try? client.request(.healthRequest(HealthRequest()))) != nil }
        #expect(up, "sample service did not answer: \(process.log)")
        return (process, endpoint, events)
    }

    @Test func sigtermStopsTheServiceCleanlyWithinTwoSeconds() throws {
        let (process, endpoint, _) = try startSample()
        let client = try TestKeys(dataRoot: Self.root).operatorClient(endpoint: endpoint)
        guard case .healthResponse(let health) = try client.request(.healthRequest(HealthRequest())) else {
            Issue.record("no health"); return
        }
        #expect(health.instance == "sample-1" && health.pid == UInt32(process.pid))
        let started = Date()
        process.send(SIGTERM)
        let status = process.waitForExit(seconds: 2)
        #expect(status == 0, "exit status \(String(describing: status)); log:\n\(process.log)")
        #expect(process.terminationReason == .exit)
        #expect(Date().timeIntervalSince(started) < 2)
        #expect(process.log.contains("stopping reason=SIGTERM"))
        #expect(process.log.contains("stopped"))
    }

    @Test func sigintDrainsThenExitsZero() throws {
        let (process, endpoint, _) = try startSample(["--drain-ms", "300"])
        process.send(SIGINT)
        // While draining, the listening socket is closed: new connections get nothing.
        let status = process.waitForExit(seconds: 2)
        #expect(status == 0, "\(process.log)")
        #expect(process.log.contains("stopping reason=SIGINT"))
        _ = endpoint
    }

    @Test func logLinesCarryServiceAndInstance() throws {
        let (process, endpoint, _) = try startSample()
        let client = try BlockingClient(endpoint: endpoint)
        _ = try client.request(.leaveSessionRequest(LeaveSessionRequest(sessionId: "r1", participantId: "p", participantToken: [1])))
        process.send(SIGTERM)
        process.waitForExit(seconds: 2)
        let lines = process.log.split(separator: "\n")
        #expect(!lines.isEmpty)
        for line in lines {
            #expect(line.contains(" sample/sample-1: "), "\(line)")
        }
        #expect(lines.contains { $0.contains("listening ") && $0.contains(" endpoint=\(endpoint)") })
    }

    @Test func badConfigurationExitsNonZeroWithOneLine() throws {
        let process = try ServiceProcess("netplay-sample-service", ["--endpoint", "nonsense"])
        let status = process.waitForExit(seconds: 10)
        #expect(status != nil && status != 0)
        let lines = process.log.split(separator: "\n")
        #expect(lines.count == 1, "\(process.log)")
        #expect(lines.first?.hasPrefix("netplay-sample-service: --endpoint must look like") == true)
    }

    @Test func takenEndpointExitsNonZeroWithOneLine() throws {
        let (first, endpoint, _) = try startSample()
        defer { first.kill9() }
        let second = try ServiceProcess("netplay-sample-service", ["--endpoint", endpoint, "--events", "none"],
                                        environment: ["NETPLAY_TELEMETRY": "none"])
        let status = second.waitForExit(seconds: 10)
        #expect(status != nil && status != 0)
        #expect(second.log.contains("netplay-sample-service: cannot bind requests endpoint \(endpoint): address already in use"), "\(second.log)")
    }

    @Test func netplayctlSpeaksToTheService() throws {
        let (process, endpoint, events) = try startSample((0..<200).flatMap { ["--room", "t\($0)"] })
        defer { process.kill9() }
        let health = try ServiceProcess("netplayctl", ["health", endpoint, "--json"], environment: Self.keysEnvironment)
        #expect(health.waitForExit(seconds: 10) == 0, "\(health.log)")
        #expect(health.log.contains("\"service\":\"sample\""))
        let plainHealth = try ServiceProcess("netplayctl", ["health", endpoint], environment: Self.keysEnvironment)
        #expect(plainHealth.waitForExit(seconds: 10) == 0, "\(plainHealth.log)")
        #expect(plainHealth.log.contains("  data_dir: ") && plainHealth.log.contains("  endpoint: \(endpoint)")
                && plainHealth.log.contains("  events: \(events)"), "\(plainHealth.log)")
        let introspect = try ServiceProcess("netplayctl", ["introspect", endpoint], environment: Self.keysEnvironment)
        #expect(introspect.waitForExit(seconds: 10) == 0)
        #expect(introspect.log.contains("\"rooms\""))
        let tap = try ServiceProcess("netplayctl", ["tap", events, "--json", "--count", "1", "--duration", "10"], environment: Self.keysEnvironment)
        let client = try BlockingClient(endpoint: endpoint)
        var next = 0
        let gotEvent = eventually(within: 8) {
            // Each withdrawal publishes once; keep withdrawing until the subscription is live.
            _ = try? client.request(.leaveSessionRequest(LeaveSessionRequest(sessionId: "t\(next)", participantId: "p", participantToken: [1])))
            next += 1
            return tap.log.contains("rooms.removed")
        }
        #expect(gotEvent)
        #expect(tap.waitForExit(seconds: 5) == 0)
        let line = try #require(tap.log.split(separator: "\n").first { $0.contains("rooms.removed") })
        #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) != nil, "tap --json line is not JSON: \(line)")
        let missing = try ServiceProcess("netplayctl", ["health", TestPorts.endpoint(), "--timeout", "0.3"])
        #expect(missing.waitForExit(seconds: 10) == 1)
        #expect(missing.log.contains("no reply from"))
    }

    @Test func encryptedClusterWithNetplayctlKeys() throws {
        let keygen = try ServiceProcess("netplayctl", ["keygen"])
        #expect(keygen.waitForExit(seconds: 10) == 0)
        let lines = keygen.log.split(separator: "\n")
        let publicKey = try #require(lines.first { $0.hasPrefix("public: ") }).dropFirst(8)
        let secretKey = try #require(lines.first { $0.hasPrefix("secret: ") }).dropFirst(8)
        let endpoint = TestPorts.endpoint()
        let service = try ServiceProcess("netplay-sample-service",
                                         ["--endpoint", endpoint, "--events", "none", "--telemetry", "none",
                                          "--data-dir", FileManager.default.temporaryDirectory.appendingPathComponent("netplay-curve-\(UUID().uuidString)").path],
                                         environment: ["NETPLAY_CURVE_SECRET_KEY": String(secretKey)])
        defer { service.kill9() }
        let encrypted = eventually(within: 10) {
            let health = try? ServiceProcess("netplayctl", ["health", endpoint, "--timeout", "0.5"],
                                             environment: ["NETPLAY_CURVE_SERVER_KEY": String(publicKey)])
            return health?.waitForExit(seconds: 5) == 0
        }
        #expect(encrypted, "\(service.log)")
        let plain = try ServiceProcess("netplayctl", ["health", endpoint, "--timeout", "0.5"])
        #expect(plain.waitForExit(seconds: 5) == 1)
        #expect(plain.log.contains("no reply from"))
    }
}
