import CSupervisor
import Foundation
import Logging
import NetplayService
import NetplayWire

// ClusterSupervisor: terminating and reaping children, what an exit means (restart, backoff,
// restart intensity), giving up on a service and failing the cluster.
extension ClusterSupervisor {
    /// Sends SIGTERM (or SIGKILL) to the instance's process group.
    func terminate(_ instance: SupervisedInstance, kill: Bool, reason: String) {
        guard instance.running else { return }
        if instance.pendingReason == nil { instance.pendingReason = reason }
        if instance.state != .stopping || kill {
            _ = nps_kill_group(instance.pid, kill ? SIGKILL : SIGTERM)
        }
        if instance.state != .stopping {
            runtime?.logger.info("\(instance.name) stopping", metadata: ["reason": "\(reason)", "signal": "\(kill ? "SIGKILL" : "SIGTERM")"])
        }
        instance.killSent = instance.killSent || kill
        // The stop timeout counts from the first request: asked again and again (a restart
        // request in a loop, a give-up during a scale-down), a child that ignores SIGTERM would
        // otherwise never get its SIGKILL.
        if instance.state != .stopping || instance.stopDeadline == nil {
            instance.stopDeadline = .now + .milliseconds(Int(instance.spec.stopTimeout * 1000))
        }
        instance.state = .stopping
        instance.ready = false
    }

    func reapAll() {
        for instance in instances where instance.running {
            var status: Int32 = 0
            let result = nps_reap(instance.pid, &status)
            if result == 1 {
                exited(instance, status: status)
            } else if result < 0 {
                exited(instance, status: -1)
            }
        }
    }

    func exited(_ instance: SupervisedInstance, status: Int32) {
        // Its last words: what a pipe can hold (1 MiB at most), not what a grandchild that kept
        // the pipe open may go on writing.
        if instance.outputFD >= 0 { _ = instance.output.drain(instance.outputFD, maxReads: 16) }
        instance.output.flush()
        closeOutput(instance)
        instance.health?.close()
        instance.health = nil
        instance.healthInFlight = false
        let uptime = instance.startedAt.map { ContinuousClock.now - $0 } ?? .zero
        let pid = instance.pid
        instance.pid = 0
        instance.ready = false
        var description: String
        if status >= 0 && nps_exited(status) != 0 {
            instance.lastExitCode = nps_exit_status(status)
            instance.lastSignal = 0
            description = "exited with status \(instance.lastExitCode)"
        } else if status >= 0 && nps_signaled(status) != 0 {
            instance.lastExitCode = -1
            instance.lastSignal = UInt32(nps_term_signal(status))
            description = "killed by \(Self.signalName(Int32(instance.lastSignal)))"
        } else {
            instance.lastExitCode = -1
            description = "lost (not our child any more)"
        }
        let cleanExit = instance.lastExitCode == 0
        if let pending = instance.pendingReason { description = "\(pending); \(description)" }
        instance.pendingReason = nil
        // A child's line may hold anything (a NUL, 128 KiB): it goes into status replies and events.
        let lastLine = ControlCharacters.fitted(instance.lastLine, maxBytes: 400)
        instance.lastReason = description + (cleanExit || lastLine.isEmpty ? "" : "; last output: \(lastLine)")
        instance.output.note("--- \(Timestamp.now()) supervisor: pid \(pid) \(description) after \(Self.seconds(uptime))")

        if stopping || !instance.wanted {
            instance.state = .stopped
            runtime?.logger.info("\(instance.name) stopped", metadata: ["pid": "\(pid)", "how": "\(description)"])
            if !instance.wanted && !stopping { instances.removeAll { $0 === instance } }
            return
        }
        if let entry = givenUp[instance.spec.name] {
            instance.restartRequested = false
            instance.state = .failed
            instance.nextRestart = entry.retry
            instance.lastReason = entry.reason
            runtime?.logger.info("\(instance.name) stopped", metadata: ["pid": "\(pid)", "how": "\(description)", "why": "given up"])
            return
        }
        if instance.restartRequested {
            instance.restartRequested = false
            instance.consecutiveFailures = 0
            instance.state = .waiting
            runtime?.logger.info("\(instance.name) restarting on request", metadata: ["pid": "\(pid)"])
            return
        }
        let failedNow = !cleanExit
        if instance.spec.restart == .never || (instance.spec.restart == .onFailure && !failedNow) {
            instance.state = failedNow ? .failed : .stopped
            runtime?.logger.notice("\(instance.name) \(description); restart policy \(instance.spec.restart.rawValue): not restarting")
            return
        }
        runtime?.logger.warning("\(instance.name) \(description)", metadata: ["pid": "\(pid)", "uptime": "\(Self.seconds(uptime))",
                                                                               "last_output": "\(lastLine)"])
        runtime?.emit(topic: "supervisor.exited", severity: .warning, message: "\(instance.name) \(instance.lastReason)",
                      attributes: ["service": instance.spec.name, "instance": instance.name])
        failed(instance, reason: instance.lastReason, uptime: uptime)
    }

