import ArgumentParser
import Foundation
import Testing
@testable import NetplayService
import NetplayTestSupport

@Suite("Service configuration: flags, NETPLAY_* environment, defaults", .ownThread)
struct ConfigurationTests {
    func resolve(_ arguments: [String], environment: [String: String] = [:]) throws -> ServiceConfiguration {
        try ServiceOptions.parse(arguments).resolve(defaults: .discovery, environment: environment)
    }

    @Test func defaultsComeFromTheDesignTable() throws {
        let configuration = try resolve([])
        #expect(configuration.endpoint == "tcp://127.0.0.1:7100")
        #expect(configuration.events == "tcp://127.0.0.1:7101")
        #expect(configuration.telemetry == "tcp://127.0.0.1:7400")
        #expect(configuration.supervisor == nil)
        #expect(configuration.instance.hasPrefix("discovery-"))
        #expect(configuration.logLevel == .info)
        #expect(configuration.metricsInterval == 5)
        #expect(ServiceDefaults.sync(replica: 2).endpoint == "tcp://127.0.0.1:7320")
        #expect(ServiceDefaults.sync(replica: 2).events == "tcp://127.0.0.1:7321")
    }

    @Test func environmentOverridesDefaultsAndFlagsOverrideEnvironment() throws {
        let environment = ["NETPLAY_ENDPOINT": "tcp://127.0.0.1:9100", "NETPLAY_INSTANCE": "disc-env",
                           "NETPLAY_LOG_LEVEL": "debug", "NETPLAY_EVENTS": "none", "NETPLAY_TELEMETRY": "none",
                           "NETPLAY_DATA_DIR": "/tmp/x", "NETPLAY_SUPERVISOR": "tcp://127.0.0.1:7000"]
        let fromEnvironment = try resolve([], environment: environment)
        #expect(fromEnvironment.endpoint == "tcp://127.0.0.1:9100")
        #expect(fromEnvironment.instance == "disc-env")
        #expect(fromEnvironment.logLevel == .debug)
        #expect(fromEnvironment.events == nil)
        #expect(fromEnvironment.telemetry == nil)
        #expect(fromEnvironment.supervisor == "tcp://127.0.0.1:7000")
        #expect(fromEnvironment.dataDirectory.path == "/tmp/x")
        let fromFlags = try resolve(["--endpoint", "tcp://127.0.0.1:9200", "--instance", "disc-flag"], environment: environment)
        #expect(fromFlags.endpoint == "tcp://127.0.0.1:9200")
        #expect(fromFlags.instance == "disc-flag")
    }

    @Test(arguments: [
        (["--endpoint", "localhost:7100"], "--endpoint must look like"),
        (["--endpoint", "tcp://127.0.0.1:99999"], "--endpoint must look like"),
        (["--events", "udp://x:1"], "--events must look like"),
        (["--log-level", "loud"], "--log-level must be one of"),
        (["--instance", "has space"], "--instance must be"),
        // A name the trust store would not keep: its published key would be dropped unnoticed.
        (["--instance", "sync-é"], "--instance must be 1 to 64 ASCII"),
        (["--supervisor", "nowhere"], "--supervisor must look like"),
        (["--metrics-interval", "0"], "--metrics-interval must be"),
        (["--curve-secret-key", "nope"], "--curve-secret-key must be"),
    ])
    func badValuesAreRejectedWithAReason(arguments: [String], reason: String) throws {
        do {
            _ = try resolve(arguments)
            Issue.record("expected \(arguments) to be rejected")
        } catch let error as ValidationError {
            #expect(error.message.hasPrefix(reason), "\(error.message)")
            #expect(!error.message.contains("\n"))
        }
    }

    @Test func endpointValidatorAcceptsEveryTransport() throws {
        for endpoint in ["tcp://127.0.0.1:7100", "tcp://*:7100", "tcp://127.0.0.1:*", "tcp://[::1]:7100",
                         "ipc:///tmp/netplay.sock", "inproc://reactor"] {
            try EndpointValidator.validate(endpoint, name: "x")
        }
    }
}

@Suite("Metrics registry", .ownThread)
struct MetricsTests {
    @Test func instrumentsAreSharedAndSnapshotted() {
        let registry = MetricsRegistry()
        registry.counter("netplay_x_total", help: "x").increment()
        registry.counter("netplay_x_total", help: "x").increment(by: 2)
        registry.counter("netplay_x_total", help: "x").increment(by: -5)
        registry.gauge("netplay_level", help: "level", labels: ["kind": "a"]).set(7)
        let histogram = registry.histogram("netplay_latency_seconds", help: "l", buckets: [0.1, 1, 10])
        for value in [0.05, 0.1, 0.5, 5, 50] { histogram.observe(value) }
        registry.gauge("netplay_computed", help: "c") { 42 }
        let metrics = registry.metrics()
        #expect(metrics.map(\.name) == ["netplay_computed", "netplay_latency_seconds", "netplay_level", "netplay_x_total"])
        #expect(metrics[3].value == 3 && metrics[3].kind == .counter)
        #expect(metrics[2].labels.map(\.key) == ["kind"] && metrics[2].value == 7)
        #expect(metrics[1].bucketCounts == [2, 3, 4] && metrics[1].count == 5 && metrics[1].sum == 55.65)
        #expect(metrics[0].value == 42)
    }
}

