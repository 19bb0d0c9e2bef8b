import CSupervisor
import Foundation
import Logging
import NetplayService
import NetplayWire

// ClusterSupervisor: the supervision tick, launching instances once their dependencies are ready,
// readiness (heartbeats, health polls) and children's output.
extension ClusterSupervisor {
    // MARK: Lifecycle

    func makeInstance(_ service: ServiceSpec, replica: Int) throws -> SupervisedInstance {
        let plan = try planner.plan(service, replica: replica)
        let log = options.logDirectory.map {
            RotatingLogFile(path: ($0 as NSString).appendingPathComponent("\(plan.instance).log"),
                            maxBytes: config.supervisor.logMaxBytes, keep: config.supervisor.logFiles)
        }
        let output = ChildOutput(instance: plan.instance, width: consoleWidth, log: log, console: console)
        let instance = SupervisedInstance(spec: service, replica: replica, plan: plan, output: output)
        if let runtime {
            let labels = ["supervised_service": service.name, "supervised_instance": plan.instance]
            restartCounters[plan.instance] = runtime.metrics.counter(
                "netplay_supervisor_restarts_total", help: "Restarts of a supervised instance since the supervisor started.", labels: labels)
            runtime.metrics.gauge("netplay_supervisor_instance_uptime_seconds", help: "Seconds since the instance's current process started (0: not running).",
                                  labels: labels) { [weak instance] in Double(instance?.uptimeMs ?? 0) / 1000 }
            runtime.metrics.gauge("netplay_supervisor_instance_ready", help: "1 when the instance is ready.",
                                  labels: labels) { [weak instance] in instance?.state == .ready ? 1 : 0 }
        }
        return instance
    }

    func tick() {
        console?.flush()
        reapAll()
        let now = ContinuousClock.now
        if stopping {
            advanceStop(now)
            updateClusterState()
            return
        }
        for instance in instances where instance.wanted {
            switch instance.state {
            case .waiting:
                // A service given up on stays down until its cool-down ends, replicas added by a
                // scale meanwhile included (they started at once).
                if givenUp[instance.spec.name] == nil, dependenciesReady(instance.spec),
                   !instances.contains(where: { $0 !== instance && $0.name == instance.name && $0.running }) {
                    launch(instance)
                }
            case .starting:
                pollHealthIfNeeded(instance, now)
                if instance.ready {
                    markReady(instance)
                } else if let deadline = instance.startDeadline, now >= deadline {
                    terminate(instance, kill: true,
                              reason: "not ready \(Self.seconds(instance.spec.startTimeout)) after start")
                }
            case .ready, .unhealthy:
                if instance.spec.readiness == .heartbeat, instance.spec.heartbeatTimeout > 0,
                   let last = instance.lastHeartbeat ?? instance.spawnedAt,
                   now - last > .milliseconds(Int(instance.spec.heartbeatTimeout * 1000)) {
                    terminate(instance, kill: true, reason: "no heartbeat for \(Self.seconds(instance.spec.heartbeatTimeout))")
                } else {
                    let wanted: ServiceState = instance.ready ? .ready : .unhealthy
                    if wanted != instance.state {
                        instance.state = wanted
                        runtime?.logger.warning("\(instance.name) \(instance.ready ? "ready again" : "reports not ready")")
                    }
                }
            case .backoff:
                if let next = instance.nextRestart, now >= next {
                    instance.state = .waiting
                    if dependenciesReady(instance.spec) { launch(instance) }
                }
            case .stopping:
                escalate(instance, now)
            default:
                break
            }
        }
        retryGivenUp(now)
        for instance in instances where !instance.wanted && instance.state == .stopping { escalate(instance, now) }
        updateClusterState()
    }

    func escalate(_ instance: SupervisedInstance, _ now: ContinuousClock.Instant) {
        if instance.running, !instance.killSent, let deadline = instance.stopDeadline, now >= deadline {
            runtime?.logger.warning("\(instance.name) did not stop within \(Self.seconds(instance.spec.stopTimeout)); sending SIGKILL")
            _ = nps_kill_group(instance.pid, SIGKILL)
            instance.killSent = true
        }
    }

    func dependenciesReady(_ service: ServiceSpec) -> Bool {
        service.dependsOn.allSatisfy { name in
            if skipped.contains(name) || (desiredReplicas[name] ?? 0) == 0 { return true }
            let members = instances.filter { $0.spec.name == name && $0.wanted }
            let spec = config.service(name)!
            if spec.restart != .always && members.allSatisfy({ $0.state == .stopped }) { return true }
            if givenUp[name] != nil { return true }  // a non-critical dependency we gave up on does not hold the rest back
            return spec.scalable ? members.contains { $0.state == .ready } : members.allSatisfy { $0.state == .ready }
        }
    }

