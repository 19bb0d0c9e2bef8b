import ArgumentParser
import Foundation
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
        The request endpoint answers RecentEventsRequest; the events endpoint re-publishes every \
        ingested event under its topic. Under the supervisor (--supervisor) it shows the cluster \
        status; with discovery reachable (--discovery) it shows the rooms.
        """,
        version: NetplayVersion.current)

    @OptionGroup var common: ServiceOptions

    @Option(help: ArgumentHelp("PULL endpoint services push metrics and events to (env NETPLAY_INGEST, default \(ServiceDefaults.telemetryIngest)).", valueName: "endpoint"))
    var ingest: String?

    @Option(help: ArgumentHelp("HTTP address HOST:PORT for /metrics, /api and the dashboard; 'none' disables (env NETPLAY_HTTP, default 127.0.0.1:9400).", valueName: "address"))
    var http: String?

    @Option(help: ArgumentHelp("Discovery request endpoint to list rooms from; 'none' disables (env NETPLAY_DISCOVERY, default \(ServiceDefaults.discoveryEndpoint)).", valueName: "endpoint"))
    var discovery: String?

    @Option(help: ArgumentHelp("Seconds after which an instance that stopped reporting is forgotten (env NETPLAY_FORGET_AFTER, default 20).", valueName: "seconds"))
    var forgetAfter: Double?

    static func main() { mainReportingOneLine() }

    func run() throws {
        let environment = ProcessInfo.processInfo.environment
        func pick(_ flag: String?, _ variable: String) -> String? {
            flag ?? environment[variable].flatMap { $0.isEmpty ? nil : $0 }
        }
        var configuration = try common.resolve(defaults: .telemetry)
        configuration.telemetry = nil  // it does not push to itself: its own metrics are served directly
        let ingest = pick(ingest, "NETPLAY_INGEST") ?? ServiceDefaults.telemetryIngest
        try EndpointValidator.validate(ingest, name: "--ingest")
        let httpText = pick(http, "NETPLAY_HTTP") ?? "127.0.0.1:9400"
        let discoveryText = pick(discovery, "NETPLAY_DISCOVERY") ?? ServiceDefaults.discoveryEndpoint
        let discovery = discoveryText.lowercased() == "none" ? nil : discoveryText
        if let discovery { try EndpointValidator.validate(discovery, name: "--discovery") }
        let forgetText = forgetAfter.map { String($0) } ?? pick(nil, "NETPLAY_FORGET_AFTER") ?? "20"
        guard let forget = Double(forgetText), forget >= 0.1, forget <= 86_400 else {
            throw ValidationError("--forget-after must be a number of seconds from 0.1 to 86400, got '\(forgetText)'")
        }
        let settings = TelemetrySettings(ingest: ingest, http: httpText.lowercased() == "none" ? nil : httpText,
                                         forgetAfter: forget, sessionForgetAfter: max(30, forget), discovery: discovery)
        try ServiceHost.runMain(configuration: configuration) { TelemetryService(settings: settings) }
    }
}