    /// Schedules a restart with backoff, unless the restart intensity is exceeded: the
    /// cluster's for a critical service (the cluster stops), the service's own for a
    /// non-critical one (the supervisor gives up on that service for its cool-down).
    func failed(_ instance: SupervisedInstance, reason: String, uptime: Duration) {
        if Double(uptime.components.seconds) >= instance.spec.backoff.resetAfter { instance.consecutiveFailures = 0 }
        instance.consecutiveFailures += 1
        if !instance.spec.critical {
            var window = serviceIntensity[instance.spec.name] ?? RestartIntensity(limit: instance.spec.intensity)
            let within = window.record(at: now())
            serviceIntensity[instance.spec.name] = window
            guard within else {
                giveUp(instance.spec, trigger: instance, reason: reason)
                return
            }
        } else if !intensity.record(at: now()) {
            let limit = config.supervisor.intensity
            let message = "restart intensity exceeded: \(instance.name) (\(instance.spec.command)) failed again, more than \(limit.maxRestarts) restarts in \(Self.seconds(limit.period)); last failure: \(reason)"
            failCluster(message)
            instance.state = .failed
            return
        }
        let delay = instance.spec.backoff.delay(afterFailures: instance.consecutiveFailures, random: Double.random(in: 0..<1))
        instance.state = .backoff
        instance.nextRestart = .now + .milliseconds(Int(delay * 1000))
        instance.nextRestartUnixMs = UInt64((Date().timeIntervalSince1970 + delay) * 1000)
        runtime?.logger.notice("\(instance.name) restarts in \(Self.seconds(delay))",
                               metadata: ["failures": "\(instance.consecutiveFailures)"])
    }

    /// Stops every instance of the non-critical service `spec` and leaves it failed until its
    /// cool-down has passed; the rest of the cluster keeps running.
    func giveUp(_ spec: ServiceSpec, trigger: SupervisedInstance, reason: String) {
        let limit = spec.intensity
        let retry = ContinuousClock.now + .milliseconds(Int(spec.coolDown * 1000))
        let retryUnixMs = UInt64((Date().timeIntervalSince1970 + spec.coolDown) * 1000)
        let summary = "gave up: \(trigger.name) (\(spec.command)) failed again, more than \(limit.maxRestarts) restarts in \(Self.seconds(limit.period)); non-critical, so the cluster keeps running; retry in \(Self.seconds(spec.coolDown)); last failure: \(reason)"
        givenUp[spec.name] = (retry, summary)
        runtime?.logger.error("giving up on \(spec.name) for \(Self.seconds(spec.coolDown))", metadata: [
            "service": "\(spec.name)", "instance": "\(trigger.name)", "max_restarts": "\(limit.maxRestarts)",
            "period": "\(Self.seconds(limit.period))", "last_failure": "\(reason)",
        ])
        runtime?.emit(topic: "supervisor.gave_up", severity: .error, message: summary,
                      attributes: ["service": spec.name, "instance": trigger.name, "retry_in_s": "\(Int(spec.coolDown))"])
        for instance in instances where instance.spec.name == spec.name && instance.wanted {
            instance.nextRestart = retry
            instance.nextRestartUnixMs = retryUnixMs
            instance.lastReason = summary
            if instance.running {
                terminate(instance, kill: false, reason: "given up: \(spec.name) exceeded its restart intensity")
            } else {
                instance.state = .failed
            }
        }
    }

    /// Tries again the non-critical services whose cool-down has passed, with a fresh window.
    func retryGivenUp(_ now: ContinuousClock.Instant) {
        for (name, entry) in givenUp where now >= entry.retry {
            givenUp[name] = nil
            if let spec = config.service(name) { serviceIntensity[name] = RestartIntensity(limit: spec.intensity) }
            runtime?.logger.notice("retrying \(name) after its cool-down")
            for instance in instances where instance.spec.name == name && instance.wanted && !instance.running && instance.state == .failed {
                instance.consecutiveFailures = 0
                instance.nextRestart = nil
                instance.state = .waiting
            }
        }
    }

    func failCluster(_ message: String) {
        guard failure == nil else { return }
        failure = message
        runtime?.logger.critical("\(message); stopping the cluster")
        runtime?.emit(topic: "supervisor.failed", severity: .critical, message: message)
        beginStop(reason: "restart intensity exceeded")
        runtime?.handle.requestStop(reason: "restart intensity exceeded")
    }
}
