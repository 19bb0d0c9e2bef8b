import CSupervisor
import Foundation
import Logging
import NetplayService
import NetplayWire

/// How a ``ClusterSupervisor`` runs its children: where commands are found, where logs go.
public struct SupervisorOptions: Sendable {
    /// Finds each service's executable.
    public var resolver: CommandResolver
    /// Directory for per-instance log files (nil: no files).
    public var logDirectory: String?
    /// File descriptor that receives every child line with its instance prefix (nil: none).
    public var console: Int32?
    /// The environment children start from (NETPLAY_* variables are dropped).
    public var baseEnvironment: [String: String]

    /// Creates options.
    public init(resolver: CommandResolver, logDirectory: String? = nil, console: Int32? = 1,
                baseEnvironment: [String: String] = ProcessInfo.processInfo.environment) {
        self.resolver = resolver
        self.logDirectory = logDirectory
        self.console = console
        self.baseEnvironment = baseEnvironment
    }
}

/// The result of checking a cluster against the executables that are built.
public struct ClusterPreparation: Sendable {
    /// Optional services whose command is not built; they are skipped with a warning.
    public var skipped: [String]
    /// Warnings for the log.
    public var warnings: [String]
}

/// netplay-supervisor's logic, as a ``Service`` on the shared runtime: starts the cluster's
/// services in dependency order, waits for each one's readiness (heartbeat or health), watches
/// heartbeats and exits, restarts with exponential backoff and jitter under an OTP-style
/// intensity limit, scales replicated services, and stops everything in reverse order.
///
/// Critical services share the cluster's intensity: exceeding it stops the cluster. A
/// non-critical service (`critical: false`, e.g. telemetry) is supervised as if under its own
/// sub-supervisor: exceeding its own intensity stops that service only, which is reported as
/// failed and retried after its cool-down while the rest of the cluster keeps running.
///
/// Children run in their own process groups and die with the supervisor (PR_SET_PDEATHSIG).
/// Every method runs on the reactor thread.
public final class ClusterSupervisor: Service {
    /// The cluster.
    public let config: ClusterConfig
    /// Why the cluster was stopped on its own (restart intensity), or nil.
    public private(set) var failure: String?
    /// Services skipped because their optional command is not built.
    public let skipped: Set<String>

    private let options: SupervisorOptions
    private var instances: [SupervisedInstance] = []
    private var desiredReplicas: [String: Int] = [:]
    private var intensity: RestartIntensity
    /// Each non-critical service's own restart window.
    private var serviceIntensity: [String: RestartIntensity] = [:]
    /// Non-critical services given up on, with when they are tried again.
    private var givenUp: [String: (retry: ContinuousClock.Instant, reason: String)] = [:]
    private var planner: LaunchPlanner!
    private weak var runtime: ServiceRuntime?
    private var stopping = false
    private var stopCursor = 0
    private var clusterState: ClusterState = .starting
    private let startedAt = ContinuousClock.now
    private var allReadyOnce = false
    private var consoleWidth = 12
    private var restartCounters: [String: Counter] = [:]

    /// Checks that every non-optional command exists; lists the optional ones to skip.
    /// Throws a one-line reason for a missing command.
    public static func prepare(_ config: ClusterConfig, resolver: CommandResolver) throws(ClusterConfigError) -> ClusterPreparation {
        var skipped: [String] = [], warnings: [String] = []
        for service in config.services where resolver.resolve(service.command) == nil {
            if service.optional {
                skipped.append(service.name)
                warnings.append("\(service.name): '\(service.command)' is not built; skipped (optional service)")
            } else {
                throw ClusterConfigError("services.\(service.name).command: '\(service.command)' not found in \(resolver.directories.joined(separator: ", ")) or PATH (build it first)")
            }
        }
        return ClusterPreparation(skipped: skipped, warnings: warnings)
    }

    /// Creates the supervisor; nothing starts before the runtime calls ``start(runtime:)``.
    public init(config: ClusterConfig, options: SupervisorOptions, skipping skipped: [String] = []) {
        self.config = config
        self.options = options
        self.skipped = Set(skipped)
        intensity = RestartIntensity(limit: config.supervisor.intensity)
        for service in config.services where !self.skipped.contains(service.name) {
            desiredReplicas[service.name] = service.replicas
            if !service.critical { serviceIntensity[service.name] = RestartIntensity(limit: service.intensity) }
            for replica in 0..<service.replicas {
                consoleWidth = max(consoleWidth, service.instanceName(replica: replica).count)
            }
        }
    }

    // MARK: Service

