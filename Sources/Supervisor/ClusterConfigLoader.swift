import Foundation
import NetplayService
import Yams

/// A problem in the cluster file, as one line: `cluster.yaml: services.sync.replicas must be ...`.
public struct ClusterConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The one-line reason (file name first).
    public let description: String
    /// Creates an error.
    public init(_ description: String) { self.description = description }
}

/// Reads `cluster.yaml`: YAML, then `${VAR}` / `${VAR:-default}` interpolation from the
/// environment (like docker-compose), then strict validation (unknown keys, unknown services,
/// dependency cycles, replica counts, templates) with one-line errors.
public enum ClusterConfigLoader {
    /// The supervisor's own instance name (its key in the trust store): no service may take it.
    public static let supervisorInstance = "supervisor"

    /// Loads and validates the file at `path`.
    public static func load(path: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws(ClusterConfigError) -> ClusterConfig {
        let name = (path as NSString).lastPathComponent
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ClusterConfigError("\(path): cannot read the cluster file (does it exist?)")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw ClusterConfigError("\(path): not UTF-8 text")
        }
        return try parse(text, fileName: name, environment: environment)
    }

    /// Parses and validates cluster YAML `text` (`fileName` prefixes errors).
    public static func parse(_ text: String, fileName: String = "cluster.yaml",
                             environment: [String: String] = [:]) throws(ClusterConfigError) -> ClusterConfig {
        var parser = ClusterFileParser(file: fileName, environment: environment)
        do {
            return try parser.parse(text)
        } catch let error as ClusterConfigError {
            throw error
        } catch {
            throw ClusterConfigError("\(fileName): \(error)")
        }
    }
}

/// A parsed YAML value, after interpolation.
indirect enum YAMLValue {
    case scalar(String, line: Int)
    case list([YAMLValue], line: Int)
    case map([(String, YAMLValue)], line: Int)
    case null(line: Int)

    var line: Int {
        switch self {
        case .scalar(_, let line), .list(_, let line), .map(_, let line), .null(let line): return line
        }
    }
}

/// Reads one cluster file: its sections, services, start order and templates
/// (the values they are made of are read in ClusterFileParser+Values.swift).
struct ClusterFileParser {
    let file: String
    let environment: [String: String]

    init(file: String, environment: [String: String]) {
        self.file = file
        self.environment = environment
    }

    func fail(_ path: String, _ message: String) -> ClusterConfigError {
        ClusterConfigError("\(file): \(path.isEmpty ? "" : path + ": ")\(message)")
    }

