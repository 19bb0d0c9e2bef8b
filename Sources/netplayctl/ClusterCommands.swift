import ArgumentParser
import Foundation
import NetplayService
import NetplayWire

/// `netplayctl cluster ...`: the supervisor's control endpoint.
struct Cluster: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Ask the supervisor for the cluster's status; restart, scale or stop services.",
        subcommands: [Status.self, Restart.self, Scale.self, Stop.self])

    /// Where the supervisor listens, shared by every cluster verb.
    struct Target: ParsableArguments {
        @Option(name: .customLong("supervisor"),
                help: ArgumentHelp("Supervisor control endpoint (env NETPLAY_SUPERVISOR, default: the supervisor in the trust store, else \(ServiceDefaults.supervisorEndpoint)).", valueName: "endpoint"))
        var endpoint: String?

        @OptionGroup var connection: ConnectionOptions

        func client() throws -> BlockingClient {
            let target = SettingResolver().text(endpoint, "NETPLAY_SUPERVISOR") ?? "supervisor"
            return try connection.client(for: target)
        }
    }

    static func render(_ status: ServiceStatus) -> String {
        let uptime = status.uptimeMs > 0 ? String(format: "%.1fs", Double(status.uptimeMs) / 1000) : "-"
        var line = "  \(status.instance.padding(toLength: max(14, status.instance.count), withPad: " ", startingAt: 0)) "
        line += "\(status.state.shortName.padding(toLength: 9, withPad: " ", startingAt: 0)) pid=\(status.pid) restarts=\(status.restarts) uptime=\(uptime)"
        if !status.endpoint.isEmpty { line += " \(status.endpoint)" }
        if !status.lastReason.isEmpty && status.state != .ready { line += " last: \(status.lastReason)" }
        return line
    }

    /// `netplayctl cluster status`.
    struct Status: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show every supervised instance: state, pid, restarts, uptime.",
            discussion: "Exit status: 0 when the cluster is running (every instance ready), 3 otherwise, 1 when the supervisor does not answer.")

        @Option(help: "Only this service.") var service = ""
        @Flag(help: "Print the reply as one JSON line.") var json = false
        @Option(help: ArgumentHelp("Keep asking until every instance is ready or this many seconds pass.", valueName: "seconds"))
        var waitReady: Double = 0
        @OptionGroup var target: Target

        func run() throws {
            guard waitReady >= 0, waitReady <= 3600 else { throw ValidationError("--wait-ready must be from 0 to 3600 seconds") }
            let client = try target.client()
            let deadline = Date().addingTimeInterval(waitReady)
            var status: ClusterStatusResponse
            while true {
                do {
                    let reply = try client.request(.clusterStatusRequest(ClusterStatusRequest(service: service)))
                    guard case .clusterStatusResponse(let response) = reply else { throw ClientError.unexpectedReply(reply.name) }
                    status = response
                    if status.state == .running || Date() >= deadline { break }
                } catch ClientError.timeout(let endpoint, let seconds) {
                    if Date() >= deadline { throw ClientError.timeout(endpoint: endpoint, seconds: seconds) }
                }
                usleep(100_000)
            }
            if json {
                emitJSON(status.jsonLine())
            } else {
                let state = status.state.shortName
                let ready = status.services.filter { $0.state == .ready }.count
                emit("cluster \(status.cluster) \(state): \(ready)/\(status.services.count) ready, supervisor pid \(status.supervisorPid), up \(String(format: "%.1f", Double(status.uptimeMs) / 1000))s")
                for service in status.services { emit(Cluster.render(service)) }
            }
            if status.state != .running { throw ExitCode(3) }
        }
    }

    /// `netplayctl cluster restart SERVICE`.
    struct Restart: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Restart a service's instances (SIGTERM, then start again at once).")

        @Argument(help: "Service name from cluster.yaml.") var service: String
        @Option(help: "Only this instance (e.g. sync-1).") var instance = ""
        @Flag(help: "SIGKILL instead of a graceful stop.") var kill = false
        @Flag(help: "Print the reply as one JSON line.") var json = false
        @OptionGroup var target: Target

        func run() throws {
            let reply = try target.client().request(.restartServiceRequest(RestartServiceRequest(service: service, instance: instance, kill: kill)))
            guard case .restartServiceResponse(let response) = reply else { throw ClientError.unexpectedReply(reply.name) }
            if json { emitJSON(response.jsonLine()); return }
            emit("restarting \(response.instances.map(\.instance).joined(separator: ", "))")
        }
    }

    /// `netplayctl cluster scale SERVICE N`.
    struct Scale: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Change the number of replicas of a replicated service (e.g. sync) while it runs.")

        @Argument(help: "Service name from cluster.yaml.") var service: String
        @Argument(help: "Wanted replicas, 0 to 64.") var replicas: Int
        @Flag(help: "Print the reply as one JSON line.") var json = false
        @OptionGroup var target: Target

        func validate() throws {
            guard (0...64).contains(replicas) else { throw ValidationError("replicas must be from 0 to 64, got \(replicas)") }
        }

        func run() throws {
            let reply = try target.client().request(.scaleServiceRequest(ScaleServiceRequest(service: service, replicas: UInt32(replicas))))
            guard case .scaleServiceResponse(let response) = reply else { throw ClientError.unexpectedReply(reply.name) }
            if json { emitJSON(response.jsonLine()); return }
            emit("\(response.service): \(response.previousReplicas) -> \(response.replicas) replicas")
            for instance in response.instances { emit(Cluster.render(instance)) }
        }
    }

    /// `netplayctl cluster stop`.
    struct Stop: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop every service in reverse order, then the supervisor.")

        @Option(help: "Why, for the supervisor's log.") var reason = "netplayctl cluster stop"
        @OptionGroup var target: Target

        func run() throws {
            let reply = try target.client().request(.stopClusterRequest(StopClusterRequest(reason: String(reason.prefix(256)))))
            guard case .ack = reply else { throw ClientError.unexpectedReply(reply.name) }
            emit("stopping the cluster")
        }
    }
}

