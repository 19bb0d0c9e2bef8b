/// The default endpoints of one service kind, from the design's endpoint table.
///
/// Every flag can override them; a service started alone with no flags binds these and connects
/// to the others' defaults, running without the ones it cannot reach.
public struct ServiceDefaults: Sendable, Equatable {
    /// Service kind, e.g. `"discovery"`; also the default instance name's prefix.
    public var kind: String
    /// The ROUTER endpoint requests arrive on.
    public var endpoint: String
    /// The PUB endpoint events go out on (nil for services that publish nothing).
    public var events: String?

    /// Creates defaults for a service kind.
    public init(kind: String, endpoint: String, events: String?) {
        self.kind = kind
        self.endpoint = endpoint
        self.events = events
    }

    /// Telemetry's PULL endpoint that every service pushes metrics and events to.
    public static let telemetryIngest = "tcp://127.0.0.1:7400"
    /// The supervisor's control endpoint, which also receives heartbeats.
    public static let supervisorEndpoint = "tcp://127.0.0.1:7000"
    /// The discovery service's request endpoint.
    public static let discoveryEndpoint = "tcp://127.0.0.1:7100"
    /// The coordinator's request endpoint.
    public static let coordinatorEndpoint = "tcp://127.0.0.1:7200"

    /// netplay-supervisor.
    public static let supervisor = ServiceDefaults(kind: "supervisor", endpoint: supervisorEndpoint, events: nil)
    /// netplay-discovery.
    public static let discovery = ServiceDefaults(kind: "discovery", endpoint: discoveryEndpoint, events: "tcp://127.0.0.1:7101")
    /// netplay-coordinator.
    public static let coordinator = ServiceDefaults(kind: "coordinator", endpoint: coordinatorEndpoint, events: "tcp://127.0.0.1:7201")
    /// netplay-telemetry (its "requests" socket is the metrics PULL; queries use 7402).
    public static let telemetry = ServiceDefaults(kind: "telemetry", endpoint: "tcp://127.0.0.1:7402", events: "tcp://127.0.0.1:7401")

    /// netplay-sync replica `index` (0-based): requests on 7300+10i, events on 7301+10i.
    public static func sync(replica index: Int) -> ServiceDefaults {
        ServiceDefaults(kind: "sync",
                        endpoint: "tcp://127.0.0.1:\(7300 + 10 * index)",
                        events: "tcp://127.0.0.1:\(7301 + 10 * index)")
    }
}
