import Foundation
import Logging
import NetplayAuth
import NetplayService
import NetplayWire
import RetroArchRelay
import ZeroMQ

/// The relay as a service on the shared runtime: peers' messages go to a ``RelayCore``, its
/// timers run on the reactor, it registers with the coordinator and reports its load, pushes
/// session statistics to telemetry, and publishes `sync.*` events.
///
/// `netplay-sync` runs one per process; a LAN host runs one in-process with
/// ``ServiceHost/start(configuration:logger:makeService:)`` and a ``LanAdmission``.
public final class RelayService: RawFrameService, RelayTransport {
    /// The relay's configuration (an empty advertised endpoint becomes the bound one at start).
    public private(set) var configuration: RelayConfiguration
    private let keyRing: TicketKeyRing
    private let coordinatorEndpoint: String?
    private let lanAdmission: LanAdmission?
    private let tickSeconds: Double
    /// RetroArch's relay protocol, when configured (kept out of ``RelayConfiguration``, which
    /// every session holds).
    let retroArchConfiguration: TunnelConfiguration?
    private var core: RelayCore?
    /// The runtime that runs this service (it outlives the service's use of it).
    private unowned(unsafe) var runtime: ServiceRuntime?
    private var coordinator: ServiceClient?
    var registered = false
    private var refreshTimer: TimerID?
    private var coordinatorWarned = false
    private var draining = false
    private var lastLoadMs: UInt64 = 0
    /// Inputs accepted over the last second (the gauge and introspection).
    private var inputsPerSecond = 0
    private var inputsThisSecond = 0
    /// Inputs accepted since the last load report to the coordinator, and when that was.
    private var inputsSinceReport = 0
    private var lastReportMs: UInt64 = 0
    /// The process's CPU use over the last second, in percent of one core.
    private var cpuPercent = 0.0
    private var cpuMeter = ProcessCPUMeter()
    /// The session timers run in slices, one per timer run (see ``RelayCore/tick(now:slice:of:)``):
    /// each session still runs every `tickSeconds`, and no run holds up the messages behind it
    /// for all sessions' work (at 1,000 sessions one pass took 0.2-0.5 ms). A slice takes about
    /// this many sessions, so a relay with few sessions (a LAN host's, often on a battery) wakes
    /// once per `tickSeconds` instead of once per slice.
    static let sessionsPerSlice = 200
    /// At most this many slices (one timer run per millisecond at the default 5 ms period).
    static let maxTickSlices = 5
    /// How many slices the timers of `sessions` sessions run in.
    static func tickSlices(forSessions sessions: Int) -> Int {
        min(maxTickSlices, max(1, sessions / sessionsPerSlice))
    }
    private var tickSlices = 1
    private var nextSlice = 0
    private var tickTimer: TimerID?

    private var inputsTotal: Counter?
    var eventsTotal: Counter?
    /// RetroArch's relay protocol, when configured.
    var tunnel: TunnelServer?
    /// An early refresh is scheduled (see ``refreshSoon(_:)``).
    var refreshPending = false
    /// The connection each peer attached (or last acknowledged a transfer) on: how much of what
    /// the relay sent it its kernel has not acknowledged (``unacknowledgedBytes(to:)``).
    private var peerConnections: [PeerAddress: TCPConnectionProbe] = [:]
    /// At most one log line a second about closed RetroArch connections (all are counted).
    var lastRefusalLogMs: UInt64 = 0
    var refusalsUnlogged = 0

    /// Creates the relay. `keyRing` verifies join tickets; with `coordinator` the relay registers
    /// there and refreshes its load; with `lanAdmission` it also admits LAN joiners itself; with
    /// `retroArch` it relays RetroArch netplay too (docs/retroarch.md).
    public init(configuration: RelayConfiguration, keyRing: TicketKeyRing, coordinator: String? = nil,
                lanAdmission: LanAdmission? = nil, tickSeconds: Double = 0.005, retroArch: TunnelConfiguration? = nil) {
        self.configuration = configuration
        self.keyRing = keyRing
        self.coordinatorEndpoint = coordinator
        self.lanAdmission = lanAdmission
        self.tickSeconds = tickSeconds
        self.retroArchConfiguration = retroArch
    }

    // MARK: Service