    mutating func parse(_ text: String) throws -> ClusterConfig {
        if let alias = YAMLAliasScan.firstAlias(in: text) {
            throw ClusterConfigError("\(file): line \(alias.line), column \(alias.column): YAML aliases (*name) are not supported: write the value out")
        }
        let root: Node?
        do {
            root = try Yams.compose(yaml: text)
        } catch let error as YamlError {
            throw ClusterConfigError("\(file): invalid YAML: \(Self.oneLine(error))")
        }
        guard let root else { throw fail("", "the file is empty; it needs at least a services: section") }
        var seen = Conversion()
        let value = try convert(root, path: "", seen: &seen)
        guard case .map(let top, _) = value else { throw fail("", "the top level must be a mapping (cluster:, services:, ...)") }
        try checkKeys(top, path: "", known: ["cluster", "port_offset", "supervisor", "environment", "data_dir", "services", "x-notes"])

        var settings = SupervisorSettings()
        let clusterName = try string(top, "cluster", path: "") ?? "netplay"
        guard (1...64).contains(clusterName.utf8.count), !clusterName.unicodeScalars.contains(where: ControlCharacters.contains) else {
            throw fail("cluster", "must be 1 to 64 bytes of text without control characters (it names the cluster in status replies)")
        }
        let offset = try integer(top, "port_offset", path: "", range: -60000...60000) ?? 0
        if let section = lookup(top, "supervisor") {
            guard case .map(let entries, _) = section else { throw fail("supervisor", "must be a mapping") }
            try checkKeys(entries, path: "supervisor", known: ["endpoint", "telemetry", "backoff", "intensity", "stop_timeout",
                                                                "start_timeout", "heartbeat_timeout", "log_max_bytes", "log_files",
                                                                "max_replicas", "cool_down"])
            if let endpoint = try string(entries, "endpoint", path: "supervisor") { settings.endpoint = endpoint }
            settings.telemetry = try string(entries, "telemetry", path: "supervisor")
            settings.backoff = try backoff(lookup(entries, "backoff"), path: "supervisor.backoff", base: settings.backoff)
            settings.intensity = try intensity(lookup(entries, "intensity"), path: "supervisor.intensity", base: settings.intensity)
            settings.coolDown = try duration(entries, "cool_down", path: "supervisor", minimum: 0.01) ?? settings.coolDown
            settings.maxReplicas = try integer(entries, "max_replicas", path: "supervisor", range: 1...64,
                                               hint: "an integer from 1 to 64 (the most replicas one service may have)") ?? settings.maxReplicas
            settings.stopTimeout = try duration(entries, "stop_timeout", path: "supervisor", minimum: 0.01) ?? settings.stopTimeout
            settings.startTimeout = try duration(entries, "start_timeout", path: "supervisor", minimum: 0.5) ?? settings.startTimeout
            settings.heartbeatTimeout = try heartbeatTimeout(entries, path: "supervisor") ?? settings.heartbeatTimeout
            settings.logMaxBytes = try integer(entries, "log_max_bytes", path: "supervisor", range: 1024...(1 << 40)) ?? settings.logMaxBytes
            settings.logFiles = try integer(entries, "log_files", path: "supervisor", range: 0...100) ?? settings.logFiles
        }
        // The offset moves the supervisor's endpoint too, the default one included: two clusters
        // on one machine differ by their offsets alone.
        settings.endpoint = EndpointPorts.shift(settings.endpoint, by: offset)
        try validateEndpoint(settings.endpoint, path: "supervisor.endpoint")
        let environment = try environmentMap(lookup(top, "environment"), path: "environment")
        // Without data_dir: NETPLAY_DATA_ROOT, as compose/cluster.yaml spells it, else ./data.
        let dataDirectory = try string(top, "data_dir", path: "") ?? SettingResolver(environment: self.environment).text(nil, "NETPLAY_DATA_ROOT") ?? "data"

        guard let servicesValue = lookup(top, "services") else { throw fail("", "missing services: section") }
        guard case .map(let serviceEntries, _) = servicesValue, !serviceEntries.isEmpty else {
            throw fail("services", "must be a non-empty mapping of service names to their settings")
        }
        var services: [ServiceSpec] = []
        for (name, body) in serviceEntries {
            services.append(try service(name, body, settings: settings, offset: offset))
        }
        var config = ClusterConfig(name: clusterName, portOffset: offset, supervisor: settings, environment: environment,
                                   dataDirectory: dataDirectory, services: try startOrder(services, settings: settings))
        try validateTemplates(config)
        let ports = PortClashes.check(config)
        if let clash = ports.problem { throw fail(clash.path, clash.message) }
        for index in config.services.indices { config.services[index].scaleLimit = ports.limits[config.services[index].name] }
        return config
    }

    // MARK: Services

