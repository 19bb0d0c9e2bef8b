import ArgumentParser
import Foundation
import NetplayService
import NetplayWire
import ZeroMQ

/// `netplayctl`: talk to any one service of the cluster for debugging.
@main
struct Netplayctl: NetplayCommand {
    static let configuration = CommandConfiguration(
        commandName: "netplayctl",
        abstract: "Debug any one Netplay service: health, introspection, live events.",
        discussion: """
        ENDPOINT is a ZeroMQ endpoint (tcp://127.0.0.1:7100) or a service name from the default \
        table: supervisor, discovery, coordinator, telemetry, sync (replica 0) or sync-N. \
        For `tap`, a service name means that service's events (PUB) endpoint.
        """,
        version: NetplayVersion.current,
        subcommands: [Health.self, Introspect.self, Ping.self, Tap.self, Keygen.self, Cluster.self, Events.self, Rooms.self, Sessions.self, Relays.self]
    )
}

/// Connection flags shared by every verb.
struct ConnectionOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Seconds to wait for a reply (env NETPLAY_TIMEOUT, default 2).", valueName: "seconds"))
    var timeout: Double?

    @OptionGroup var curve: CurveClientOptions

    @Option(help: ArgumentHelp("Trust store holding the operator key and the services' keys (env NETPLAY_KEYS_DIR, default $NETPLAY_DATA_ROOT/keys or data/keys: what `make up` made).", valueName: "path"))
    var keysDir: String?

    @Flag(help: "Talk to the public endpoint even when operator credentials are found (env NETPLAY_PUBLIC_PLANE=1).")
    var publicPlane = false

    func resolvedTimeout() throws -> Double {
        try SettingResolver().number(timeout, "NETPLAY_TIMEOUT", name: "--timeout", default: 2,
                                     range: 0.001...3600)
    }

    /// The cluster's CurveZMQ public key (flag, NETPLAY_CURVE_SERVER_KEY or derived from
    /// NETPLAY_CURVE_SECRET_KEY), or nil for plain connections.
    func serverKey() throws -> [UInt8]? { try curve.serverKey() }

    /// The trust store this command reads. One named by `--keys-dir` or `NETPLAY_KEYS_DIR` must
    /// exist: a mistyped path used to fall back to the public endpoint in silence (a tap on
    /// an operator-only endpoint then printed nothing, forever).
    func trustStore(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> TrustStore {
        let setting = SettingResolver(environment: environment)
        if let path = setting.text(keysDir, "NETPLAY_KEYS_DIR") {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue else {
                throw ValidationError("\(keysDir == nil ? "NETPLAY_KEYS_DIR" : "--keys-dir") names no directory: \(path)")
            }
            return TrustStore(directory: URL(fileURLWithPath: path))
        }
        let root = setting.text(nil, "NETPLAY_DATA_ROOT") ?? "data"
        return TrustStore(directory: URL(fileURLWithPath: root).appendingPathComponent("keys"))
    }

    /// `--public-plane`, else `NETPLAY_PUBLIC_PLANE`.
    func usesPublicPlane(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> Bool {
        try SettingResolver(environment: environment).isOn(publicPlane, "NETPLAY_PUBLIC_PLANE")
    }

    /// The operator's key and the member `target` names, when both are known: the way to the
    /// member's control endpoint (operator verbs, Introspect, full Health).
    func operatorRoute(to target: String) throws -> (member: TrustStore.Member, keys: CurveKeyPair)? {
        guard try !usesPublicPlane() else { return nil }
        let store = try trustStore()
        guard let keys = try store.localOperator(create: false), let member = ServiceAddress.member(target, in: store) else {
            return nil
        }
        return (member, keys)
    }

    /// A client for `target`'s requests: its control endpoint with the operator key when the
    /// trust store has both, else its public endpoint.
    func client(for target: String) throws -> BlockingClient {
        if let route = try operatorRoute(to: target), let control = route.member.control {
            return try BlockingClient(endpoint: control, timeout: try resolvedTimeout(), serverKey: route.member.publicKey,
                                      keys: route.keys)
        }
        return try BlockingClient(endpoint: try ServiceAddress.requests(target), timeout: try resolvedTimeout(),
                                  serverKey: try serverKey())
    }

    /// A subscriber to `target`'s events (operator credentials when the events are not public).
    func subscriber(for target: String, prefixes: [String]) throws -> EventSubscriber {
        if let route = try operatorRoute(to: target), let events = route.member.events {
            return try EventSubscriber(endpoint: events, prefixes: prefixes, serverKey: route.member.publicKey, keys: route.keys)
        }
        return try EventSubscriber(endpoint: try ServiceAddress.events(target), prefixes: prefixes, serverKey: try serverKey())
    }
}

/// Resolves service names to their default endpoints.
enum ServiceAddress {
    static func defaults(_ name: String) -> ServiceDefaults? {
        switch name {
        case "supervisor": return .supervisor
        case "discovery": return .discovery
        case "coordinator": return .coordinator
        case "telemetry": return .telemetry
        case "sync": return .sync(replica: 0)
        default:
            if name.hasPrefix("sync-"), let index = Int(name.dropFirst(5)), (0..<100).contains(index) {
                return .sync(replica: index)
            }
            return nil
        }
    }

    /// The trust-store member `target` names: an instance name, a service name of the default
    /// table (the member at that default endpoint, else the only one of its kind), or one of a
    /// member's endpoints.
    static func member(_ target: String, in store: TrustStore) -> TrustStore.Member? {
        if let member = store.member(instance: target) { return member }
        if let known = defaults(target) {
            let ofKind = store.members(kind: known.kind)
            return ofKind.first { $0.endpoint == known.endpoint || $0.control == known.control }
                ?? (ofKind.count == 1 ? ofKind[0] : nil)
        }
        return store.member(endpoint: target)
    }

    static func requests(_ target: String) throws -> String {
        let endpoint = defaults(target)?.endpoint ?? target
        try EndpointValidator.validate(endpoint, name: "ENDPOINT")
        return endpoint
    }

    static func events(_ target: String) throws -> String {
        if let known = defaults(target) {
            guard let events = known.events else { throw ValidationError("\(target) publishes no events") }
            return events
        }
        try EndpointValidator.validate(target, name: "ENDPOINT")
        return target
    }
}

/// Prints one line of text to standard output. Names and messages in it came from elsewhere (a
/// room's title, a RetroArch host's nick, a service's status): their control characters, line
/// breaks included, are shown escaped, so they can neither forge a line nor reach the terminal
/// as an escape sequence.
func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((ControlCharacters.escaped(line) + "\n").utf8))
}