    public func start(runtime: ServiceRuntime) throws {
        self.runtime = runtime
        if configuration.advertisedEndpoint.isEmpty { configuration.advertisedEndpoint = runtime.boundEndpoint }
        if configuration.eventsEndpoint.isEmpty { configuration.eventsEndpoint = runtime.boundEventsEndpoint ?? "" }
        core = RelayCore(configuration: configuration, verifier: JoinTicketVerifier(keyRing: keyRing), transport: self)
        if let problem = core!.revocationsProblem {
            runtime.logger.warning("revoked participants not all restored", metadata: ["problem": "\(problem)"])
        }
        inputsTotal = runtime.metrics.counter("netplay_sync_inputs_total", help: "Player inputs accepted by the relay.")
        eventsTotal = runtime.metrics.counter("netplay_sync_events_total", help: "Session events published (joins, leaves, substitutions, desyncs).")
        // The runtime runs these only while it runs this service (which it holds), so the
        // closures need not keep it alive, and no weak reference slows every retain of it.
        runtime.metrics.gauge("netplay_sync_sessions", help: "Sessions served.") { [unowned(unsafe) self] in
            Double(self.core?.sessionCount ?? 0)
        }
        runtime.metrics.gauge("netplay_sync_peers", help: "Peers attached.") { [unowned(unsafe) self] in
            Double(self.core?.peerCount ?? 0)
        }
        runtime.metrics.gauge("netplay_sync_inputs_per_second", help: "Inputs accepted per second, last second.") {
            [unowned(unsafe) self] in Double(self.inputsPerSecond)
        }
        runtime.metrics.gauge("netplay_sync_cpu_percent", help: "The relay process's CPU use over the last second, in percent of one core.") {
            [unowned(unsafe) self] in self.cpuPercent
        }
        // Only a relay that reports to a coordinator keeps lifecycle facts; each one is told
        // within 200 ms rather than at the next periodic refresh.
        core!.lifecycle.enabled = coordinatorEndpoint != nil
        core!.lifecycle.onRecord = { [unowned(unsafe) self, unowned runtime] in self.refreshSoon(runtime) }
        scheduleTick(runtime)
        if let retroArchConfiguration { try startTunnel(retroArchConfiguration, runtime) }
        if coordinatorEndpoint != nil {
            register(runtime)
        } else if lanAdmission == nil {
            runtime.logger.notice("no coordinator configured: running without registration (peers need tickets signed with the cluster secret)")
        }
        if let lanAdmission { runtime.logger.info("LAN relay admitting joiners itself", metadata: ["room": "\(lanAdmission.roomName)"]) }
    }

    public func handle(_ request: Request, runtime: ServiceRuntime) throws(ServiceError) -> HandlerOutcome {
        guard let core else { throw ServiceError(.unavailable, "The relay is starting.") }
        switch request.body {
        case .closeRelaySessionRequest, .disconnectPeerRequest, .assignSlotsRequest:
            // Commands to a relay come from the coordinator alone (the runtime already admits
            // only cluster keys to them; another relay is a cluster member too).
            guard case .cluster(let kind, _) = request.caller, kind == "coordinator" else {
                throw ServiceError(.permissionDenied, "Only the coordinator may close sessions or disconnect peers on a relay.")
            }
        default:
            break
        }
        switch request.body {
        case .attachRequest(let attach) where !attach.additionalPath && !request.peer.viaControl:
            notePeerConnection(request.peer, runtime: runtime, core: core)
        case .stateTransferAck where !request.peer.viaControl:
            notePeerConnection(request.peer, runtime: runtime, core: core)
        default:
            break
        }
        if let lanAdmission, let reply = try lanAdmission.handle(request.body, source: request.source) { return .reply(reply) }
        if let reply = try core.handle(request.envelope, from: request.peer, now: runtime.uptimeMs) { return .reply(reply) }
        return .none
    }

    /// The relay pings its players to measure their round trips (before a match starts).
    public var receivesPongs: Bool { true }

    public var status: String {
        guard let core else { return "starting" }
        return "\(core.sessionCount) sessions, \(core.peerCount) peers"
            + (tunnel.map { ", \($0.snapshot.sessions) RetroArch sessions" } ?? "")
            + (registered || coordinatorEndpoint == nil ? "" : ", not registered")
    }

