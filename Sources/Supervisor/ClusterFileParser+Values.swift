import Foundation
import NetplayService
import Yams

/// The cluster file's values: YAML nodes turned into plain values with `${VAR}`s interpolated,
/// and the typed readers (strings, numbers, durations, lists, maps) every section is read with.
extension ClusterFileParser {
    /// The most values a cluster file may hold: far beyond any real cluster, and a bound on the
    /// work a hostile file can ask for.
    static let maxValues = 100_000

    /// What ``convert(_:path:seen:)`` has met so far: how many values.
    struct Conversion {
        var values = 0
    }

    /// The YAML tree as plain values, with `${VAR}`s interpolated. The tree has no aliases
    /// (``YAMLAliasScan`` refused the file before it was composed), so every node is read once.
    func convert(_ node: Node, path: String, seen: inout Conversion) throws -> YAMLValue {
        let line = (node.mark?.line ?? 0)
        seen.values += 1
        guard seen.values <= Self.maxValues else { throw fail(path, "the file holds over \(Self.maxValues) values") }
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
            var keys = Set<String>()  // a scan of the pairs made a mapping of n keys cost n² comparisons
            for (key, value) in mapping {
                guard let keyText = key.string else { throw fail(path, "mapping keys must be strings") }
                guard keys.insert(keyText).inserted else { throw fail(path, "duplicate key '\(keyText)'") }
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