    public func start(runtime: ServiceRuntime) throws {
        self.runtime = runtime
        planner = LaunchPlanner(config: config, resolver: options.resolver, baseEnvironment: options.baseEnvironment,
                                supervisorEndpoint: runtime.boundControlEndpoint ?? runtime.boundEndpoint,
                                keysDirectory: runtime.trust?.directory.path)
        if let directory = options.logDirectory {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        for service in config.services where !skipped.contains(service.name) {
            for replica in 0..<service.replicas { instances.append(try makeInstance(service, replica: replica)) }
        }
        runtime.metrics.gauge("netplay_supervisor_cluster_ready", help: "1 when every supervised instance is ready.") { [weak self] in
            self?.clusterState == .running ? 1 : 0
        }
        runtime.metrics.gauge("netplay_supervisor_instances", help: "Supervised instances wanted.") { [weak self] in
            Double(self?.instances.filter(\.wanted).count ?? 0)
        }
        runtime.logger.info("cluster starting", metadata: [
            "cluster": "\(config.name)", "instances": "\(instances.count)",
            "order": "\(config.services.filter { !skipped.contains($0.name) }.map(\.name).joined(separator: ","))",
        ])
        runtime.every(seconds: 0.05) { [weak self] _ in self?.tick() }
        tick()
    }

    public func handle(_ request: Request, runtime: ServiceRuntime) throws(ServiceError) -> HandlerOutcome {
        switch request.body {
        case .serviceHeartbeat(let beat):
            // A heartbeat speaks for the instance whose key sent it, never for another.
            guard request.caller.clusterInstance == beat.instance else {
                throw ServiceError(.permissionDenied, "A heartbeat for '\(beat.instance)' must come from that instance's key.")
            }
            return heartbeat(beat)
        case .clusterStatusRequest(let query):
            if !query.service.isEmpty && config.service(query.service) == nil {
                throw ServiceError(.notFound, "No service '\(query.service)' in cluster \(config.name).", field: "ClusterStatusRequest.service")
            }
            return .reply(.clusterStatusResponse(clusterStatus(service: query.service)))
        case .restartServiceRequest(let restart):
            return .reply(.restartServiceResponse(try self.restart(restart)))
        case .scaleServiceRequest(let scale):
            return .reply(.scaleServiceResponse(try self.scale(scale)))
        case .stopClusterRequest(let stop):
            let reason = stop.reason.isEmpty ? "stop requested" : "stop requested: \(stop.reason)"
            runtime.logger.notice("stopping the cluster on request", metadata: ["reason": "\(stop.reason)"])
            runtime.handle.requestStop(reason: reason)
            return .reply(.ack(Ack()))
        default:
            throw ServiceError(.unknownRequest, "The supervisor does not handle \(request.body.name).")
        }
    }

    public var isReady: Bool { true }

    public var status: String {
        let wanted = instances.filter(\.wanted)
        let ready = wanted.filter { $0.state == .ready }.count
        return "\(Self.name(of: clusterState)): \(ready)/\(wanted.count) ready"
    }

    public func introspect(section: String) -> JSONValue {
        [
            "cluster": .string(config.name),
            "state": .string(Self.name(of: clusterState)),
            "port_offset": .number(config.portOffset),
            "skipped": .array(skipped.sorted().map(JSONValue.string)),
            "failure": failure.map(JSONValue.string) ?? .null,
            "intensity": [
                "max_restarts": .number(config.supervisor.intensity.maxRestarts),
                "period_s": .double(config.supervisor.intensity.period),
                "recent_restarts": .number(intensity.count(at: now())),
            ],
            "max_replicas": .number(config.supervisor.maxReplicas),
            "given_up": .object(Dictionary(uniqueKeysWithValues: givenUp.map { name, entry in
                (name, JSONValue.object(["reason": .string(entry.reason),
                                         "retry_in_ms": .number(Int(Self.milliseconds(max(.zero, entry.retry - .now))))]))
            })),
            "instances": .array(instances.map { instance in
                [
                    "service": .string(instance.spec.name), "instance": .string(instance.name),
                    "state": .string(Self.name(of: instance.state)), "pid": .number(instance.pid),
                    "ready": .bool(instance.ready), "restarts": .number(instance.restarts), "critical": .bool(instance.spec.critical),
                    "uptime_ms": .number(instance.uptimeMs), "last_reason": .string(instance.lastReason),
                    "command": .string(instance.plan.commandLine),
                ]
            }),
        ]
    }

    public func drain(runtime: ServiceRuntime) {
        beginStop(reason: runtime.handle.stopRequested ?? "stop requested")
    }

    public var isDraining: Bool { instances.contains(where: \.running) }

    public func stop(runtime: ServiceRuntime) {
        for instance in instances where instance.running {
            _ = nps_kill_group(instance.pid, SIGKILL)
        }
        reapAll()
        let summary = failure.map { "cluster failed: \($0)" } ?? "cluster stopped"
        runtime.logger.info("\(summary)")
    }

    // MARK: Public state (tests)

    /// The status of every instance, in start order.
    public func clusterStatus(service: String = "") -> ClusterStatusResponse {
        ClusterStatusResponse(cluster: String(config.name.prefix(64)), state: clusterState,
                              uptimeMs: Self.milliseconds(ContinuousClock.now - startedAt),
                              services: instances.filter { service.isEmpty || $0.spec.name == service }.prefix(256).map(\.status),
                              supervisorPid: UInt32(getpid()))
    }

    // MARK: Lifecycle

    private func makeInstance(_ service: ServiceSpec, replica: Int) throws -> SupervisedInstance {
        let plan = try planner.plan(service, replica: replica)
        let log = options.logDirectory.map {
            RotatingLogFile(path: ($0 as NSString).appendingPathComponent("\(plan.instance).log"),
                            maxBytes: config.supervisor.logMaxBytes, keep: config.supervisor.logFiles)
        }
        let output = ChildOutput(instance: plan.instance, width: consoleWidth, log: log, console: options.console)
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

    private func tick() {
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
                if dependenciesReady(instance.spec),
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

    private func escalate(_ instance: SupervisedInstance, _ now: ContinuousClock.Instant) {
        if instance.running, !instance.killSent, let deadline = instance.stopDeadline, now >= deadline {
            runtime?.logger.warning("\(instance.name) did not stop within \(Self.seconds(instance.spec.stopTimeout)); sending SIGKILL")
            _ = nps_kill_group(instance.pid, SIGKILL)
            instance.killSent = true
        }
    }

    private func dependenciesReady(_ service: ServiceSpec) -> Bool {
        service.dependsOn.allSatisfy { name in
            if skipped.contains(name) || (desiredReplicas[name] ?? 0) == 0 { return true }
            let members = instances.filter { $0.spec.name == name && $0.wanted }
            let spec = config.service(name)!
            if spec.restart != .always && members.allSatisfy({ $0.state == .stopped }) { return true }
            if givenUp[name] != nil { return true }  // a non-critical dependency we gave up on does not hold the rest back
            return spec.scalable ? members.contains { $0.state == .ready } : members.allSatisfy { $0.state == .ready }
        }
    }

    private func launch(_ instance: SupervisedInstance) {
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
        instance.output.note("--- \(Self.timestamp()) supervisor: started pid \(child.pid): \(instance.plan.commandLine)")
        if instance.ready { markReady(instance) }
    }

    private func markReady(_ instance: SupervisedInstance) {
        instance.state = .ready
        instance.ready = true
        let took = instance.startedAt.map { ContinuousClock.now - $0 } ?? .zero
        runtime?.logger.info("\(instance.name) ready", metadata: ["pid": "\(instance.pid)", "after": "\(Self.seconds(took))"])
        runtime?.emit(topic: "supervisor.ready", message: "\(instance.name) is ready (pid \(instance.pid), after \(Self.seconds(took)))",
                      attributes: ["service": instance.spec.name, "instance": instance.name, "restarts": "\(instance.restarts)"])
        instance.health?.close()
        instance.health = nil
    }

    private func pollHealthIfNeeded(_ instance: SupervisedInstance, _ now: ContinuousClock.Instant) {
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

    private func heartbeat(_ beat: ServiceHeartbeat) -> HandlerOutcome {
        let match = instances.first { $0.name == beat.instance && $0.running }
            ?? instances.first { beat.pid != 0 && $0.pid == pid_t(beat.pid) && $0.running }
        guard let instance = match else {
            if instances.contains(where: { $0.name == beat.instance }) { return .none }  // a process we already let go
            return .reply(.error(ServiceError(.notFound, "Instance '\(beat.instance)' is not part of cluster \(config.name).").reply))
        }
        if beat.pid != 0 && pid_t(beat.pid) != instance.pid { return .none }  // a stale process
        instance.lastHeartbeat = .now
        instance.lastHeartbeatUnixMs = UInt64(Date().timeIntervalSince1970 * 1000)
        instance.heartbeatSequence = beat.sequence
        if instance.spec.readiness == .heartbeat { instance.ready = beat.ready && !beat.draining }
        if instance.state == .starting && instance.ready && !stopping { markReady(instance) }
        return .none
    }

    private func drainOutput(_ instance: SupervisedInstance) {
        guard instance.outputFD >= 0 else { return }
        if !instance.output.drain(instance.outputFD) { closeOutput(instance) }
    }

    private func closeOutput(_ instance: SupervisedInstance) {
        if let watcher = instance.outputWatcher { runtime?.unwatch(watcher) }
        instance.outputWatcher = nil
        if instance.outputFD >= 0 { close(instance.outputFD) }
        instance.outputFD = -1
    }

    /// Sends SIGTERM (or SIGKILL) to the instance's process group.
    private func terminate(_ instance: SupervisedInstance, kill: Bool, reason: String) {
        guard instance.running else { return }
        if instance.pendingReason == nil { instance.pendingReason = reason }
        if instance.state != .stopping || kill {
            _ = nps_kill_group(instance.pid, kill ? SIGKILL : SIGTERM)
        }
        if instance.state != .stopping {
            runtime?.logger.info("\(instance.name) stopping", metadata: ["reason": "\(reason)", "signal": "\(kill ? "SIGKILL" : "SIGTERM")"])
        }
        instance.killSent = instance.killSent || kill
        instance.state = .stopping
        instance.ready = false
        instance.stopDeadline = .now + .milliseconds(Int(instance.spec.stopTimeout * 1000))
    }

    private func reapAll() {
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

    private func exited(_ instance: SupervisedInstance, status: Int32) {
        if instance.outputFD >= 0 { _ = instance.output.drain(instance.outputFD) }
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
        let lastLine = instance.lastLine
        instance.lastReason = description + (cleanExit || lastLine.isEmpty ? "" : "; last output: \(lastLine)")
        instance.output.note("--- \(Self.timestamp()) supervisor: pid \(pid) \(description) after \(Self.seconds(uptime))")

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
    private func failed(_ instance: SupervisedInstance, reason: String, uptime: Duration) {
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
    private func giveUp(_ spec: ServiceSpec, trigger: SupervisedInstance, reason: String) {
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
    private func retryGivenUp(_ now: ContinuousClock.Instant) {
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

    private func failCluster(_ message: String) {
        guard failure == nil else { return }
        failure = message
        runtime?.logger.critical("\(message); stopping the cluster")
        runtime?.emit(topic: "supervisor.failed", severity: .critical, message: message)
        beginStop(reason: "restart intensity exceeded")
        runtime?.handle.requestStop(reason: "restart intensity exceeded")
    }

    private func beginStop(reason: String) {
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
    private func advanceStop(_ now: ContinuousClock.Instant) {
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

    private func updateClusterState() {
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

    // MARK: Control requests

    private func restart(_ request: RestartServiceRequest) throws(ServiceError) -> RestartServiceResponse {
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

    private func scale(_ request: ScaleServiceRequest) throws(ServiceError) -> ScaleServiceResponse {
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

    // MARK: Helpers

    private func now() -> Double {
        let elapsed = ContinuousClock.now - startedAt
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    static func milliseconds(_ duration: Duration) -> UInt64 {
        UInt64(max(0, Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15))
    }

    static func seconds(_ duration: Duration) -> String {
        seconds(Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
    }

    static func seconds(_ value: Double) -> String {
        value < 10 ? String(format: "%.2f s", value) : String(format: "%.0f s", value)
    }

    static func timestamp() -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date())
    }

    static func signalName(_ signal: Int32) -> String {
        switch signal {
        case SIGKILL: return "SIGKILL"
        case SIGTERM: return "SIGTERM"
        case SIGINT: return "SIGINT"
        case SIGSEGV: return "SIGSEGV"
        case SIGABRT: return "SIGABRT"
        case SIGILL: return "SIGILL"
        case SIGTRAP: return "SIGTRAP (crash)"
        case SIGBUS: return "SIGBUS"
        case SIGHUP: return "SIGHUP"
        case SIGPIPE: return "SIGPIPE"
        default: return "signal \(signal)"
        }
    }

    /// The lower-case name of a service state ("ready").
    public static func name(of state: ServiceState) -> String {
        state.protoName.replacingOccurrences(of: "SERVICE_STATE_", with: "").lowercased()
    }

    /// The lower-case name of a cluster state ("running").
    public static func name(of state: ClusterState) -> String {
        state.protoName.replacingOccurrences(of: "CLUSTER_STATE_", with: "").lowercased()
    }
}
