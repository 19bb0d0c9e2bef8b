import NetplayWire

/// The trust plane a request belongs to (docs/security.md), and so who may send it.
///
/// - ``public``: what players and frontends call (rooms, sessions, relays to choose from, attach
///   and play, ping, Health).
/// - ``cluster``: service-to-service traffic (relay registration and load, commands to relays,
///   room announcements, telemetry ingest, heartbeats): cluster members only.
/// - ``inspect``: read-only state dumps (Introspect, cluster status, recent events):
///   operators, and cluster members that show them (telemetry's dashboard).
/// - ``operator``: what changes the cluster (restart, scale, stop): operators only.
public enum RequestPlane: String, Sendable, CaseIterable {
    case `public`, cluster, inspect, `operator`

    /// The plane of a request body. Replies and events sent as requests count as public: the
    /// runtime ignores them and services refuse them with their own errors.
    public static func of(_ body: Envelope.Body) -> RequestPlane {
        switch body {
        case .registerRelayRequest, .refreshRelayRequest, .announceRoomRequest, .refreshRoomRequest,
             .withdrawRoomRequest, .closeRelaySessionRequest, .disconnectPeerRequest, .assignSlotsRequest, .serviceHeartbeat,
             .metricsSnapshot, .eventRecord, .retroarchSession:
            return .cluster
        case .introspectRequest, .clusterStatusRequest, .recentEventsRequest:
            return .inspect
        case .restartServiceRequest, .scaleServiceRequest, .stopClusterRequest:
            return .operator
        default:
            return .public
        }
    }

    /// Whether `caller` may send requests of this plane.
    public func admits(_ caller: Caller) -> Bool {
        switch (self, caller) {
        case (.public, _): true
        case (.cluster, .cluster): true
        case (.inspect, .cluster), (.inspect, .operator): true
        case (.operator, .operator): true
        default: false
        }
    }
}