    public var healthDetails: [(key: String, value: String)] {
        guard let core else { return [] }
        let coordinator = coordinatorEndpoint.map { "\($0) (\(registered ? "registered" : "not registered"))" }
            ?? lanAdmission.map { "none (LAN room '\($0.roomName)')" } ?? "none"
        var details = [("coordinator", coordinator), ("sessions", "\(core.sessionCount)"), ("peers", "\(core.peerCount)"),
                       ("inputs_per_second", "\(inputsPerSecond)"), ("cpu_percent", "\(Int(cpuPercent.rounded()))")]
        if let tunnel {
            let snapshot = tunnel.snapshot
            details.append(("retroarch", "port \(tunnel.boundPort), \(snapshot.sessions) sessions, \(snapshot.links) links"))
        }
        return details
    }

    public func introspect(section: String) -> JSONValue {
        guard let core else { return [:] }
        var document = core.introspect()
        if case .object(var fields) = document {
            fields["registered"] = .bool(registered)
            fields["cpu_percent"] = .double(cpuPercent)
            fields["inputs_per_second"] = .number(inputsPerSecond)
            fields["timer_slices"] = .number(tickSlices)
            fields["timer_interval_ms"] = .double(tickSeconds * 1000 / Double(tickSlices))
            fields["coordinator"] = coordinatorEndpoint.map(JSONValue.string) ?? .null
            if let tunnel { fields["retroarch"] = tunnelJSON(tunnel) }
            document = .object(fields)
        }
        return document
    }

    public func drain(runtime: ServiceRuntime) {
        draining = true
        if registered, let coordinator, let core {
            coordinator.request(.refreshRelayRequest(RefreshRelayRequest(relayId: configuration.relayId,
                                                                          load: load(core, now: runtime.uptimeMs), draining: true,
                                                                          presence: core.presenceReport())),
                                timeout: 0.5) { _ in }
        }
        core?.shutdown(now: runtime.uptimeMs)
    }

    public func stop(runtime: ServiceRuntime) {
        tunnel?.stop()
        core?.shutdown(now: runtime.uptimeMs)
        coordinator?.close()
    }

    // MARK: RelayTransport

    public func send(_ body: Envelope.Body, to peer: PeerAddress) {
        runtime?.send(Envelope(body: body), to: peer)
    }

    public func sendEncoded(_ envelope: UnsafeRawBufferPointer, to peer: PeerAddress) {
        runtime?.send(encoded: envelope, to: peer)
    }

    public func unacknowledgedBytes(to peer: PeerAddress) -> Int? {
        peerConnections[peer]?.unacknowledgedBytes()
    }

    /// Remembers the connection `peer`'s request came on; forgets those of peers the relay no
    /// longer knows once they outnumber the known ones.
    private func notePeerConnection(_ peer: PeerAddress, runtime: ServiceRuntime, core: RelayCore) {
        peerConnections[peer] = runtime.requestConnection
        if peerConnections.count > 2 * core.peerCount + 64 {
            peerConnections = peerConnections.filter { core.knows($0.key) || $0.key == peer }
        }
    }

    public func handleRawFrame(_ frame: UnsafeRawBufferPointer, from peer: PeerAddress, runtime: ServiceRuntime) -> Bool {
        guard let core else { return false }
        switch core.handleFast(frame, from: peer, now: runtime.uptimeMs) {
        case .handled:
            return true
        case .declined:
            return false
        case .failed(let error, let requestId):
            runtime.send(Envelope(requestId: requestId, body: .error(error.reply)), to: peer)
            return true
        }
    }

    public func readBatchWillBegin(runtime: ServiceRuntime) {
        core?.beginBatch()
    }

    public func readBatchDidEnd(runtime: ServiceRuntime) {
        core?.endBatch(now: runtime.uptimeMs)
    }

    public func publish(topic: String, _ body: Envelope.Body, severity: Severity, message: String, sessionId: String) {
        eventsTotal?.increment()
        guard let runtime else { return }
        if case .eventRecord = body {
            runtime.emit(topic: topic, nil, severity: severity, message: message, sessionId: sessionId)
        } else {
            runtime.emit(topic: topic, body, severity: severity, message: message, sessionId: sessionId)
        }
    }

    public func pushStats(_ stats: SessionStats) {
        runtime?.pushToTelemetry(.sessionStats(stats))
    }