    func service(_ name: String, _ body: YAMLValue, settings: SupervisorSettings, offset: Int) throws -> ServiceSpec {
        let path = "services.\(name)"
        guard Self.isName(name) else {
            throw fail(path, "service names are 1 to 48 lower-case letters, digits, '-' or '_', starting with a letter")
        }
        guard case .map(let entries, _) = body else { throw fail(path, "must be a mapping with at least command:") }
        try checkKeys(entries, path: path, known: ["command", "args", "environment", "endpoints", "depends_on", "replicas",
                                                   "port_step", "instance", "restart", "readiness", "start_timeout",
                                                   "stop_timeout", "heartbeat_timeout", "backoff", "optional", "critical",
                                                   "intensity", "cool_down"])
        guard let command = try string(entries, "command", path: path), !command.isEmpty else {
            throw fail(path, "command: is required (an executable name such as netplay-discovery, or a path)")
        }
        var spec = ServiceSpec(name: name, command: command, settings: settings)
        spec.arguments = try stringList(lookup(entries, "args"), path: "\(path).args")
        spec.environment = try environmentMap(lookup(entries, "environment"), path: "\(path).environment")
        spec.endpoints = try stringMap(lookup(entries, "endpoints"), path: "\(path).endpoints").map { key, value in
            (key, EndpointPorts.shift(value, by: offset))
        }
        for (key, value) in spec.endpoints {
            guard key.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }), !key.isEmpty else {
                throw fail("\(path).endpoints", "'\(key)' is not a flag name (letters, digits, '-', '_')")
            }
            try validateEndpoint(value, path: "\(path).endpoints.\(key)")
        }
        spec.dependsOn = try stringList(lookup(entries, "depends_on"), path: "\(path).depends_on")
        if lookup(entries, "replicas") != nil {
            spec.scalable = true
            spec.replicas = try integer(entries, "replicas", path: path, range: 0...settings.maxReplicas,
                                        hint: "an integer from 0 to \(settings.maxReplicas) (the number of instances; supervisor.max_replicas)")!
            spec.instanceTemplate = "{service}-{replica}"
        }
        spec.portStep = try integer(entries, "port_step", path: path, range: 0...1000) ?? spec.portStep
        if let template = try string(entries, "instance", path: path) { spec.instanceTemplate = template }
        if spec.scalable && !spec.instanceTemplate.contains("{replica}") {
            throw fail("\(path).instance", "a replicated service's instance name must contain {replica}")
        }
        // Every instance the service may have (a replicated one can be scaled up to
        // supervisor.max_replicas) gets a valid name and ports a socket can bind.
        for replica in 0 ..< spec.possibleReplicas(settings) {
            let instance = spec.instanceName(replica: replica)
            // Each instance's data directory is <data_dir>/<instance>: "..", "." or "keys" (the
            // trust store) named another directory than its own.
            guard !instance.hasPrefix("."), instance != Self.keysDirectoryName else {
                throw fail("\(path).instance", "'\(instance)' cannot name an instance: its data directory would be another's (names starting with '.', or '\(Self.keysDirectoryName)')")
            }
            guard TrustStore.isName(instance) else {
                throw fail("\(path).instance", "instance names are 1 to 64 ASCII letters, digits, '-', '_' or '.'; got '\(instance)'"
                           + (replica > 0 ? " for replica \(replica) (up to supervisor.max_replicas)" : ""))
            }
            for (key, _) in spec.endpoints where replica > 0 {
                guard let endpoint = spec.endpoint(key, replica: replica) else { continue }
                try validateEndpoint(endpoint, path: "\(path).endpoints.\(key) (replica \(replica), port_step \(spec.portStep), up to supervisor.max_replicas)")
            }
        }
        if let text = try string(entries, "restart", path: path) {
            guard let policy = RestartPolicy(rawValue: text) else {
                throw fail("\(path).restart", "must be always, on-failure or never; got '\(text)'")
            }
            spec.restart = policy
        }
        if let text = try string(entries, "readiness", path: path) {
            guard let readiness = Readiness(rawValue: text) else {
                throw fail("\(path).readiness", "must be heartbeat, health or started; got '\(text)'")
            }
            spec.readiness = readiness
        }
        if spec.readiness == .health && spec.endpoints.first(where: { $0.0 == "endpoint" }) == nil {
            throw fail("\(path).readiness", "health readiness needs an endpoints.endpoint to ask")
        }
        spec.startTimeout = try duration(entries, "start_timeout", path: path, minimum: 0.5) ?? spec.startTimeout
        spec.stopTimeout = try duration(entries, "stop_timeout", path: path, minimum: 0.01) ?? spec.stopTimeout
        spec.heartbeatTimeout = try heartbeatTimeout(entries, path: path) ?? spec.heartbeatTimeout
        spec.backoff = try backoff(lookup(entries, "backoff"), path: "\(path).backoff", base: spec.backoff)
        spec.optional = try boolean(entries, "optional", path: path) ?? false
        spec.critical = try boolean(entries, "critical", path: path) ?? true
        if !spec.critical {
            spec.intensity = try intensity(lookup(entries, "intensity"), path: "\(path).intensity", base: spec.intensity)
            spec.coolDown = try duration(entries, "cool_down", path: path, minimum: 0.01) ?? spec.coolDown
        } else if lookup(entries, "intensity") != nil || lookup(entries, "cool_down") != nil {
            throw fail(path, "intensity: and cool_down: apply to non-critical services only (add critical: false); a critical service's restarts count against supervisor.intensity")
        }
        return spec
    }

    /// Dependencies first, file order otherwise; reports unknown services and cycles.
    func startOrder(_ services: [ServiceSpec], settings: SupervisorSettings) throws -> [ServiceSpec] {
        let names = Set(services.map(\.name))
        for service in services {
            for dependency in service.dependsOn {
                guard names.contains(dependency) else {
                    throw fail("services.\(service.name).depends_on",
                               "unknown service '\(dependency)' (services: \(services.map(\.name).joined(separator: ", ")))")
                }
                if dependency == service.name { throw fail("services.\(service.name).depends_on", "a service cannot depend on itself") }
            }
        }
        var byName: [String: ServiceSpec] = [:]
        for service in services { byName[service.name] = service }
        var ordered: [ServiceSpec] = []
        var state: [String: Int] = [:]  // 1 visiting, 2 done
        func visit(_ name: String, _ stack: [String]) throws {
            if state[name] == 2 { return }
            if state[name] == 1 {
                let cycle = stack[stack.firstIndex(of: name)!...] + [name]
                throw fail("services", "dependency cycle: \(cycle.joined(separator: " -> "))")
            }
            state[name] = 1
            for dependency in byName[name]!.dependsOn { try visit(dependency, stack + [name]) }
            state[name] = 2
            ordered.append(byName[name]!)
        }
        for service in services { try visit(service.name, []) }
        // Names stay unique however far each service is scaled, and none is the supervisor's own.
        var instances: [String: String] = [ClusterConfigLoader.supervisorInstance: "the supervisor itself"]
        for service in ordered {
            for replica in 0 ..< service.possibleReplicas(settings) {
                let instance = service.instanceName(replica: replica)
                let owner = replica >= max(1, service.replicas)
                    ? "\(service.name) once scaled to \(replica + 1) (supervisor.max_replicas)" : service.name
                if let other = instances[instance] {
                    throw fail("services.\(service.name)", "instance name '\(instance)' of \(owner) is also used by \(other)")
                }
                instances[instance] = owner
            }
        }
        return ordered
    }

    func validateTemplates(_ config: ClusterConfig) throws {
        let templates = TemplateContext(config: config, supervisorEndpoint: config.supervisor.endpoint)
        func check(_ text: String, _ path: String, service: ServiceSpec?) throws {
            do {
                _ = try templates.expand(text, service: service, replica: 0)
            } catch {
                throw fail(path, error.description)
            }
        }
        if let telemetry = config.supervisor.telemetry { try check(telemetry, "supervisor.telemetry", service: nil) }
        for (key, value) in config.environment { try check(value, "environment.\(key)", service: nil) }
        for service in config.services {
            for (index, argument) in service.arguments.enumerated() { try check(argument, "services.\(service.name).args[\(index)]", service: service) }
            for (key, value) in service.environment { try check(value, "services.\(service.name).environment.\(key)", service: service) }
        }
    }
}
