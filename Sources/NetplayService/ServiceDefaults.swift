import MemberwiseInit

/// The default endpoints of one service kind, from the design's endpoint table.
///
/// Every flag can override them; a service started alone with no flags binds these and connects
/// to the others' defaults, running without the ones it cannot reach.
@PublicMemberwiseInit
public struct ServiceDefaults: Sendable, Equatable {
    /// Service kind, e.g. `"discovery"`; also the default instance name's prefix.
    public var kind: String
    /// The ROUTER endpoint requests arrive on.
    public var endpoint: String
    /// The PUB endpoint events go out on (nil for services that publish nothing).
    public var events: String?

    /// The ROUTER endpoint of the cluster and operator planes.
    public var control: String? = nil
    /// Whether the events are for anyone (discovery's rooms) or for trust-store keys only.
    public var publicEvents: Bool = false
    /// Whether the public ROUTER bounds the replies a peer has not read (all but the relay).
    public var guardsUnreadReplies: Bool = true

    /// Telemetry's PULL endpoint that every service pushes metrics and events to.
    public static let telemetryIngest = "tcp://127.0.0.1:7400"
    /// The supervisor's control endpoint, which also receives heartbeats.
    public static let supervisorEndpoint = "tcp://127.0.0.1:7000"
    /// The discovery service's request endpoint.
    public static let discoveryEndpoint = "tcp://127.0.0.1:7100"
    /// The coordinator's request endpoint.
    public static let coordinatorEndpoint = "tcp://127.0.0.1:7200"

    /// netplay-supervisor: its control endpoint (7000) takes heartbeats and the operator's verbs;
    /// its public endpoint (7005) answers only Health and Ping.
    public static let supervisor = ServiceDefaults(kind: "supervisor", endpoint: "tcp://127.0.0.1:7005", events: nil,
                                                   control: supervisorEndpoint)
    /// netplay-discovery (control 7105).
    public static let discovery = ServiceDefaults(kind: "discovery", endpoint: discoveryEndpoint, events: "tcp://127.0.0.1:7101",
                                                  control: "tcp://127.0.0.1:7105", publicEvents: true)
    /// netplay-coordinator (control 7205).
    public static let coordinator = ServiceDefaults(kind: "coordinator", endpoint: coordinatorEndpoint, events: "tcp://127.0.0.1:7201",
                                                    control: "tcp://127.0.0.1:7205")
    /// netplay-telemetry (its "requests" socket is the metrics PULL; queries use 7402; control 7405).
    public static let telemetry = ServiceDefaults(kind: "telemetry", endpoint: "tcp://127.0.0.1:7402", events: "tcp://127.0.0.1:7401",
                                                  control: "tcp://127.0.0.1:7405")

    /// The events endpoint beside a request endpoint, by the convention the table keeps (requests
    /// on a port, events on the next): `tcp://HOST:7100` gives `tcp://HOST:7101`. Nil when it
    /// cannot be derived (not tcp://, no numeric port, or port 65535).
    public static func events(besideRequests requests: String) -> String? {
        guard requests.hasPrefix("tcp://"), let port = EndpointPorts.port(of: requests), (1 ..< 65535).contains(port) else {
            return nil
        }
        return EndpointPorts.shift(requests, by: 1)
    }

    /// netplay-sync replica `index` (0-based): requests on 7300+10i, events on 7301+10i, control on 7305+10i.
    public static func sync(replica index: Int) -> ServiceDefaults {
        ServiceDefaults(kind: "sync",
                        endpoint: "tcp://127.0.0.1:\(7300 + 10 * index)",
                        events: "tcp://127.0.0.1:\(7301 + 10 * index)",
                        control: "tcp://127.0.0.1:\(7305 + 10 * index)", guardsUnreadReplies: false)
    }
}
