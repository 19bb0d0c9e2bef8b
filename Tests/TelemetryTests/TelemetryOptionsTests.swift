import ArgumentParser
import NetplayService
import Telemetry
import Testing
import NetplayTestSupport

/// netplay-telemetry's flags resolve in the library, so the executable is only parsing.
@Suite("netplay-telemetry options", .ownThread)
struct TelemetryOptionsTests {
    func message(_ body: () throws -> Any) -> String {
        do { _ = try body(); return "" } catch let error as ValidationError { return error.message } catch { return "\(error)" }
    }

    @Test func defaultsAreTheDesignsTable() throws {
        let settings = try TelemetryOptions.parse([]).resolve(environment: [:])
        #expect(settings.ingest == ServiceDefaults.telemetryIngest && settings.http == "127.0.0.1:9400")
        #expect(settings.discovery == ServiceDefaults.discoveryEndpoint && settings.forgetAfter == 20 && settings.sessionForgetAfter == 30)
        #expect(settings.limits.maxInstances == 256 && settings.httpLimits.maxPerAddress == 16)
    }

    @Test func flagsWinOverTheEnvironmentAndNoneTurnsThingsOff() throws {
        let settings = try TelemetryOptions.parse(["--max-instances", "9", "--http", "none"])
            .resolve(environment: ["NETPLAY_MAX_INSTANCES": "3", "NETPLAY_DISCOVERY": "none", "NETPLAY_FORGET_AFTER": "60"])
        #expect(settings.limits.maxInstances == 9 && settings.http == nil && settings.discovery == nil)
        #expect(settings.forgetAfter == 60 && settings.sessionForgetAfter == 60)
    }

    @Test func badValuesGetOneLine() {
        #expect(message { try TelemetryOptions.parse(["--forget-after", "0"]).resolve(environment: [:]) }
                == "--forget-after must be a number from 0.1 to 86400, got '0.0'")
        #expect(message { try TelemetryOptions.parse([]).resolve(environment: ["NETPLAY_MAX_SERIES": "lots"]) }
                == "--max-series must be a whole number from 1 to 10000000, got 'lots'")
        #expect(message { try TelemetryOptions.parse(["--ingest", "localhost"]).resolve(environment: [:]) }.hasPrefix("--ingest must look like"))
    }
}

extension TelemetryOptionsTests {
    @Test func helpNamesExactlyTheVariablesResolutionReads() {
        let contract = EnvironmentContract(help: [TelemetryOptions.self]) { _ = try TelemetryOptions.parse([]).resolve(environment: $0) }
        #expect(contract.named.count >= 8)
        #expect(contract.namedButNotRead.isEmpty, "--help names variables nothing reads")
        #expect(contract.readButNotNamed.isEmpty, "variables read that --help does not name")
        #expect(contract.defaultsDisagreeing.isEmpty, "\(contract.defaultsDisagreeing.joined(separator: "\n"))")
    }
}
