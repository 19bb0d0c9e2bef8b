import Foundation

/// A template that refers to something that does not exist.
struct TemplateError: Error, CustomStringConvertible {
    let description: String
}

/// Expands the `{...}` placeholders of cluster.yaml values for one instance:
/// `{service}`, `{replica}`, `{instance}`, `{data_dir}` (the instance's data directory),
/// `{data_root}` (every instance's data directory's parent), `{port:N}` (N plus the port
/// offset), `{supervisor}` (the control endpoint), `{NAME}` (this service's endpoint NAME for this
/// replica), `{SERVICE.NAME}` (another service's endpoint NAME, replica 0), and `{{`/`}}` for
/// literal braces.
struct TemplateContext {
    let config: ClusterConfig
    let supervisorEndpoint: String

    func instanceDataDirectory(_ instance: String) -> String {
        (config.dataDirectory as NSString).appendingPathComponent(instance)
    }

    func expand(_ text: String, service: ServiceSpec?, replica: Int) throws(TemplateError) -> String {
        guard text.contains("{") || text.contains("}") else { return text }
        var out = ""
        var index = text.startIndex
        while index < text.endIndex {
            let character = text[index]
            let next = text.index(after: index)
            if character == "{" || character == "}", next < text.endIndex, text[next] == character {
                out.append(character)
                index = text.index(after: next)
                continue
            }
            if character == "}" { throw TemplateError(description: "unmatched '}' in '\(text)' (write }} for a literal brace)") }
            guard character == "{" else { out.append(character); index = next; continue }
            guard let close = text[next...].firstIndex(of: "}") else {
                throw TemplateError(description: "unclosed '{' in '\(text)' (write {{ for a literal brace)")
            }
            let name = String(text[next..<close])
            out += try value(of: name, service: service, replica: replica, in: text)
            index = text.index(after: close)
        }
        return out
    }

    private func value(of name: String, service: ServiceSpec?, replica: Int, in text: String) throws(TemplateError) -> String {
        if name.hasPrefix("port:") {
            guard let port = Int(name.dropFirst(5)), (0...65535).contains(port), (0...65535).contains(port + config.portOffset) else {
                throw TemplateError(description: "{\(name)}: needs a port number that stays within 0...65535 after the port offset \(config.portOffset)")
            }
            return String(port == 0 ? 0 : port + config.portOffset)
        }
        switch name {
        case "supervisor": return supervisorEndpoint
        case "data_root": return config.dataDirectory
        case "service", "replica", "instance", "data_dir":
            guard let service else {
                throw TemplateError(description: "{\(name)} only means something in a service's args or environment")
            }
            let instance = service.instanceName(replica: replica)
            switch name {
            case "service": return service.name
            case "replica": return String(replica)
            case "instance": return instance
            default: return instanceDataDirectory(instance)
            }
        default:
            let parts = name.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            if parts.count == 1, let service, let endpoint = service.endpoint(parts[0], replica: replica) {
                return endpoint
            }
            guard parts.count == 2 else {
                throw TemplateError(description: "unknown placeholder {\(name)} in '\(text)' (known: {service}, {replica}, {instance}, {data_dir}, {data_root}, {port:N}, {supervisor}, {ENDPOINT}, {SERVICE.ENDPOINT})")
            }
            guard let other = config.service(parts[0]) else {
                throw TemplateError(description: "{\(name)} refers to unknown service '\(parts[0])'")
            }
            guard let endpoint = other.endpoint(parts[1], replica: 0) else {
                throw TemplateError(description: "{\(name)}: service '\(parts[0])' has no endpoint '\(parts[1])' (it has: \(other.endpoints.map(\.0).joined(separator: ", ")))")
            }
            return endpoint
        }
    }
}
