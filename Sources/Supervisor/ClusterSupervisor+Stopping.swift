import CSupervisor
import Foundation
import Logging
import NetplayService
import NetplayWire

// ClusterSupervisor: the ordered stop (reverse dependency order) and the cluster's state.
extension ClusterSupervisor {
    func beginStop(reason: String) {
        guard !stopping else { return }
        stopping = true
        stopCursor = config.services.count - 1
        runtime?.logger.info("stopping the cluster in reverse order", metadata: ["reason": "\(reason)"])
        for instance in instances where !instance.running && instance.state != .failed {
            instance.state = .stopped
        }
        advanceStop(.now)
        updateClusterState()
    }

    /// Stops services from the last started to the first, one service at a time (its replicas
    /// together), SIGKILLing what outlives its stop timeout.
    func advanceStop(_ now: ContinuousClock.Instant) {
        for instance in instances where !instance.running && (instance.state == .waiting || instance.state == .backoff) {
            instance.state = .stopped
        }
        while stopCursor >= 0 {
            let name = config.services[stopCursor].name
            let running = instances.filter { $0.spec.name == name && $0.running }
            if running.isEmpty { stopCursor -= 1; continue }
            for instance in running {
                if instance.state != .stopping { terminate(instance, kill: false, reason: "cluster stopping") }
                escalate(instance, now)
            }
            break
        }
        // Anything else still running (a restart in flight in an earlier service) is escalated too.
        for instance in instances where instance.running && instance.state == .stopping { escalate(instance, now) }
    }

    func updateClusterState() {
        let previous = clusterState
        if stopping {
            clusterState = failure == nil ? .stopping : .failed
        } else {
            let required = instances.filter { $0.wanted && !($0.state == .stopped && $0.spec.restart != .always) }
            let allReady = required.allSatisfy { $0.state == .ready }
            if allReady {
                clusterState = .running
                if !allReadyOnce {
                    allReadyOnce = true
                    let took = ContinuousClock.now - startedAt
                    runtime?.logger.info("cluster ready", metadata: ["instances": "\(required.count)", "after": "\(Self.seconds(took))"])
                    runtime?.emit(topic: "supervisor.cluster_ready",
                                  message: "cluster \(config.name) ready: \(required.count) instances after \(Self.seconds(took))")
                } else if previous != .running {
                    runtime?.logger.info("cluster ready again", metadata: ["instances": "\(required.count)"])
                }
            } else {
                // Only given-up non-critical services missing: the cluster runs without them.
                let criticalReady = required.filter { givenUp[$0.spec.name] == nil }.allSatisfy { $0.state == .ready }
                clusterState = allReadyOnce || criticalReady ? .degraded : .starting
            }
        }
    }
}
