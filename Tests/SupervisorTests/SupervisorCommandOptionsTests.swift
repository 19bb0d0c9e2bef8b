import NetplayService
import Supervisor
import Testing
import NetplayTestSupport

/// netplay-supervisor's flags resolve in the library, so the executable is only parsing.
@Suite("netplay-supervisor options", .ownThread)
struct SupervisorCommandOptionsTests {
    @Test func flagsThenEnvironmentThenDefaults() throws {
        let common = try ServiceOptions.parse([])
        let defaults = try SupervisorCommandOptions.parse([]).settings(common: common, environment: [:])
        #expect(defaults.configPath == "compose/cluster.yaml" && defaults.runDirectory == "run" && defaults.binDirectories.isEmpty)
        #expect(defaults.console && !defaults.checkOnly)
        let environment = ["NETPLAY_CLUSTER_CONFIG": "env.yaml", "NETPLAY_RUN_DIR": "envrun", "NETPLAY_BIN_DIR": "/opt/bin", "NETPLAY_QUIET": "yes"]
        let fromEnvironment = try SupervisorCommandOptions.parse([]).settings(common: common, environment: environment)
        #expect(fromEnvironment.configPath == "env.yaml" && fromEnvironment.runDirectory == "envrun")
        #expect(fromEnvironment.binDirectories == ["/opt/bin"] && !fromEnvironment.console)
        let flags = try SupervisorCommandOptions.parse(["--config", "flag.yaml", "--run-dir", "flagrun", "--check"])
            .settings(common: common, environment: environment)
        #expect(flags.configPath == "flag.yaml" && flags.runDirectory == "flagrun" && flags.checkOnly)
    }
}

extension SupervisorCommandOptionsTests {
    @Test func helpNamesExactlyTheVariablesResolutionReads() {
        let contract = EnvironmentContract(help: [SupervisorCommandOptions.self]) {
            _ = try SupervisorCommandOptions.parse([]).settings(common: try ServiceOptions.parse([]), environment: $0)
        }
        #expect(contract.named.count >= 4)
        #expect(contract.namedButNotRead.isEmpty, "--help names variables nothing reads")
        #expect(contract.readButNotNamed.isEmpty, "variables read that --help does not name")
        #expect(contract.defaultsDisagreeing.isEmpty, "\(contract.defaultsDisagreeing.joined(separator: "\n"))")
    }
}
