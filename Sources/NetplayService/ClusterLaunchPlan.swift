import MemberwiseInit
import NetplayWire

/// What to start a small cluster of real processes with: discovery, a coordinator and relays,
/// each on its own endpoint and data directory under one root, the coordinator and the relays
/// signing and checking join tickets with one cluster secret.
///
/// `netplay-peer demo`, the test suites' `TestCluster` and the WAN lab's matches and deployments
/// all start such a cluster; each launches the processes its own way (plain, with a log file,
/// inside a network namespace) and adds its own flags, and this plan is the one place that says
/// how the three services are wired together. Discovery never beacons on the LAN and never
/// answers RetroArch's LAN scan: a harness's cluster stays out of the machine's LAN.
@PublicMemberwiseInit
public struct ClusterLaunchPlan: Sendable {
    /// Discovery's request endpoint.
    public var discovery: String
    /// The coordinator's request endpoint.
    public var coordinator: String
    /// The directory holding every service's data directory (`discovery`, `coordinator`, and one
    /// per relay instance).
    public var dataRoot: String
    /// The cluster secret (hex, or `ID:HEX,...`) the coordinator and the relays share.
    public var secret: String
    /// Flags every service gets before its own (e.g. `--telemetry none --log-level warning`).
    public var common: [String] = []

    /// netplay-discovery's arguments; `extra` comes last (a repeated flag's last value wins).
    public func discoveryArguments(instance: String, events: String = "none", extra: [String] = []) -> [String] {
        service(endpoint: discovery, instance: instance, directory: "discovery", events: events)
            + ["--beacon-port", "0", "--retroarch-port", "0"] + extra
    }

    /// netplay-coordinator's arguments: it lists lobby rooms at ``discovery``.
    public func coordinatorArguments(instance: String, events: String = "none", extra: [String] = []) -> [String] {
        service(endpoint: coordinator, instance: instance, directory: "coordinator", events: events)
            + ["--discovery", discovery, "--cluster-secret", secret] + extra
    }

    /// netplay-sync's arguments for relay `instance` on `endpoint`: it registers with
    /// ``coordinator``; its data directory is named after the instance.
    public func relayArguments(endpoint: String, instance: String, events: String = "none", extra: [String] = []) -> [String] {
        service(endpoint: endpoint, instance: instance, directory: instance, events: events)
            + ["--coordinator", coordinator, "--cluster-secret", secret] + extra
    }

    /// A service's data directory: `name` under ``dataRoot``.
    public func dataDirectory(_ name: String) -> String { dataRoot + "/" + name }

    private func service(endpoint: String, instance: String, directory: String, events: String) -> [String] {
        common + ["--endpoint", endpoint, "--events", events, "--instance", instance, "--data-dir", dataDirectory(directory)]
    }

    /// Whether `endpoint` answers Health within `timeout` seconds (a one-off check; to poll, keep
    /// one client and ask ``answersHealth(_:)-(BlockingClient)``).
    public static func answersHealth(_ endpoint: String, timeout: Double = 0.5, serverKey: [UInt8]? = nil) -> Bool {
        guard let client = try? BlockingClient(endpoint: endpoint, timeout: timeout, serverKey: serverKey) else { return false }
        return answersHealth(client)
    }

    /// Whether the service behind `client` answers Health within the client's timeout.
    public static func answersHealth(_ client: BlockingClient) -> Bool {
        (try? client.request(.healthRequest(HealthRequest()))) != nil
    }

    /// Whether the coordinator at `coordinator` lists a live relay (`relayId`, or any when nil):
    /// a cluster whose relay registered can seat a match. A one-off check, like the one above.
    public static func listsRelay(_ coordinator: String, relayId: String? = nil, timeout: Double = 0.5,
                                  serverKey: [UInt8]? = nil) -> Bool {
        guard let client = try? BlockingClient(endpoint: coordinator, timeout: timeout, serverKey: serverKey) else { return false }
        return listsRelay(client, relayId: relayId)
    }

    /// Whether the coordinator behind `client` lists a live relay (`relayId`, or any when nil).
    public static func listsRelay(_ client: BlockingClient, relayId: String? = nil) -> Bool {
        guard case .listRelaysResponse(let list)? = try? client.request(.listRelaysRequest(ListRelaysRequest())) else { return false }
        return list.relays.contains { relayId == nil || $0.relayId == relayId }
    }
}