/// Prints a JSON document (one line, or indented over several). An encoder escapes the control
/// characters below U+0020 in strings but may leave DEL, C1 controls and U+2028/U+2029 as they
/// are, which a terminal obeys: those become `\u` escapes, the same text to a JSON reader.
func emitJSON(_ json: String) {
    var out = ""
    out.reserveCapacity(json.utf8.count + 1)
    for scalar in json.unicodeScalars {
        if scalar != "\n" && ControlCharacters.contains(scalar) {
            let hex = String(scalar.value, radix: 16)
            out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        } else {
            out.unicodeScalars.append(scalar)
        }
    }
    FileHandle.standardOutput.write(Data((out + "\n").utf8))
}

/// Pretty-prints a JSON document (sorted keys); returns the input when it is not JSON.
func prettyJSON(_ text: String) -> String {
    guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed]),
          let data = try? JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]) else {
        return text
    }
    return String(decoding: data, as: UTF8.self)
}

extension Netplayctl {
    /// `netplayctl health ENDPOINT`.
    struct Health: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Ask a service whether it is up and ready.",
            discussion: "Exit status: 0 ready, 3 up but not ready, 1 no reply or error.")

        @Argument(help: "Service endpoint or name.") var endpoint: String
        @Flag(help: "Print the reply as one JSON line.") var json = false
        @OptionGroup var connection: ConnectionOptions

        func run() throws {
            let client = try connection.client(for: endpoint)
            let reply = try client.request(.healthRequest(HealthRequest()))
            guard case .healthResponse(let health) = reply else { throw ClientError.unexpectedReply(reply.name) }
            if json {
                emitJSON(health.jsonLine())
            } else {
                emit("\(health.service)/\(health.instance) \(health.ready ? "ready" : "not ready") version=\(health.version) pid=\(health.pid) uptime=\(String(format: "%.1f", Double(health.uptimeMs) / 1000))s status=\"\(health.status)\"")
                for detail in health.details { emit("  \(detail.key): \(detail.value)") }
            }
            if !health.ready { throw ExitCode(3) }
        }
    }

    /// `netplayctl introspect ENDPOINT`.
    struct Introspect: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Dump a service's internal state as JSON.")

        @Argument(help: "Service endpoint or name.") var endpoint: String
        @Option(help: "Only this section of the state (service-defined).") var section = ""
        @Flag(help: "Print compact one-line JSON instead of indented JSON.") var json = false
        @OptionGroup var connection: ConnectionOptions

        func run() throws {
            let client = try connection.client(for: endpoint)
            let reply = try client.request(.introspectRequest(IntrospectRequest(section: section)))
            guard case .introspectResponse(let dump) = reply else { throw ClientError.unexpectedReply(reply.name) }
            emitJSON(json ? dump.json : prettyJSON(dump.json))
        }
    }

    /// `netplayctl ping ENDPOINT`.
    struct Ping: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Measure request round trips to a service.")

        @Argument(help: "Service endpoint or name.") var endpoint: String
        @Option(help: "Number of pings.") var count = 5
        @Flag(help: "Print one JSON line per ping.") var json = false
        @OptionGroup var connection: ConnectionOptions

        func run() throws {
            guard (1...100_000).contains(count) else { throw ValidationError("--count must be from 1 to 100000") }
            let client = try connection.client(for: endpoint)
            var samples: [Double] = []
            for index in 0..<count {
                let started = DispatchTime.now().uptimeNanoseconds
                let reply = try client.request(.ping(NetplayWire.Ping(nonce: UInt64(index), sentAtUs: started / 1000)))
                guard case .pong(let pong) = reply, pong.nonce == UInt64(index) else { throw ClientError.unexpectedReply(reply.name) }
                let micros = Double(DispatchTime.now().uptimeNanoseconds - started) / 1000
                samples.append(micros)
                emit(json ? "{\"seq\":\(index),\"rtt_us\":\(String(format: "%.1f", micros))}"
                          : "pong seq=\(index) rtt=\(String(format: "%.1f", micros)) us")
            }
            if !json {
                let sorted = samples.sorted()
                emit(String(format: "%d pings: min %.1f us, median %.1f us, max %.1f us",
                            count, sorted.first!, sorted[sorted.count / 2], sorted.last!))
            }
        }
    }

    /// `netplayctl tap ENDPOINT`.
    struct Tap: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Subscribe to a service's events and print each one as a short line.",
            discussion: """
            Each line is the time, the topic and a summary of the event, e.g. \
            `12:04:05.120 sessions.started s-d37b "tapme" 2/2 relay sync-0 by "alice" attached 2/2`; \
            --json prints the whole event instead.
            """)

        @Argument(help: "Events (PUB) endpoint or service name.") var endpoint: String
        @Option(name: .customLong("topic"), help: "Only topics starting with this prefix (repeatable).") var topics: [String] = []
        @OptionGroup var limits: StreamLimits
        @Flag(help: "Print one JSON object per event: {\"topic\":...,\"envelope\":{...}}.") var json = false
        @OptionGroup var connection: ConnectionOptions

        func run() throws {
            let subscriber = try connection.subscriber(for: endpoint, prefixes: topics.isEmpty ? [""] : topics)
            var stop = limits.start()
            while stop.goesOn {
                guard let event = try subscriber.next(timeout: stop.waitMs(cap: 1000)) else { continue }
                stop.seen += 1
                if json { emitJSON(Self.render(event, json: true)) } else { emit(Self.render(event, json: false)) }
            }
        }

        static func render(_ event: ReceivedEvent, json: Bool) -> String {
            var topic = ""
            JSONString.append(event.topic, to: &topic)
            switch event.envelope {
            case .success(let envelope):
                return json ? "{\"topic\":\(topic),\"envelope\":\(envelope.jsonLine())}"
                            : "\(JSONString.clock()) \(EventSummary.line(topic: event.topic, envelope.body))"
            case .failure(let error):
                var message = ""
                JSONString.append(error.description, to: &message)
                return json ? "{\"topic\":\(topic),\"error\":\(message)}"
                            : "\(JSONString.clock()) \(EventSummary.plain(event.topic)) undecodable: \(error)"
            }
        }
    }
}

/// Small JSON text helpers for netplayctl's output.
enum JSONString {
    static func append(_ text: String, to out: inout String) {
        out += JSONValue.string(text).rendered()
    }

    /// The local time of day with milliseconds (`12:04:05.120`), for tap lines.
    static func clock(_ date: Date = Date()) -> String {
        let parts = Calendar.current.dateComponents([.hour, .minute, .second, .nanosecond], from: date)
        return String(format: "%02d:%02d:%02d.%03d", parts.hour ?? 0, parts.minute ?? 0, parts.second ?? 0, (parts.nanosecond ?? 0) / 1_000_000)
    }
}