    func launch(_ instance: SupervisedInstance) {
        guard let runtime else { return }
        try? FileManager.default.createDirectory(atPath: instance.plan.environment["NETPLAY_DATA_DIR"] ?? config.dataDirectory,
                                                 withIntermediateDirectories: true)
        let child: ChildProcess
        do {
            child = try ChildProcess.spawn(instance.plan)
        } catch {
            instance.lastReason = error.description
            instance.lastExitCode = -1
            runtime.logger.error("\(instance.name) could not start", metadata: ["error": "\(error.description)"])
            failed(instance, reason: error.description, uptime: .zero)
            return
        }
        if instance.everStarted {
            instance.restarts += 1
            restartCounters[instance.name]?.increment()
        }
        instance.everStarted = true
        instance.pid = child.pid
        instance.outputFD = child.output
        instance.outputWatcher = runtime.watch(fileDescriptor: child.output) { [weak self, weak instance] _ in
            guard let self, let instance else { return }
            self.drainOutput(instance)
        }
        let now = ContinuousClock.now
        instance.startedAt = now
        instance.spawnedAt = now
        instance.startedAtSeconds = self.now()
        instance.startDeadline = now + .milliseconds(Int(instance.spec.startTimeout * 1000))
        instance.stopDeadline = nil
        instance.killSent = false
        instance.pendingReason = nil
        instance.lastHeartbeat = nil
        instance.ready = instance.spec.readiness == .started
        instance.state = .starting
        instance.nextRestart = nil
        runtime.logger.info("\(instance.name) started", metadata: ["pid": "\(child.pid)", "command": "\(instance.plan.commandLine)"])
        instance.output.note("--- \(Timestamp.now()) supervisor: started pid \(child.pid): \(instance.plan.commandLine)")
        if instance.ready { markReady(instance) }
    }

    func markReady(_ instance: SupervisedInstance) {
        instance.state = .ready
        instance.ready = true
        let took = instance.startedAt.map { ContinuousClock.now - $0 } ?? .zero
        runtime?.logger.info("\(instance.name) ready", metadata: ["pid": "\(instance.pid)", "after": "\(Self.seconds(took))"])
        runtime?.emit(topic: "supervisor.ready", message: "\(instance.name) is ready (pid \(instance.pid), after \(Self.seconds(took)))",
                      attributes: ["service": instance.spec.name, "instance": instance.name, "restarts": "\(instance.restarts)"])
        instance.health?.close()
        instance.health = nil
    }

    func pollHealthIfNeeded(_ instance: SupervisedInstance, _ now: ContinuousClock.Instant) {
        // Heartbeat readiness asks Health too while starting: the first heartbeat may be sent
        // before the connection is up, and the next one is a second later.
        guard instance.spec.readiness != .started, let endpoint = instance.plan.endpoint, let runtime, !instance.healthInFlight else { return }
        if let last = instance.lastHealthAsk, now - last < .milliseconds(100) { return }
        if instance.health == nil { instance.health = try? runtime.client(to: endpoint) }
        guard let client = instance.health else { return }
        instance.healthInFlight = true
        instance.lastHealthAsk = now
        let pid = instance.pid
        client.request(.healthRequest(HealthRequest()), timeout: 0.5) { [weak instance] result in
            guard let instance else { return }
            instance.healthInFlight = false
            if case .success(.healthResponse(let health)) = result, health.ready, instance.pid == pid, health.pid == 0 || health.pid == UInt32(pid) {
                instance.ready = true
            }
        }
    }

    func heartbeat(_ beat: ServiceHeartbeat) -> HandlerOutcome {
        // A pid no process can have (over Int32.max) is the sender's word, not a reason to trap.
        guard beat.pid == 0 || pid_t(exactly: beat.pid) != nil else {
            return .reply(.error(ServiceError(.badRequest, "Heartbeat pid \(beat.pid) is not a process id.").reply))
        }
        let pid = pid_t(beat.pid)
        // By name only (the name its key proved): a pid is the sender's word, and matching by it
        // let any member key speak for the instance whose pid it named.
        guard let instance = instances.first(where: { $0.name == beat.instance && $0.running }) else {
            if instances.contains(where: { $0.name == beat.instance }) { return .none }  // a process we already let go
            return .reply(.error(ServiceError(.notFound, "Instance '\(beat.instance)' is not part of cluster \(config.name).").reply))
        }
        if pid != 0 && pid != instance.pid { return .none }  // a stale process
        instance.lastHeartbeat = .now
        instance.lastHeartbeatUnixMs = UnixTime.nowMs()
        instance.heartbeatSequence = beat.sequence
        if instance.spec.readiness == .heartbeat { instance.ready = beat.ready && !beat.draining }
        if instance.state == .starting && instance.ready && !stopping { markReady(instance) }
        return .none
    }

    func drainOutput(_ instance: SupervisedInstance) {
        guard instance.outputFD >= 0 else { return }
        if !instance.output.drain(instance.outputFD) { closeOutput(instance) }
    }

    func closeOutput(_ instance: SupervisedInstance) {
        if let watcher = instance.outputWatcher { runtime?.unwatch(watcher) }
        instance.outputWatcher = nil
        if instance.outputFD >= 0 { close(instance.outputFD) }
        instance.outputFD = -1
    }
}
