import ArgumentParser
@testable import Discovery
import NetplayLAN
import Testing
import NetplayTestSupport

@Suite("netplay-discovery options", .ownThread)
struct DiscoveryOptionsTests {
    func resolve(_ arguments: [String], _ environment: [String: String] = [:]) throws -> DiscoveryConfiguration {
        try DiscoveryOptions.parse(arguments).resolve(environment: environment)
    }

    @Test func defaultsFollowTheDesign() throws {
        let configuration = try resolve([])
        #expect(configuration.beaconPort == 7102 && configuration.retroArchPort == 55435)
        #expect(configuration.limits.defaultTTLMs == 60_000)
        #expect(configuration.retroArchScanIntervalSeconds == 0 && configuration.retroArchScanTargets == nil)
    }

    @Test func flagsWinOverEnvironmentWhichWinsOverDefaults() throws {
        let environment = ["NETPLAY_BEACON_PORT": "9000", "NETPLAY_ROOM_TTL": "5", "NETPLAY_RETROARCH_PORT": "none",
                           "NETPLAY_RETROARCH_SCAN_TARGETS": "10.77.0.255, 10.0.0.2:1234"]
        let configuration = try resolve(["--beacon-port", "9001"], environment)
        #expect(configuration.beaconPort == 9001)
        #expect(configuration.retroArchPort == nil)
        #expect(configuration.limits.defaultTTLMs == 5_000)
        #expect(configuration.retroArchScanTargets == [UDPAddress("10.77.0.255:55435")!, UDPAddress("10.0.0.2:1234")!])
        #expect(try resolve(["--beacon-port", "0"]).beaconPort == nil)
        #expect(try resolve(["--read-rate", "0"]).readRatePerSecond == 0 && resolve([]).readBurst == 150)
    }

    @Test func badValuesNameTheFlag() {
        for (arguments, flag) in [(["--beacon-port", "70000"], "--beacon-port"), (["--room-ttl", "soon"], "--room-ttl"), (["--room-ttl", "9999"], "--room-ttl"),
                                  (["--retroarch-bind", "localhost"], "--retroarch-bind"),
                                  (["--retroarch-scan-targets", "nope"], "--retroarch-scan-targets"),
                                  (["--room-ttl", "100", "--max-room-ttl", "50"], "--max-room-ttl"),
                                  (["--announce-rate", "fast"], "--announce-rate"),
                                  // A timer of a nanosecond ran on every reactor turn (a RANQ broadcast flood).
                                  (["--sync-interval", "1e-9"], "--sync-interval"),
                                  (["--retroarch-scan-interval", "0.001"], "--retroarch-scan-interval"),
                                  (["--read-rate", "lots"], "--read-rate"), (["--read-burst", "5"], "--read-burst")] {
            #expect(throws: ValidationError.self, "\(arguments)") { try resolve(arguments) }
            do { _ = try resolve(arguments) } catch let error as ValidationError {
                #expect(error.message.contains(flag), "\(error.message)")
            } catch {}
        }
    }
}

extension DiscoveryOptionsTests {
    @Test func helpNamesExactlyTheVariablesResolutionReads() {
        let contract = EnvironmentContract(help: [DiscoveryOptions.self]) { _ = try DiscoveryOptions.parse([]).resolve(environment: $0) }
        #expect(contract.named.count >= 10)
        #expect(contract.namedButNotRead.isEmpty, "--help names variables nothing reads")
        #expect(contract.readButNotNamed.isEmpty, "variables read that --help does not name")
        #expect(contract.defaultsDisagreeing.isEmpty, "\(contract.defaultsDisagreeing.joined(separator: "\n"))")
    }
}
