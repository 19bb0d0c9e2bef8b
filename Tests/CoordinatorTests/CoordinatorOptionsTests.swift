import Coordinator
import NetplayService
import NetplayWire
import NetplayTestSupport
import Testing

/// netplay-coordinator's flags: what `--help` says about the environment is what is read.
@Suite("netplay-coordinator options", .ownThread)
struct CoordinatorOptionsTests {
    @Test func helpNamesExactlyTheVariablesResolutionReads() {
        let contract = EnvironmentContract(help: [CoordinatorOptions.self]) {
            _ = try CoordinatorOptions.parse([]).resolve(environment: $0)
        }
        #expect(contract.named.count >= 19)
        #expect(contract.namedButNotRead.isEmpty, "--help names variables nothing reads")
        #expect(contract.readButNotNamed.isEmpty, "variables read that --help does not name")
        #expect(contract.defaultsDisagreeing.isEmpty, "\(contract.defaultsDisagreeing.joined(separator: "\n"))")
    }

    /// The refresh interval a short relay TTL implies stays within what the wire carries: a
    /// third of 0.25 s was 83 ms, below RegisterRelayResponse's 100 ms floor, and no relay could
    /// ever register (each answer failed to encode), with no word at start.
    @Test func aShortRelayTTLStillLetsRelaysRegister() throws {
        for ttl in ["0.2", "0.25", "0.29", "0.3", "6"] {
            let settings = try CoordinatorOptions.parse(["--relay-ttl", ttl]).resolve(environment: [:]).settings
            #expect(settings.relayRefreshIntervalMs >= 100 && settings.relayRefreshIntervalMs < settings.relayTTLMs, "\(ttl)")
            let answer = Envelope(body: .registerRelayResponse(RegisterRelayResponse(
                relayId: "sync-0", refreshIntervalMs: settings.relayRefreshIntervalMs, ttlMs: settings.relayTTLMs)))
            #expect(throws: Never.self, "--relay-ttl \(ttl)") { _ = try answer.encoded() }
        }
    }
}