@Suite("JSON values", .ownThread)
struct JSONValueTests {
    @Test func rendersSortedEscapedJSON() throws {
        let value: JSONValue = ["b": [1, 2.5, true, .null], "a": "quote\" tab\t nl\n \u{1}"]
        let text = value.rendered()
        #expect(text == #"{"a":"quote\" tab\t nl\n \u0001","b":[1,2.5,true,null]}"#)
        #expect(try JSONSerialization.jsonObject(with: Data(text.utf8)) is [String: Any])
    }
}

extension ConfigurationTests {
    @Test func helpNamesExactlyTheVariablesResolutionReads() {
        let common = EnvironmentContract(help: [ServiceOptions.self]) {
            _ = try ServiceOptions.parse([]).resolve(defaults: .discovery, environment: $0)
        }
        #expect(common.named.count >= 12)
        #expect(common.namedButNotRead.isEmpty, "--help names variables nothing reads")
        #expect(common.readButNotNamed.isEmpty, "variables read that --help does not name")
        #expect(common.defaultsDisagreeing.isEmpty, "\(common.defaultsDisagreeing.joined(separator: "\n"))")
        let curve = EnvironmentContract(help: [CurveClientOptions.self]) { _ = try CurveClientOptions.parse([]).serverKey(environment: $0) }
        #expect(curve.named == ["NETPLAY_CURVE_SERVER_KEY", "NETPLAY_CURVE_SECRET_KEY"] && curve.read == curve.named)
    }

    /// Options whose help states one default and whose code falls back to another.
    struct DriftedOptions: ParsableArguments {
        @Option(help: "Seconds between beats (env NETPLAY_TEST_BEAT, default 5).") var beat: Double?
        @Option(help: "Port (env NETPLAY_TEST_PORT, default 7000).") var port: String?
        @Option(help: "Mode (env NETPLAY_TEST_MODE, default fast).") var mode: String?
        @Option(help: "Where (env NETPLAY_TEST_WHERE, default <data-dir>/x).") var place: String?
    }

    @Test func aDefaultTheHelpStatesButTheCodeDoesNotUseIsCaught() {
        let contract = EnvironmentContract(help: [DriftedOptions.self]) { environment in
            let setting = SettingResolver(environment: environment)
            _ = try setting.number(nil as Double?, "NETPLAY_TEST_BEAT", name: "--beat", default: 6, range: 0 ... 60)
            _ = try setting.port(nil, "NETPLAY_TEST_PORT", name: "--port", default: 7000)
            _ = try setting.choice(nil, "NETPLAY_TEST_MODE", name: "--mode", default: "FAST", choices: ["fast", "slow"])
            _ = setting.text(nil, "NETPLAY_TEST_WHERE")
        }
        #expect(contract.defaultsDisagreeing == ["NETPLAY_TEST_BEAT: --help says default 5, the code falls back to 6"],
                "a port and a choice that agree (in any case) pass; a default worked out in code is not compared")
    }
}

extension ConfigurationTests {
    @Test func theEventsEndpointBesideARequestEndpointIsTheNextPort() {
        #expect(ServiceDefaults.events(besideRequests: ServiceDefaults.discoveryEndpoint) == ServiceDefaults.discovery.events)
        #expect(ServiceDefaults.events(besideRequests: ServiceDefaults.coordinatorEndpoint) == ServiceDefaults.coordinator.events)
        #expect(ServiceDefaults.events(besideRequests: "tcp://10.0.0.2:9000") == "tcp://10.0.0.2:9001")
        for underivable in ["tcp://h:+7100", "tcp://h:65535", "tcp://h:*", "ipc:///tmp/x", "tcp://h", "tcp://h:٧١٠٠"] {
            #expect(ServiceDefaults.events(besideRequests: underivable) == nil, "\(underivable)")
        }
    }

    @Test func aSwitchVariableIsOnOffOrAnError() throws {
        func isOn(_ value: String, flag: Bool = false) throws -> Bool {
            try SettingResolver(environment: ["NETPLAY_QUIET": value]).isOn(flag, "NETPLAY_QUIET")
        }
        for on in ["1", "true", "YES", "On"] { #expect(try isOn(on), "\(on)") }
        for off in ["", "0", "false", "No", "OFF"] { #expect(try !isOn(off), "\(off)") }
        #expect(try isOn("0", flag: true), "the flag wins")
        #expect(throws: ValidationError.self) { try isOn("y") }
        #expect(throws: ValidationError.self) { try isOn("enable") }
    }
}
