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

    /// What checking `config` found: a clash among instances that start (the file is refused),
    /// and how far each replicated service may be scaled before one would clash.
    struct Outcome {
        var problem: (path: String, message: String)?
        var limits: [String: ScaleLimit] = [:]
    }

    /// Checks `config`. A clash among the instances a service starts with, or of a service that
    /// is not replicated, is a problem; one only a scale-up would make limits that service's
    /// scaling to the replicas before it (an older file allowing more than its ports do still
    /// loads, and the scale is refused with the reason).
    static func check(_ config: ClusterConfig) -> Outcome {
        var outcome = Outcome()
        var bindings: [Binding] = []
        let control = config.supervisor.endpoint
        for (owner, endpoint) in [("the supervisor's control endpoint", control),
                                  ("the supervisor's public endpoint", SupervisorLauncher.publicEndpoint(besides: control))] {
            if let binding = binding(endpoint, owner: owner) { bindings.append(binding) }
        }
        for service in config.services {
            let instances = service.possibleReplicas(config.supervisor)
            if instances > 1, let ipc = service.endpoints.first(where: { $0.1.hasPrefix("ipc://") }) {
                outcome.problem = ("services.\(service.name).endpoints.\(ipc.0)",
                                   "'\(ipc.1)' is one path for all of the service's \(instances) possible replicas (supervisor.max_replicas); use tcp://")
                return outcome
            }
        }
        // First what starts: every service's first instances, which must not clash at all.
        for service in config.services {
            for replica in 0 ..< (service.scalable ? service.replicas : 1) {
                switch claim(service, replica: replica, against: bindings) {
                case .bound(let mine): bindings += mine
                case .clash(let key, let reason):
                    outcome.problem = ("services.\(service.name).endpoints.\(key)",
                                       reason + "; move one of them, change port_step or lower the replicas")
                    return outcome
                }
            }
        }
        // Then what a scale-up would start: the first replica that would clash limits the scale.
        for service in config.services where service.scalable {
            scaling: for replica in service.replicas ..< service.possibleReplicas(config.supervisor) {
                switch claim(service, replica: replica, against: bindings) {
                case .bound(let mine): bindings += mine
                case .clash(_, let reason):
                    outcome.limits[service.name] = ScaleLimit(replicas: replica, reason: reason)
                    break scaling
                }
            }
        }
        return outcome
    }

    /// What replica `replica` of `service` would bind, or the first clash it would make.
    private enum Claim {
        case bound([Binding])
        case clash(key: String, reason: String)
    }

    private static func claim(_ service: ServiceSpec, replica: Int, against bindings: [Binding]) -> Claim {
        let instance = service.instanceName(replica: replica)
        var mine: [Binding] = []
        for (key, _) in service.endpoints {
            guard let endpoint = service.endpoint(key, replica: replica),
                  let new = binding(endpoint, owner: "\(instance)'s \(key)") else { continue }
            if let taken = bindings.first(where: { $0.clashes(with: new) }) ?? mine.first(where: { $0.clashes(with: new) }) {
                return .clash(key: key, reason: "\(instance) would bind port \(new.port), which \(taken.owner) binds")
            }
            mine.append(new)
        }
        return .bound(mine)
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
