import Coordinator
import NetplayService
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
}
