import ArgumentParser
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

    @OptionGroup var supervisor: SupervisorCommandOptions

    @OptionGroup(title: "Service options (the supervisor's own control endpoint, telemetry, logging)")
    var common: ServiceOptions

    func run() throws {
        try SupervisorLauncher.run(supervisor.settings(common: common))
    }
}
