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
        var parser = Parser(file: fileName, environment: environment)
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

private struct Parser {
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

    // MARK: Values

    /// The most values a cluster file may hold: far beyond any real cluster, and a bound on the
    /// work a hostile file can ask for.
    static let maxValues = 100_000

    /// What ``convert(_:path:seen:)`` has met so far: the places of the values, and how many.
    struct Conversion {
        var places: Set<Int> = []
        var values = 0
    }

    /// The YAML tree as plain values, with `${VAR}`s interpolated. Aliases (`*name`) are refused:
    /// Yams hands an alias back as the very node its anchor names, so a few nested aliases in a
    /// file of 500 bytes expand into millions of values (gigabytes, then an abort). Such a node
    /// comes back at its anchor's place in the file, which no two values of a file share.
    func convert(_ node: Node, path: String, seen: inout Conversion) throws -> YAMLValue {
        let line = (node.mark?.line ?? 0)
        seen.values += 1
        guard seen.values <= Self.maxValues else { throw fail(path, "the file holds over \(Self.maxValues) values") }
        var isEmptyScalar = false
        if case .scalar(let scalar) = node, scalar.string.isEmpty { isEmptyScalar = true }  // may stand where the next token starts
        if let mark = node.mark, !isEmptyScalar, !seen.places.insert(mark.line << 24 | mark.column).inserted {
            throw fail(path, "YAML aliases (*name) are not supported: write the value out")
        }
        switch node {
        case .scalar(let scalar):
            if scalar.style == .plain && ["", "~", "null", "Null", "NULL"].contains(scalar.string) { return .null(line: line) }
            return .scalar(try interpolate(scalar.string, path: path), line: line)
        case .sequence(let sequence):
            var items: [YAMLValue] = []
            for (offset, element) in sequence.enumerated() { items.append(try convert(element, path: "\(path)[\(offset)]", seen: &seen)) }
            return .list(items, line: line)
        case .mapping(let mapping):
            var pairs: [(String, YAMLValue)] = []
            for (key, value) in mapping {
                guard let keyText = key.string else { throw fail(path, "mapping keys must be strings") }
                if pairs.contains(where: { $0.0 == keyText }) { throw fail(path, "duplicate key '\(keyText)'") }
                pairs.append((keyText, try convert(value, path: path.isEmpty ? keyText : "\(path).\(keyText)", seen: &seen)))
            }
            return .map(pairs, line: line)
        case .alias:
            throw fail(path, "YAML aliases (*name) are not supported: write the value out")
        }
    }

