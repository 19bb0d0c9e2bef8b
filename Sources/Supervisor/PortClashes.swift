import NetplayService

/// Finds two things of a cluster that would bind one port: the endpoints of every instance each
/// service may have (a replicated one up to `supervisor.max_replicas`, each replica shifted by
/// its `port_step`) and the supervisor's control endpoint and its public one beside it (+5).
///
/// Without it a legal `netplayctl cluster scale` could start a replica on another service's
/// ports: it fails to bind, restarts until it counts against the supervisor's intensity and the
/// whole cluster stops (or, while that service is down, takes its ports for good). Ports are
/// compared by number and protocol (`udp://` apart from TCP); two hosts clash when they are the
/// same or either is a wildcard. An `ipc://` path is one file for every replica, so a service
/// that may have more than one instance cannot use one.
enum PortClashes {
    /// One port one instance binds: what it is, for the error line.
    private struct Binding {
        let owner: String
        let host: String
        let port: Int
        let udp: Bool

        func clashes(with other: Binding) -> Bool {
            port == other.port && udp == other.udp
                && (host == other.host || Self.isWildcard(host) || Self.isWildcard(other.host))
        }

        private static func isWildcard(_ host: String) -> Bool {
            ["*", "0.0.0.0", "::", "[::]", ""].contains(host)
        }
    }

    /// The first clash in `config`, as the path to name and the reason; nil when none.
    static func first(in config: ClusterConfig) -> (path: String, message: String)? {
        var bindings: [Binding] = []
        let control = config.supervisor.endpoint
        for (owner, endpoint) in [("the supervisor's control endpoint", control),
                                  ("the supervisor's public endpoint", SupervisorLauncher.publicEndpoint(besides: control))] {
            if let binding = binding(endpoint, owner: owner) { bindings.append(binding) }
        }
        for service in config.services {
            let instances = service.possibleReplicas(config.supervisor)
            for (key, value) in service.endpoints {
                let path = "services.\(service.name).endpoints.\(key)"
                if value.hasPrefix("ipc://") && instances > 1 {
                    return (path, "'\(value)' is one path for all of the service's \(instances) possible replicas (supervisor.max_replicas); use tcp://")
                }
                for replica in 0 ..< instances {
                    guard let endpoint = service.endpoint(key, replica: replica) else { continue }
                    let instance = service.instanceName(replica: replica)
                    guard let new = binding(endpoint, owner: "\(instance)'s \(key)") else { continue }
                    if let taken = bindings.first(where: { $0.clashes(with: new) }) {
                        let scaled = replica >= max(1, service.replicas)
                            ? " once \(service.name) is scaled to \(replica + 1) (supervisor.max_replicas, port_step \(service.portStep))" : ""
                        return (path, "\(instance) would bind port \(new.port)\(scaled), which \(taken.owner) binds; "
                                + "move one of them, change port_step or lower supervisor.max_replicas")
                    }
                    bindings.append(new)
                }
            }
        }
        return nil
    }

    /// The port `endpoint` binds (`tcp://HOST:PORT`, `udp://HOST:PORT`, `http://HOST:PORT` or
    /// `HOST:PORT`); nil for none, port 0 (any) or a path.
    private static func binding(_ endpoint: String, owner: String) -> Binding? {
        var rest = Substring(endpoint)
        var udp = false
        if let scheme = endpoint.range(of: "://") {
            let name = endpoint[..<scheme.lowerBound]
            guard ["tcp", "udp", "http"].contains(name) else { return nil }
            udp = name == "udp"
            rest = endpoint[scheme.upperBound...]
        }
        guard let port = EndpointPorts.port(of: String(rest)), port != 0, let colon = rest.lastIndex(of: ":") else { return nil }
        return Binding(owner: owner, host: String(rest[..<colon]), port: port, udp: udp)
    }
}
