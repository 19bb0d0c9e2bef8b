import Foundation
import NetplayService
import NetplayWire

/// One supervised process slot (a service, or one replica of it) and its lifecycle.
final class SupervisedInstance {
    let spec: ServiceSpec
    let replica: Int
    let name: String
    let plan: LaunchPlan
    let output: ChildOutput

    var state: ServiceState = .waiting
    /// False once scaled away or the cluster stops: do not start again.
    var wanted = true
    /// A manual restart: start again as soon as it exited, without backoff.
    var restartRequested = false
    var pid: pid_t = 0
    var outputFD: Int32 = -1
    var outputWatcher: Watcher?
    var startedAt: ContinuousClock.Instant?
    var startedAtSeconds: Double = 0
    var startDeadline: ContinuousClock.Instant?
    var stopDeadline: ContinuousClock.Instant?
    var killSent = false
    var ready = false
    var everStarted = false
    var lastHeartbeat: ContinuousClock.Instant?
    var lastHeartbeatUnixMs: UInt64 = 0
    var heartbeatSequence: UInt64 = 0
    var restarts: UInt32 = 0
    var consecutiveFailures = 0
    var lastExitCode: Int32 = -1
    var lastSignal: UInt32 = 0
    var lastReason = ""
    /// When it starts again: the end of its backoff, or of its cool-down when the supervisor
    /// gave up on its (non-critical) service.
    var nextRestart: ContinuousClock.Instant?
    var nextRestartUnixMs: UInt64 = 0
    var health: ServiceClient?
    var healthInFlight = false
    var lastHealthAsk: ContinuousClock.Instant?
    var spawnedAt: ContinuousClock.Instant?
    /// Why the supervisor is stopping it (shown with the exit status).
    var pendingReason: String?

    init(spec: ServiceSpec, replica: Int, plan: LaunchPlan, output: ChildOutput) {
        self.spec = spec
        self.replica = replica
        self.name = plan.instance
        self.plan = plan
        self.output = output
    }

    var running: Bool { pid > 0 }

    var uptimeMs: UInt64 {
        guard running, let startedAt else { return 0 }
        let elapsed = ContinuousClock.now - startedAt
        return UInt64(max(0, Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15))
    }

    var status: ServiceStatus {
        ServiceStatus(service: spec.name, instance: name, replica: UInt32(replica), state: state, pid: UInt32(max(0, pid)),
                      restarts: restarts, uptimeMs: uptimeMs, ready: ready, lastExitCode: lastExitCode,
                      lastSignal: lastSignal, lastReason: ControlCharacters.fitted(lastReason, maxBytes: 512),
                      lastHeartbeatUnixMs: lastHeartbeatUnixMs, endpoint: ControlCharacters.fitted(plan.endpoint ?? "", maxBytes: 256),
                      nextRestartUnixMs: state == .backoff || (state == .failed && nextRestart != nil) ? nextRestartUnixMs : 0)
    }

    /// The last line the process printed, for failure messages.
    var lastLine: String {
        output.recent.last(where: { !$0.trimmingCharacters(in: .whitespaces).isEmpty }) ?? ""
    }
}
