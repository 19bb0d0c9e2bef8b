import ArgumentParser
import Foundation
import NetplayService
import Supervisor

/// `netplay-supervisor`: runs the cluster described by cluster.yaml in the foreground.
@main
struct SupervisorCommand: NetplayCommand {
    static let configuration = CommandConfiguration(
        commandName: "netplay-supervisor",
        abstract: "Start, watch, restart, scale and stop the Netplay services of a cluster file.",
        discussion: """
        Starts the services of the cluster file in dependency order, each once its dependencies \
        are ready; restarts failed ones with exponential backoff under a restart-intensity limit; \
        stops everything in reverse order on SIGINT or SIGTERM. Children's output is echoed with \
        an instance prefix and kept in RUN_DIR/logs/INSTANCE.log (rotated). Control it with \
        `netplayctl cluster status|restart|scale|stop`. Exit status: 0 after a requested stop, 1 when \
        the restart intensity was exceeded, 2 for bad flags or a bad cluster file.
        """,
        version: NetplayVersion.current)

    @Option(help: ArgumentHelp("Cluster file (env NETPLAY_CLUSTER_CONFIG, default compose/cluster.yaml).", valueName: "path"))
    var config: String?

    @Option(help: ArgumentHelp("Directory for supervisor.pid and logs/ (env NETPLAY_RUN_DIR, default run).", valueName: "path"))
    var runDir: String?

    @Option(help: ArgumentHelp("Directory searched first for service executables (env NETPLAY_BIN_DIR; then the supervisor's own directory, then PATH).", valueName: "path"))
    var binDir: String?

    @Flag(help: "Do not echo children's output on standard output (env NETPLAY_QUIET=1); log files are still written.")
    var quiet = false

    @Flag(help: "Validate the cluster file, print every instance's command line, and exit.")
    var check = false

    @OptionGroup(title: "Service options (the supervisor's own control endpoint, telemetry, logging)")
    var common: ServiceOptions

    static func main() {
        do {
            // `--help` and `help` parse to ArgumentParser's own help command: run whatever parsed.
            var command = try parseAsRoot()
            try command.run()
        } catch let failure as ClusterFailure {
            FileHandle.standardError.write(Data("netplay-supervisor: \(failure.description)\n".utf8))
            Foundation.exit(1)
        } catch {
            // Flags and start-up errors: one line, status 2 (the shared entry point's format).
            mainReportingOneLineAfter(error)
        }
    }

    static func mainReportingOneLineAfter(_ error: Error) {
        if let start = error as? RuntimeStartError {
            FileHandle.standardError.write(Data("netplay-supervisor: \(start.description)\n".utf8))
            Foundation.exit(2)
        }
        if let validation = error as? ValidationError {
            FileHandle.standardError.write(Data("netplay-supervisor: \(validation.message)\n".utf8))
            Foundation.exit(2)
        }
        let code = exitCode(for: error)
        if code == .success || error is CleanExit { exit(withError: error) }
        let text = message(for: error).split(separator: "\n").first.map(String.init) ?? "\(error)"
        FileHandle.standardError.write(Data("netplay-supervisor: \(text)\n".utf8))
        Foundation.exit(2)
    }

    func run() throws {
        let environment = ProcessInfo.processInfo.environment
        func pick(_ flag: String?, _ variable: String) -> String? {
            flag ?? environment[variable].flatMap { $0.isEmpty ? nil : $0 }
        }
        let quietEnv = ["1", "true", "yes"].contains((environment["NETPLAY_QUIET"] ?? "").lowercased())
        let settings = SupervisorLauncher.Settings(
            configPath: pick(config, "NETPLAY_CLUSTER_CONFIG") ?? "compose/cluster.yaml",
            runDirectory: pick(runDir, "NETPLAY_RUN_DIR") ?? "run",
            binDirectories: pick(binDir, "NETPLAY_BIN_DIR").map { [$0] } ?? [],
            console: !(quiet || quietEnv), checkOnly: check, common: common)
        try SupervisorLauncher.run(settings, environment: environment)
    }
}
