import ArgumentParser
import NetplayService
import Telemetry

/// `netplay-telemetry`: ingests metrics, events and HUD stats from every service and serves
/// them to Prometheus, the dashboard and netplayctl.
@main
struct TelemetryCommand: NetplayCommand {
    static let configuration = CommandConfiguration(
        commandName: "netplay-telemetry",
        abstract: "Collect the cluster's metrics, events and HUD stats; serve /metrics, /api and the dashboard.",
        discussion: """
        Services PUSH to --ingest. HTTP on --http: /metrics (Prometheus text), /healthz, \
        /api/overview, /api/services, /api/sessions, /api/rooms, /api/events, and the dashboard at /. \
        The control endpoint answers RecentEventsRequest (operators' keys); the events endpoint re-publishes every \
        ingested event under its topic. Under the supervisor (--supervisor) it shows the cluster \
        status; with discovery reachable (--discovery) it shows the rooms.
        """,
        version: NetplayVersion.current)

    @OptionGroup var common: ServiceOptions

    @OptionGroup var telemetry: TelemetryOptions

    func run() throws {
        var configuration = try common.resolve(defaults: .telemetry)
        configuration.telemetry = nil  // it does not push to itself: its own metrics are served directly
        let settings = try telemetry.resolve()
        try ServiceHost.runMain(configuration: configuration) { TelemetryService(settings: settings) }
    }
}
