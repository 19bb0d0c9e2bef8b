import Foundation
import Logging
import NetplayWire
import ZeroMQ

// ServiceRuntime: events on the PUB socket, metrics and records pushed to telemetry, heartbeats
// to the supervisor.
extension ServiceRuntime {
    // MARK: Events and telemetry

    /// Publishes `body` on the PUB socket under `topic` (two frames: topic, envelope).
    public func publish(topic: String, _ body: Envelope.Body) {
        guard let publisher else { return }
        do {
            let payload = try Envelope(body: body).encoded()
            try publisher.send(Array(topic.utf8), flags: [.dontWait, .more])
            try publisher.send(payload, flags: .dontWait)
        } catch {
            logger.warning("event not published", metadata: ["topic": "\(topic)", "error": "\(error)"])
        }
    }

    /// Publishes `body` under `topic` and records the event with telemetry (recent-events API).
    public func emit(topic: String, _ body: Envelope.Body? = nil, severity: Severity = .info, message: String,
                     sessionId: String = "", attributes: [String: String] = [:]) {
        eventSequence += 1
        let record = EventRecord(service: configuration.kind, instance: configuration.instance,
                                 topic: String(topic.prefix(128)), timestampUnixMs: UnixTime.nowMs(),
                                 severity: severity, message: String(message.prefix(2048)),
                                 attributes: Array(attributes.keyValues.prefix(32)), sessionId: String(sessionId.prefix(64)),
                                 sequence: eventSequence)
        publish(topic: topic, body ?? .eventRecord(record))
        pushToTelemetry(.eventRecord(record))
    }

    /// Pushes the current metrics snapshot to telemetry (also done every metrics interval).
    public func pushMetrics() {
        connectTelemetry()
        metricsSequence += 1
        pushToTelemetry(.metricsSnapshot(metrics.snapshot(service: configuration.kind, instance: configuration.instance,
                                                        sequence: metricsSequence)))
    }

    /// Pushes `body` (metrics, events, HUD statistics) to telemetry; dropped when telemetry is
    /// unreachable.
    public func pushToTelemetry(_ body: Envelope.Body) {
        guard let telemetryPush else { return }
        do {
            try telemetryPush.send(try Envelope(body: body).encoded(), flags: .dontWait)
            if telemetryReachable != true {
                telemetryReachable = true
                logger.info("telemetry reachable", metadata: ["telemetry": "\(configuration.telemetry ?? "")"])
            }
        } catch {
            if telemetryReachable != false {
                telemetryReachable = false
                logger.notice("telemetry unreachable; metrics and events are dropped until it is back",
                              metadata: ["telemetry": "\(configuration.telemetry ?? "")", "error": "\(error)"])
            }
        }
    }

    // MARK: Supervisor

    func sendHeartbeat() {
        guard let supervisorLink else { return }
        heartbeatSequence += 1
        let beat = ServiceHeartbeat(service: configuration.kind, instance: configuration.instance, pid: UInt32(getpid()),
                                    ready: (service?.isReady ?? false) && !draining, uptimeMs: uptimeMs,
                                    sequence: heartbeatSequence, version: version, endpoint: boundEndpoint,
                                    draining: draining)
        do {
            try supervisorLink.send(try Envelope(body: .serviceHeartbeat(beat)).encoded(), flags: .dontWait)
        } catch {
            logger.trace("heartbeat not sent", metadata: ["error": "\(error)"])
        }
    }

    func drainSupervisorReplies() {
        guard let supervisorLink else { return }
        while let frame = try? supervisorLink.receive(flags: .dontWait) {
            if let envelope = try? Envelope(decoding: frame), case .error(let error) = envelope.body {
                logger.warning("supervisor rejected heartbeat", metadata: ["error": "\(error.message)"])
            }
        }
    }
}