    // MARK: Timers, registration

    private func tick(_ runtime: ServiceRuntime) {
        guard let core else { return }
        let now = runtime.uptimeMs
        if let lanAdmission { runHostCommands(lanAdmission.takeHostCommands(), core: core, now: now, runtime: runtime) }
        core.tick(now: now, slice: nextSlice, of: tickSlices)
        nextSlice = (nextSlice + 1) % tickSlices
        if nextSlice == 0, Self.tickSlices(forSessions: core.sessionCount) != tickSlices {
            // A round is over (every session ran once): the next ones fit the sessions served now.
            tickSlices = Self.tickSlices(forSessions: core.sessionCount)
            scheduleTick(runtime)
        }
        if now &- lastLoadMs >= 1000 {
            collectAcceptedInputs(core)
            inputsPerSecond = Int(Double(inputsThisSecond) * 1000 / Double(max(now &- lastLoadMs, 1)))
            inputsThisSecond = 0
            cpuPercent = cpuMeter.percent()
            if let lanAdmission {
                // The LAN room's beacon and join answers follow the match: started, places freed,
                // and over once the relay ended it.
                if let presence = core.presence(of: lanAdmission.sessionId) {
                    lanAdmission.sessionChanged(running: presence.running, present: presence.participants)
                } else {
                    lanAdmission.sessionGone()
                }
            }
            lastLoadMs = now
        }
    }

    /// Runs a LAN host's commands (kick, slots, end) as the coordinator's would run.
    private func runHostCommands(_ commands: [Envelope.Body], core: RelayCore, now: UInt64, runtime: ServiceRuntime) {
        for command in commands {
            do { _ = try core.control(command, now: now) } catch {
                // A kick of a participant not attached (yet) is a revocation all the same
                // (``RelayCore/control(_:now:)``); anything else refused is logged.
                runtime.logger.debug("LAN host command not applied", metadata: ["command": "\(command.name)", "error": "\(error)"])
            }
        }
    }

    /// Runs a timer slice every slice's share of the period.
    private func scheduleTick(_ runtime: ServiceRuntime) {
        if let tickTimer { runtime.cancel(tickTimer) }
        tickTimer = runtime.every(seconds: tickSeconds / Double(tickSlices)) { [unowned(unsafe) self] runtime in
            self.tick(runtime)
        }
    }

    /// Moves the inputs the core accepted since the last call into the counters that need them.
    private func collectAcceptedInputs(_ core: RelayCore) {
        let accepted = core.takeInputCount()
        inputsTotal?.increment(by: Double(accepted))
        inputsThisSecond += accepted
        inputsSinceReport += accepted
    }

    /// The load reported to the coordinator; its input rate is averaged since the previous
    /// report, so every refresh covers its whole interval.
    private func load(_ core: RelayCore, now: UInt64) -> RelayLoad {
        collectAcceptedInputs(core)
        let rate = lastReportMs == 0 || now <= lastReportMs
            ? inputsPerSecond : Int(Double(inputsSinceReport) * 1000 / Double(now &- lastReportMs))
        inputsSinceReport = 0
        lastReportMs = now
        let retroArch = tunnel?.snapshot.sessions ?? 0
        return RelayLoad(sessions: UInt32(core.sessionCount + retroArch), peers: UInt32(core.peerCount),
                         capacitySessions: UInt32(max(configuration.maxSessions, 0)),
                         inputsPerSecond: UInt32(clamping: rate), cpuPercent: UInt32(cpuPercent.rounded()),
                         retroarchSessions: UInt32(retroArch))
    }

    private func relayInfo(_ core: RelayCore, now: UInt64) -> RelayInfo {
        RelayInfo(relayId: configuration.relayId, endpoint: configuration.advertisedEndpoint,
                  eventsEndpoint: configuration.eventsEndpoint, region: configuration.region, load: load(core, now: now),
                  version: NetplayVersion.current)
    }

    /// The client to the coordinator: its control endpoint with this relay's identity (once the
    /// coordinator's key is in the trust store), or its public endpoint when the relay runs
    /// without a trust store.
    private func connectCoordinator(_ runtime: ServiceRuntime) -> ServiceClient? {
        if let coordinator { return coordinator }
        guard let coordinatorEndpoint else { return nil }
        coordinator = runtime.trust == nil ? try? runtime.client(to: coordinatorEndpoint)
            : try? runtime.controlClient(kind: "coordinator", endpoint: coordinatorEndpoint)
        return coordinator
    }