    /// `${VAR}`, `${VAR:-default}` (unset or empty), `${VAR-default}` (unset), `${VAR:?message}`,
    /// and `$$` for a literal `$`.
    func interpolate(_ text: String, path: String) throws -> String {
        guard text.contains("$") else { return text }
        var out = ""
        var index = text.startIndex
        while index < text.endIndex {
            let character = text[index]
            guard character == "$" else { out.append(character); index = text.index(after: index); continue }
            let next = text.index(after: index)
            if next < text.endIndex, text[next] == "$" { out.append("$"); index = text.index(after: next); continue }
            guard next < text.endIndex, text[next] == "{", let close = text[next...].firstIndex(of: "}") else {
                throw fail(path, "bad variable reference in '\(text)': use ${NAME} or ${NAME:-default} ($$ for a literal $)")
            }
            let body = String(text[text.index(after: next)..<close])
            var name = body, fallback: String?, requireSet = false, emptyCounts = false, errorMessage: String?
            if let range = body.range(of: ":-") {
                name = String(body[..<range.lowerBound]); fallback = String(body[range.upperBound...]); emptyCounts = true
            } else if let range = body.range(of: ":?") {
                name = String(body[..<range.lowerBound]); errorMessage = String(body[range.upperBound...]); requireSet = true
            } else if let range = body.range(of: "-") {
                name = String(body[..<range.lowerBound]); fallback = String(body[range.upperBound...])
            }
            guard !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }), !name.first!.isNumber else {
                throw fail(path, "bad variable name in '${\(body)}'")
            }
            let value = environment[name]
            if requireSet, value == nil || value!.isEmpty {
                throw fail(path, "\(name) must be set: \(errorMessage ?? "")")
            }
            if let value, !(emptyCounts && value.isEmpty) {
                out += value
            } else {
                out += fallback ?? ""
            }
            index = text.index(after: close)
        }
        return out
    }

    func lookup(_ map: [(String, YAMLValue)], _ key: String) -> YAMLValue? {
        guard let value = map.first(where: { $0.0 == key })?.1 else { return nil }
        if case .null = value { return nil }
        return value
    }

    func checkKeys(_ map: [(String, YAMLValue)], path: String, known: [String]) throws {
        for (key, _) in map where !known.contains(key) && !key.hasPrefix("x-") {
            throw fail(path, "unknown key '\(key)' (known: \(known.filter { $0 != "x-notes" }.joined(separator: ", ")))")
        }
    }

    func join(_ path: String, _ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    func string(_ map: [(String, YAMLValue)], _ key: String, path: String) throws -> String? {
        guard let value = lookup(map, key) else { return nil }
        guard case .scalar(let text, _) = value else { throw fail(join(path, key), "must be a single value") }
        return text
    }

    func integer(_ map: [(String, YAMLValue)], _ key: String, path: String, range: ClosedRange<Int>, hint: String? = nil) throws -> Int? {
        guard let text = try string(map, key, path: path) else { return nil }
        guard let value = Int(text.trimmingCharacters(in: .whitespaces)), range.contains(value) else {
            throw fail(join(path, key), "must be \(hint ?? "an integer from \(range.lowerBound) to \(range.upperBound)"); got '\(text)'")
        }
        return value
    }

    func boolean(_ map: [(String, YAMLValue)], _ key: String, path: String) throws -> Bool? {
        guard let text = try string(map, key, path: path) else { return nil }
        switch text.lowercased() {
        case "true", "yes", "on", "1": return true
        case "false", "no", "off", "0": return false
        default: throw fail(join(path, key), "must be true or false; got '\(text)'")
        }
    }

    func duration(_ map: [(String, YAMLValue)], _ key: String, path: String, minimum: Double) throws -> Double? {
        guard let text = try string(map, key, path: path) else { return nil }
        guard let seconds = Self.seconds(text), seconds >= minimum, seconds <= 86_400 else {
            throw fail(join(path, key), "must be a duration such as 250ms, 5s or 1m (at least \(minimum) s); got '\(text)'")
        }
        return seconds
    }

    /// `heartbeat_timeout`: 0 (off) or at least 2 s, two of the services' 1 s heartbeats (under
    /// it every ready service was killed as silent, and the cluster stopped on its intensity).
    func heartbeatTimeout(_ map: [(String, YAMLValue)], path: String) throws -> Double? {
        guard let seconds = try duration(map, "heartbeat_timeout", path: path, minimum: 0) else { return nil }
        guard seconds == 0 || seconds >= 2 else {
            throw fail(join(path, "heartbeat_timeout"), "must be 0 (off) or at least 2s: services send a heartbeat every second; got \(seconds) s")
        }
        return seconds
    }

    func number(_ map: [(String, YAMLValue)], _ key: String, path: String, range: ClosedRange<Double>) throws -> Double? {
        guard let text = try string(map, key, path: path) else { return nil }
        guard let value = Double(text), range.contains(value) else {
            throw fail(join(path, key), "must be a number from \(range.lowerBound) to \(range.upperBound); got '\(text)'")
        }
        return value
    }

    func intensity(_ value: YAMLValue?, path: String, base: IntensityLimit) throws -> IntensityLimit {
        guard let value else { return base }
        guard case .map(let pairs, _) = value else { throw fail(path, "must be a mapping {max_restarts, period}") }
        try checkKeys(pairs, path: path, known: ["max_restarts", "period"])
        var limit = base
        limit.maxRestarts = try integer(pairs, "max_restarts", path: path, range: 0...10_000) ?? limit.maxRestarts
        limit.period = try duration(pairs, "period", path: path, minimum: 0.001) ?? limit.period
        return limit
    }

    func backoff(_ value: YAMLValue?, path: String, base: BackoffPolicy) throws -> BackoffPolicy {
        guard let value else { return base }
        guard case .map(let pairs, _) = value else { throw fail(path, "must be a mapping {initial, max, multiplier, jitter, reset_after}") }
        try checkKeys(pairs, path: path, known: ["initial", "max", "multiplier", "jitter", "reset_after"])
        var policy = base
        policy.initial = try duration(pairs, "initial", path: path, minimum: 0) ?? policy.initial
        policy.maximum = try duration(pairs, "max", path: path, minimum: 0) ?? policy.maximum
        policy.multiplier = try number(pairs, "multiplier", path: path, range: 1...100) ?? policy.multiplier
        policy.jitter = try number(pairs, "jitter", path: path, range: 0...1) ?? policy.jitter
        policy.resetAfter = try duration(pairs, "reset_after", path: path, minimum: 0) ?? policy.resetAfter
        guard policy.maximum >= policy.initial else { throw fail(path, "max must not be below initial") }
        return policy
    }

    func stringList(_ value: YAMLValue?, path: String) throws -> [String] {
        guard let value else { return [] }
        guard case .list(let items, _) = value else { throw fail(path, "must be a list") }
        return try items.enumerated().map { index, item in
            guard case .scalar(let text, _) = item else { throw fail("\(path)[\(index)]", "must be a single value") }
            return text
        }
    }

    /// Variables the supervisor sets for each child itself: an `environment:` entry naming one
    /// gave the child another instance's identity, data or trust store.
    static let supervisorVariables: Set<String> = ["NETPLAY_INSTANCE", "NETPLAY_SUPERVISOR", "NETPLAY_DATA_DIR", "NETPLAY_KEYS_DIR"]

    /// An `environment:` mapping: names a process environment can hold (`A=B` or an empty name
    /// made a malformed entry), none of ``supervisorVariables``, and no NUL in a value (cut
    /// short in silence on its way to exec).
    func environmentMap(_ value: YAMLValue?, path: String) throws -> [(String, String)] {
        let pairs = try stringMap(value, path: path)
        for (key, value) in pairs {
            let letter = { (scalar: Unicode.Scalar) in scalar == "_" || ("A"..."Z").contains(scalar) || ("a"..."z").contains(scalar) }
            guard let first = key.unicodeScalars.first, letter(first),
                  key.unicodeScalars.allSatisfy({ letter($0) || ("0"..."9").contains($0) }) else {
                throw fail("\(path)", "'\(ControlCharacters.escaped(key))' is not a variable name (letters, digits and '_', not starting with a digit)")
            }
            guard !Self.supervisorVariables.contains(key) else {
                throw fail("\(path).\(key)", "is set by the supervisor for each instance (\(Self.supervisorVariables.sorted().joined(separator: ", ")))")
            }
            guard !value.contains("\u{0}") else { throw fail("\(path).\(key)", "must not hold a NUL character") }
        }
        return pairs
    }

    func stringMap(_ value: YAMLValue?, path: String) throws -> [(String, String)] {
        guard let value else { return [] }
        guard case .map(let pairs, _) = value else { throw fail(path, "must be a mapping of names to values") }
        return try pairs.map { key, item in
            switch item {
            case .scalar(let text, _): return (key, text)
            case .null: return (key, "")
            default: throw fail("\(path).\(key)", "must be a single value")
            }
        }
    }

    func validateEndpoint(_ endpoint: String, path: String) throws {
        if endpoint.lowercased() == "none" { return }  // a service's way to disable an endpoint
        if endpoint.contains("://") {
            guard endpoint.hasPrefix("tcp://") || endpoint.hasPrefix("ipc://") || endpoint.hasPrefix("inproc://") || endpoint.hasPrefix("udp://")
                    || endpoint.hasPrefix("http://") else {
                throw fail(path, "unsupported endpoint '\(endpoint)' (tcp://HOST:PORT, ipc://PATH, HOST:PORT)")
            }
        }
        if endpoint.hasPrefix("tcp://") || !endpoint.contains("://") {
            guard let port = EndpointPorts.port(of: endpoint), (0...65535).contains(port) else {
                throw fail(path, "'\(endpoint)' needs a port from 0 to 65535 (after the port offset)")
            }
        }
    }

    /// The trust store's directory beside the instances' data directories.
    static let keysDirectoryName = "keys"

    static func isName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, (1...48).contains(name.utf8.count), ("a"..."z").contains(first) else { return false }
        return name.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "-" || $0 == "_" }
    }

    /// Seconds in `text`: a plain number (seconds) or a number with ms, s, m or h.
    static func seconds(_ text: String) -> Double? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        for (suffix, scale) in [("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)] where trimmed.hasSuffix(suffix) {
            return Double(trimmed.dropLast(suffix.count)).map { $0 * scale }
        }
        return Double(trimmed)
    }

    static func oneLine(_ error: YamlError) -> String {
        switch error {
        case .scanner(_, let problem, let mark, _), .parser(_, let problem, let mark, _), .composer(_, let problem, let mark, _):
            return "line \(mark.line), column \(mark.column): \(problem)"
        default:
            return "\(error)".split(separator: "\n").first.map(String.init) ?? "\(error)"
        }
    }
}