/// `netplayctl events`: recent events kept by telemetry.
struct Events: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the cluster's recent events from telemetry, newest first.",
        discussion: "For live events use `netplayctl tap telemetry` (telemetry re-publishes every event it ingests).")

    @Argument(help: "Telemetry's request endpoint or name (default: telemetry).") var endpoint = "telemetry"
    @Option(help: "Only topics starting with this prefix.") var topic = ""
    @Option(help: "Only events of this session.") var session = ""
    @Option(help: "Only events at or above: debug, info, notice, warning, error, critical.") var severity = ""
    @Option(help: "At most this many events (1 to 500).") var limit = 50
    @Flag(help: "Print one JSON object per event.") var json = false
    @OptionGroup var connection: ConnectionOptions

    func run() throws {
        guard (1...500).contains(limit) else { throw ValidationError("--limit must be from 1 to 500") }
        var minimum = Severity.unspecified
        if !severity.isEmpty {
            guard let parsed = Severity(shortName: severity), parsed != .unspecified else {
                throw ValidationError("--severity must be debug, info, notice, warning, error or critical; got '\(severity)'")
            }
            minimum = parsed
        }
        let reply = try connection.client(for: endpoint).request(.recentEventsRequest(RecentEventsRequest(
            topicPrefix: topic, sessionId: session, limit: UInt32(limit), minSeverity: minimum)))
        guard case .recentEventsResponse(let response) = reply else { throw ClientError.unexpectedReply(reply.name) }
        for event in response.events {
            if json { emitJSON(event.jsonLine()); continue }
            // What a peer or a service put in an event reaches the terminal escaped, never as itself.
            let fields = [event.topic, event.service, event.instance, event.message].map { ControlCharacters.escaped($0) }
            emit("\(Timestamp.iso8601(unixMs: event.timestampUnixMs)) \(event.severity.shortName) \(fields[0]) \(fields[1])/\(fields[2]): \(fields[3])")
        }
    }
}