    private func register(_ runtime: ServiceRuntime) {
        guard !draining, let core else { return }
        guard let coordinator = connectCoordinator(runtime) else {
            if !coordinatorWarned {
                coordinatorWarned = true
                runtime.logger.notice("the coordinator's key is not in the trust store yet; serving without registration and retrying",
                                      metadata: ["coordinator": "\(coordinatorEndpoint ?? "")"])
            }
            runtime.after(seconds: 1) { [unowned(unsafe) self] runtime in self.register(runtime) }
            return
        }
        let request = RegisterRelayRequest(relay: relayInfo(core, now: runtime.uptimeMs), sessionIds: Array(core.sessionIds.prefix(10_000)))
        coordinator.request(.registerRelayRequest(request), timeout: 2) { [unowned(unsafe) self] result in
            switch result {
            case .success(.registerRelayResponse(let response)):
                self.registered = true
                self.coordinatorWarned = false
                runtime.logger.info("registered with the coordinator", metadata: [
                    "coordinator": "\(self.coordinatorEndpoint ?? "")", "refresh_ms": "\(response.refreshIntervalMs)"])
                let interval = Double(max(response.refreshIntervalMs, 100)) / 1000
                if let timer = self.refreshTimer { runtime.cancel(timer) }
                self.refreshTimer = runtime.every(seconds: interval) { [unowned(unsafe) self] runtime in self.refresh(runtime) }
            case .success(let other):
                runtime.logger.warning("unexpected registration reply", metadata: ["body": "\(other.name)"])
                runtime.after(seconds: 2) { [unowned(unsafe) self] runtime in self.register(runtime) }
            case .failure(let error):
                if !self.coordinatorWarned {
                    self.coordinatorWarned = true
                    runtime.logger.notice("coordinator unreachable; serving without registration and retrying",
                                          metadata: ["coordinator": "\(self.coordinatorEndpoint ?? "")", "error": "\(error)"])
                }
                runtime.after(seconds: 1) { [unowned(unsafe) self] runtime in self.register(runtime) }
            }
        }
    }

    /// Tells the coordinator about a change (a lifecycle fact, a RetroArch session) within
    /// 200 ms instead of at the next periodic refresh; changes meanwhile share that refresh.
    func refreshSoon(_ runtime: ServiceRuntime) {
        guard registered, !refreshPending else { return }
        refreshPending = true
        runtime.after(seconds: 0.2) { [unowned(unsafe) self] runtime in
            self.refreshPending = false
            self.refresh(runtime)
        }
    }

    func refresh(_ runtime: ServiceRuntime) {
        guard let coordinator, let core, registered else { return }
        // Lifecycle facts ride along until a refresh carrying them succeeds.
        let facts = core.lifecycle.take()
        let request = RefreshRelayRequest(relayId: configuration.relayId, load: load(core, now: runtime.uptimeMs), draining: draining,
                                          presence: core.presenceReport(), retroarchSessions: retroArchReports(),
                                          startedSessionIds: facts.started, participantsGone: facts.gone, sessionsEnded: facts.ended)
        coordinator.request(.refreshRelayRequest(request), timeout: 2) { [unowned(unsafe) self] result in
            switch result {
            case .success(.refreshRelayResponse(let response)):
                core.lifecycle.acknowledge(through: facts.through)
                // More than one refresh holds: the rest go soon, not at the next interval.
                if core.lifecycle.count > 0 && facts.through > 0 { self.refreshSoon(runtime) }
                if !response.closeSessionIds.isEmpty {
                    core.close(sessionIds: response.closeSessionIds, moved: Set(response.movedSessionIds), now: runtime.uptimeMs)
                }
            case .failure(.remote(let error)) where error.code == .notFound:
                self.registered = false
                if let timer = self.refreshTimer { runtime.cancel(timer) }
                self.refreshTimer = nil
                self.register(runtime)
            case .failure(let error):
                runtime.logger.debug("refresh failed", metadata: ["error": "\(error)"])
            case .success:
                break
            }
        }
    }
}
