import ArgumentParser
import Foundation
import NetplayService

/// netplay-telemetry's own flags, each with a `NETPLAY_*` environment fallback (shown in
/// `--help`). Resolve them into ``TelemetrySettings`` with ``resolve(environment:)``; the
/// executable only parses and runs.
public struct TelemetryOptions: ParsableArguments, Sendable {
    @Option(help: ArgumentHelp("PULL endpoint services push metrics and events to (env NETPLAY_INGEST, default \(ServiceDefaults.telemetryIngest)).", valueName: "endpoint"))
    public var ingest: String?

    @Option(help: ArgumentHelp("HTTP address HOST:PORT for /metrics, /api and the dashboard; 'none' disables (env NETPLAY_HTTP, default 127.0.0.1:9400).", valueName: "address"))
    public var http: String?

    @Option(help: ArgumentHelp("Discovery request endpoint to list rooms from; 'none' disables (env NETPLAY_DISCOVERY, default \(ServiceDefaults.discoveryEndpoint)).", valueName: "endpoint"))
    public var discovery: String?

    @Option(help: ArgumentHelp("Seconds after which an instance that stopped reporting is forgotten (env NETPLAY_FORGET_AFTER, default 20).", valueName: "seconds"))
    public var forgetAfter: Double?

    @Option(help: ArgumentHelp("Most HTTP connections open at once from one address; a new one evicts that address's oldest idle one (env NETPLAY_HTTP_MAX_PER_ADDRESS, default 16).", valueName: "count"))
    public var httpMaxPerAddress: Int?

    @Option(help: ArgumentHelp("Most HTTP connections open at once; a new one evicts the oldest idle one (env NETPLAY_HTTP_MAX_CONNECTIONS, default 128).", valueName: "count"))
    public var httpMaxConnections: Int?

    @Option(help: ArgumentHelp("Seconds an HTTP client has to send its complete request head (env NETPLAY_HTTP_HEAD_TIMEOUT, default 5).", valueName: "seconds"))
    public var httpHeadTimeout: Double?

    @Option(help: ArgumentHelp("Most instances whose metrics are kept; snapshots from more are dropped (env NETPLAY_MAX_INSTANCES, default 256).", valueName: "count"))
    public var maxInstances: Int?

    @Option(help: ArgumentHelp("Most series kept per instance; its series may take 1 KiB each on /metrics on average (env NETPLAY_MAX_SERIES_PER_INSTANCE, default 2000).", valueName: "count"))
    public var maxSeriesPerInstance: Int?

    @Option(help: ArgumentHelp("Most series kept over all instances; they may take 672 bytes each on /metrics on average (env NETPLAY_MAX_SERIES, default 50000).", valueName: "count"))
    public var maxSeries: Int?

    public init() {}

    /// Resolves flags, environment and defaults; throws a one-line `ValidationError` for anything
    /// malformed.
    public func resolve(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> TelemetrySettings {
        let setting = SettingResolver(environment: environment)
        let ingest = setting.text(ingest, "NETPLAY_INGEST", default: ServiceDefaults.telemetryIngest)
        try EndpointValidator.validate(ingest, name: "--ingest")
        let httpText = setting.text(http, "NETPLAY_HTTP", default: "127.0.0.1:9400")
        if httpText.lowercased() != "none" {
            do { _ = try HTTPServer.socketAddress(httpText) } catch { throw ValidationError("\(error)") }
        }
        let discovery = try setting.endpoint(discovery, "NETPLAY_DISCOVERY", name: "--discovery",
                                             default: ServiceDefaults.discoveryEndpoint)
        let forget = try setting.number(forgetAfter, "NETPLAY_FORGET_AFTER", name: "--forget-after",
                                        default: 20, range: 0.1...86_400)
        let httpLimits = HTTPLimits(
            maxConnections: try setting.integer(httpMaxConnections, "NETPLAY_HTTP_MAX_CONNECTIONS", name: "--http-max-connections", default: 128, range: 1...10_000),
            maxPerAddress: try setting.integer(httpMaxPerAddress, "NETPLAY_HTTP_MAX_PER_ADDRESS", name: "--http-max-per-address", default: 16, range: 1...10_000),
            headTimeout: try setting.number(httpHeadTimeout, "NETPLAY_HTTP_HEAD_TIMEOUT", name: "--http-head-timeout",
                                            default: 5, range: 0.1...300))
        let seriesPerInstance = try setting.integer(maxSeriesPerInstance, "NETPLAY_MAX_SERIES_PER_INSTANCE", name: "--max-series-per-instance",
                                                    default: 2_000, range: 1...1_000_000)
        let series = try setting.integer(maxSeries, "NETPLAY_MAX_SERIES", name: "--max-series", default: 50_000, range: 1...10_000_000)
        let limits = MetricStore.Limits(
            maxInstances: try setting.integer(maxInstances, "NETPLAY_MAX_INSTANCES", name: "--max-instances", default: 256, range: 1...100_000),
            maxSeriesPerInstance: seriesPerInstance, maxSeries: series,
            maxPageBytesPerInstance: seriesPerInstance * MetricStore.Limits.pageBytesPerSeriesOfInstance,
            maxPageBytes: series * MetricStore.Limits.pageBytesPerSeries)
        return TelemetrySettings(ingest: ingest, http: httpText.lowercased() == "none" ? nil : httpText,
                                 forgetAfter: forget, sessionForgetAfter: max(30, forget), discovery: discovery,
                                 limits: limits, httpLimits: httpLimits)
    }
}
