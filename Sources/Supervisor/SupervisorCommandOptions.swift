import ArgumentParser
import Foundation
import NetplayService

/// netplay-supervisor's own flags, each with a `NETPLAY_*` environment fallback (shown in
/// `--help`). Resolve them into ``SupervisorLauncher/Settings`` with
/// ``settings(common:environment:)``; the executable only parses and runs.
public struct SupervisorCommandOptions: ParsableArguments, Sendable {
    @Option(help: ArgumentHelp("Cluster file (env NETPLAY_CLUSTER_CONFIG, default compose/cluster.yaml).", valueName: "path"))
    public var config: String?

    @Option(help: ArgumentHelp("Directory for supervisor.pid and logs/ (env NETPLAY_RUN_DIR, default run).", valueName: "path"))
    public var runDir: String?

    @Option(help: ArgumentHelp("Directory searched first for service executables (env NETPLAY_BIN_DIR; then the supervisor's own directory, then PATH).", valueName: "path"))
    public var binDir: String?

    @Flag(help: "Do not echo children's output on standard output (env NETPLAY_QUIET=1); log files are still written.")
    public var quiet = false

    @Flag(help: "Validate the cluster file, print every instance's command line, and exit.")
    public var check = false

    public init() {}

    /// The launcher's settings: flag, then environment, then default; a malformed switch throws.
    public func settings(common: ServiceOptions,
                         environment: [String: String] = ProcessInfo.processInfo.environment) throws -> SupervisorLauncher.Settings {
        let setting = SettingResolver(environment: environment)
        return SupervisorLauncher.Settings(
            configPath: setting.text(config, "NETPLAY_CLUSTER_CONFIG", default: "compose/cluster.yaml"),
            runDirectory: setting.text(runDir, "NETPLAY_RUN_DIR", default: "run"),
            binDirectories: setting.text(binDir, "NETPLAY_BIN_DIR").map { [$0] } ?? [],
            console: !(try setting.isOn(quiet, "NETPLAY_QUIET")), checkOnly: check, common: common)
    }
}
