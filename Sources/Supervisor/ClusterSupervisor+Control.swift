import CSupervisor
import Foundation
import Logging
import NetplayService
import NetplayWire

// ClusterSupervisor: the operator's control requests (restart a service, scale it).
extension ClusterSupervisor {
    // MARK: Control requests

    func restart(_ request: RestartServiceRequest) throws(ServiceError) -> RestartServiceResponse {
        guard config.service(request.service) != nil else {
            throw ServiceError(.notFound, "No service '\(request.service)' in cluster \(config.name).", field: "RestartServiceRequest.service")
        }
        guard !skipped.contains(request.service) else {
            throw ServiceError(.unavailable, "Service '\(request.service)' is skipped: its command is not built.")
        }
        let matching = instances.filter { $0.wanted && $0.spec.name == request.service && (request.instance.isEmpty || $0.name == request.instance) }
        guard !matching.isEmpty else {
            throw ServiceError(.notFound, request.instance.isEmpty ? "Service '\(request.service)' has no instances (scaled to 0)."
                                                                : "No instance '\(request.instance)' of '\(request.service)'.",
                               field: "RestartServiceRequest.instance")
        }
        if givenUp.removeValue(forKey: request.service) != nil, let spec = config.service(request.service) {
            serviceIntensity[request.service] = RestartIntensity(limit: spec.intensity)
            runtime?.logger.notice("\(request.service) retried on request before its cool-down ended")
        }
        for instance in matching {
            if instance.running {
                instance.restartRequested = true
                terminate(instance, kill: request.kill, reason: "restart requested")
            } else {
                instance.consecutiveFailures = 0
                instance.nextRestart = nil
                instance.state = .waiting
            }
        }
        runtime?.emit(topic: "supervisor.restart_requested", severity: .notice,
                      message: "restart of \(matching.map(\.name).joined(separator: ", ")) requested",
                      attributes: ["service": request.service])
        updateClusterState()
        return RestartServiceResponse(instances: matching.map(\.status))
    }

    func scale(_ request: ScaleServiceRequest) throws(ServiceError) -> ScaleServiceResponse {
        guard let spec = config.service(request.service) else {
            throw ServiceError(.notFound, "No service '\(request.service)' in cluster \(config.name).", field: "ScaleServiceRequest.service")
        }
        guard spec.scalable else {
            throw ServiceError(.invalidState, "Service '\(spec.name)' is not replicated (give it replicas: in the cluster file to scale it).")
        }
        guard !skipped.contains(spec.name) else {
            throw ServiceError(.unavailable, "Service '\(spec.name)' is skipped: its command is not built.")
        }
        let wanted = Int(request.replicas)
        if let limit = spec.scaleLimit, wanted > limit.replicas {
            throw ServiceError(.badRequest, "Service '\(spec.name)' cannot have \(wanted) replicas: at most \(limit.replicas), as \(limit.reason) (change its port_step or ports in the cluster file).",
                               field: "ScaleServiceRequest.replicas")
        }
        guard wanted <= config.supervisor.maxReplicas else {
            throw ServiceError(.badRequest, "Service '\(spec.name)' cannot have \(wanted) replicas: at most \(config.supervisor.maxReplicas) (supervisor.max_replicas in the cluster file).",
                               field: "ScaleServiceRequest.replicas")
        }
        let previous = desiredReplicas[spec.name] ?? 0
        desiredReplicas[spec.name] = wanted
        let current = instances.filter { $0.spec.name == spec.name && $0.wanted }
        for instance in current where instance.replica >= wanted {
            instance.wanted = false
            if instance.running {
                terminate(instance, kill: false, reason: "scaled down to \(wanted)")
            } else {
                instances.removeAll { $0 === instance }
            }
        }
        for replica in 0..<wanted where !current.contains(where: { $0.replica == replica }) {
            do {
                let instance = try makeInstance(spec, replica: replica)
                let position = (instances.lastIndex { $0.spec.name == spec.name }).map { $0 + 1 }
                    ?? (instances.firstIndex { other in
                        (config.services.firstIndex { $0.name == other.spec.name } ?? 0) > (config.services.firstIndex { $0.name == spec.name } ?? 0)
                    } ?? instances.count)
                instances.insert(instance, at: position)
            } catch {
                throw ServiceError(.internal, "Cannot plan \(spec.name) replica \(replica): \(error)")
            }
        }
        runtime?.logger.info("scaled \(spec.name)", metadata: ["from": "\(previous)", "to": "\(wanted)"])
        runtime?.emit(topic: "supervisor.scaled", severity: .notice, message: "\(spec.name) scaled from \(previous) to \(wanted) replicas",
                      attributes: ["service": spec.name, "replicas": "\(wanted)", "previous": "\(previous)"])
        updateClusterState()
        return ScaleServiceResponse(service: spec.name, previousReplicas: UInt32(previous), replicas: UInt32(wanted),
                                    instances: instances.filter { $0.spec.name == spec.name }.prefix(64).map(\.status))
    }
}
