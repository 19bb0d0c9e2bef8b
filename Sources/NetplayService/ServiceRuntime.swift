import Foundation
import Logging
import NetplayWire
import ZeroMQ

/// A service's reactor: one thread that owns every socket of the service and runs a `zmq_poll`
/// loop over them, the wake-up pipe, timers and any extra sockets or descriptors the service
/// watches. The ``Service`` sees it as its toolbox: reply, send, publish events, set timers,
/// watch sockets, call other services.
///
/// Everything here runs on the reactor thread; use ``handle`` from elsewhere.
public final class ServiceRuntime {
    /// The resolved configuration.
    public let configuration: ServiceConfiguration
    /// The service's logger (service and instance on every line).
    public var logger: Logger
    /// The instance's metrics, pushed to telemetry periodically.
    public let metrics = MetricsRegistry()
    /// The ZeroMQ context all sockets are made in.
    public let context: Context
    /// The thread-safe entry point for other threads.
    public let handle: ReactorHandle
    /// The version reported in Health and heartbeats.
    public let version: String

    /// The endpoint actually bound for requests (wildcard ports resolved).
    public private(set) var boundEndpoint = ""
    /// The endpoint actually bound for events, if any.
    public private(set) var boundEventsEndpoint: String?
    /// The endpoint actually bound for the cluster and operator planes, if any.
    public private(set) var boundControlEndpoint: String?
    /// The trust store (cluster members' and operators' keys), when the control plane is on.
    public let trust: TrustStore?
    /// This instance's CurveZMQ identity: its key as a control server and as a cluster client.
    public let identity: CurveKeyPair?

    let router: Socket
    let control: Socket?
    let publisher: Socket?
    var telemetryPush: Socket?
    let supervisorLink: Socket?
    /// The ZAP domain of this service's control sockets.
    let controlDomain: String?

    let startedAt = ContinuousClock.now
    let startedAtUnixMs = UnixTime.nowMs()
    var timers = TimerQueue()
    var watchers: [Watcher] = []
    var pollerDirty = true
    var poller = Poller()
    var heartbeatSequence: UInt64 = 0
    var metricsSequence: UInt64 = 0
    var eventSequence: UInt64 = 0
    var telemetryReachable: Bool?
    private(set) var draining = false
    var service: (any Service)?
    /// The same object as `service` (held there), when it takes raw frames; unowned so reading it
    /// on every frame costs no retain.
    unowned(unsafe) var rawService: (any RawFrameService)?

    let requestsTotal: Counter
    let refusedTotal: Counter
    /// At most one refusal warning a second (the counter counts them all).
    let refusalWarnings = WarningBudget(perSeconds: 1)
    let malformedTotal: Counter
    let repliesDropped: Counter
    let requestSeconds: Histogram
    /// Bound what peers can make the public ROUTER and a public PUB hold (TCP endpoints only).
    let inboundGuards: [InboundGuard]
    let inboundCuts: Counter
    let inboundWarnings = WarningBudget(perSeconds: 1)
    /// Bounds the replies the public ROUTER holds for peers that do not read (TCP endpoints of
    /// services that answer strangers with large replies; nil otherwise).
    let outboundGuard: OutboundGuard?
    let outboundCuts: Counter

    /// Binds the service's sockets. Throws with a one-line reason (e.g. address in use).
    public init(configuration: ServiceConfiguration, logger: Logger, version: String = NetplayVersion.current,
                context: Context = .shared) throws {
        self.configuration = configuration
        self.logger = logger
        self.logger[metadataKey: "service"] = nil
        self.context = context
        self.version = version
        handle = try ReactorHandle()

        func bound(_ socket: Socket, _ endpoint: String, _ what: String) throws -> String {
            do {
                try socket.bind(endpoint)
                return try socket.lastEndpoint
            } catch {
                throw RuntimeStartError("cannot bind \(what) \(endpoint): \(error)")
            }
        }

        if let directory = configuration.trustStore {
            let store = TrustStore(directory: directory)
            trust = store
            let keyFile = configuration.identityKeyFile ?? configuration.dataDirectory.appendingPathComponent("identity.secret")
            do {
                identity = try KeyFile.loadOrCreate(keyFile)
                controlDomain = try ZAPAuthenticator.controlDomain(for: store, in: context)
            } catch {
                throw RuntimeStartError("cannot set up the identity key \(keyFile.path): \(error)")
            }
        } else {
            trust = nil
            identity = nil
            controlDomain = nil
        }

        router = try Self.publicServer(.router, context: context, curve: configuration.curve)
        try router.set(.routerHandover(true))
        boundEndpoint = try bound(router, configuration.endpoint, "requests endpoint")
        var guards = try Self.inboundGuard(router, boundEndpoint, "requests endpoint").map { [$0] } ?? []
        outboundGuard = !guards.isEmpty && configuration.guardsUnreadReplies ? OutboundGuard(curve: configuration.curve != nil) : nil
        if let endpoint = configuration.control, let identity, let controlDomain {
            let socket = try Self.controlServer(.router, context: context, identity: identity, domain: controlDomain)
            try socket.set(.routerHandover(true))
            boundControlEndpoint = try bound(socket, endpoint, "control endpoint")
            control = socket
        } else {
            control = nil
        }
        if let events = configuration.events {
            let socket: Socket
            if !configuration.publicEvents, let identity, let controlDomain {
                socket = try Self.controlServer(.pub, context: context, identity: identity, domain: controlDomain)
            } else {
                socket = try Self.publicServer(.pub, context: context, curve: configuration.curve)
            }
            boundEventsEndpoint = try bound(socket, events, "events endpoint")
            if configuration.publicEvents || controlDomain == nil,
               let inbound = try Self.inboundGuard(socket, boundEventsEndpoint ?? "", "events endpoint") {
                guards.append(inbound)
            }
            publisher = socket
        } else {
            publisher = nil
        }
        inboundGuards = guards
        // Our key must be in the trust store before any cluster peer sees our first handshake.
        if let trust, let identity {
            Self.publishMembership(TrustStore.Member(
                kind: configuration.kind, instance: configuration.instance, publicKey: identity.publicKey,
                endpoint: Self.reachable(boundEndpoint), control: boundControlEndpoint.map(Self.reachable),
                events: boundEventsEndpoint.map(Self.reachable)), in: trust, logger: logger)
        }
        if let supervisor = configuration.supervisor {
            let socket = try Self.clusterSocket(.dealer, to: supervisor, kind: "supervisor", trust: trust, identity: identity,
                                                curve: configuration.curve, context: context)
            try socket.set(.immediate(true))
            try socket.set(.linger(milliseconds: 200))
            try socket.connect(supervisor)
            supervisorLink = socket
        } else {
            supervisorLink = nil
        }

        requestsTotal = metrics.counter("netplay_requests_total", help: "Requests received on the service's ROUTER.")
        refusedTotal = metrics.counter("netplay_refused_requests_total",
                                       help: "Requests refused because the sender's credential does not admit their plane.")
        malformedTotal = metrics.counter("netplay_malformed_frames_total", help: "Frames that failed to decode or validate.")
        repliesDropped = metrics.counter("netplay_replies_dropped_total", help: "Replies or pushes dropped: peer gone or queue full.")
        requestSeconds = metrics.histogram("netplay_request_duration_seconds", help: "Time to handle one request.",
                                           buckets: Histogram.latencySeconds)
        inboundCuts = metrics.counter("netplay_inbound_connections_cut_total",
                                      help: "Connections shut down for holding too much input that never became a message.")
        outboundCuts = metrics.counter("netplay_outbound_connections_cut_total",
                                       help: "Connections shut down while they held the most replies they had not read, over the total.")
        let start = startedAt
        metrics.gauge("netplay_uptime_seconds", help: "Seconds since the service started.") {
            let elapsed = ContinuousClock.now - start
            return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        }
        connectTelemetry()
    }

    /// A socket that connects to a cluster member's control-plane endpoint `endpoint`: a CurveZMQ
    /// client with this instance's identity when the trust store knows the server's key (by
    /// endpoint, else the only member of `kind`); otherwise as the public endpoints are.
    static func clusterSocket(_ type: SocketType, to endpoint: String, kind: String?, trust: TrustStore?,
                              identity: CurveKeyPair?, curve: CurveKeyPair?, context: Context) throws -> Socket {
        if let trust, let identity, let server = trust.serverKey(for: endpoint, kind: kind) {
            return try SocketDefaults.client(type, context: context, curve: identity, serverKey: server)
        }
        return try SocketDefaults.client(type, context: context, curve: curve)
    }

    /// Opens the telemetry push once telemetry's key is known (it may start after us).
    func connectTelemetry() {
        guard telemetryPush == nil, let telemetry = configuration.telemetry else { return }
        if trust != nil, trust?.serverKey(for: telemetry, kind: "telemetry") == nil {
            return  // telemetry admits trust-store keys only: wait until its key is published
        }
        do {
            let socket = try Self.clusterSocket(.push, to: telemetry, kind: "telemetry", trust: trust, identity: identity,
                                                curve: configuration.curve, context: context)
            try socket.set(.immediate(true))  // never queue for a telemetry that is not there
            try socket.set(.sendHighWaterMark(1_000))
            try socket.connect(telemetry)
            telemetryPush = socket
        } catch {
            logger.warning("telemetry push not opened", metadata: ["telemetry": "\(telemetry)", "error": "\(error)"])
        }
    }

    /// Writes this instance's member file (kind, key, endpoints) into the trust store, and makes
    /// sure the local operator has a key, so `netplayctl` on this machine works with no flags.
    static func publishMembership(_ member: TrustStore.Member, in trust: TrustStore, logger: Logger) {
        if trust.member(instance: member.instance) != member {
            do { try trust.publish(member) } catch {
                logger.warning("could not publish this instance's key to the trust store; cluster peers will refuse it",
                               metadata: ["keys": "\(trust.directory.path)", "error": "\(error)"])
            }
        }
        do { _ = try trust.localOperator(create: true) } catch {
            logger.notice("no local operator key", metadata: ["keys": "\(trust.directory.path)", "error": "\(error)"])
        }
    }

    /// A bound endpoint as peers can dial it (a wildcard address becomes loopback).
    static func reachable(_ endpoint: String) -> String {
        endpoint.replacingOccurrences(of: "tcp://0.0.0.0:", with: "tcp://127.0.0.1:")
            .replacingOccurrences(of: "tcp://*:", with: "tcp://127.0.0.1:")
    }

    /// The TCP connection of the public endpoint that the request being handled came on (the
    /// descriptor libzmq read its last frame from); nil when unknown (not TCP). Meaningful only
    /// while a handler runs for a request of the public endpoint (``PeerAddress/viaControl`` false).
    public var requestConnection: TCPConnectionProbe? {
        router.inboundLedger.flatMap { TCPConnectionProbe(fd: $0.lastFd) }
    }

    /// Milliseconds since the service started (monotonic).
    public var uptimeMs: UInt64 {
        let elapsed = ContinuousClock.now - startedAt
        return UInt64(elapsed.components.seconds) * 1000 + UInt64(elapsed.components.attoseconds / 1_000_000_000_000_000)
    }

    // MARK: Running

    /// Runs `service` until a stop is requested, then drains and closes. Call on the thread
    /// that will own the sockets (the one that created this runtime). `onStarted` runs once the
    /// service's own start succeeded; a start that fails closes every socket and throws.
    public func run(_ service: any Service, onStarted: () -> Void = {}) throws {
        self.service = service
        rawService = service as? any RawFrameService
        do {
            try service.start(runtime: self)
        } catch {
            closeAll()
            throw RuntimeStartError("start failed: \(error)")
        }
        onStarted()
        if let control { watch(control) { runtime in runtime.drainControl() } }
        for inbound in inboundGuards {
            watch(inbound.events) { _ in inbound.drainEvents() }
        }
        if !inboundGuards.isEmpty { every(seconds: 0.1) { runtime in runtime.checkInbound() } }
        logger.info("listening", metadata: ["endpoint": "\(boundEndpoint)", "events": "\(boundEventsEndpoint ?? "none")",
                                            "control": "\(boundControlEndpoint ?? "none")",
                                            "telemetry": "\(configuration.telemetry ?? "none")",
                                            "supervisor": "\(configuration.supervisor ?? "none")"])
        if service.isReady { logger.info("ready") }
        var wasReady = service.isReady
        every(seconds: configuration.metricsInterval) { runtime in runtime.pushMetrics() }
        if supervisorLink != nil {
            sendHeartbeat()
            every(seconds: configuration.heartbeatInterval) { runtime in runtime.sendHeartbeat() }
        }

        var drainDeadline: ContinuousClock.Instant?
        while true {
            if let reason = handle.stopRequested, !draining {
                draining = true
                logger.info("stopping", metadata: ["reason": "\(reason)"])
                try? router.unbind(boundEndpoint)  // no new connections; in-flight requests still answered
                if let control, let boundControlEndpoint { try? control.unbind(boundControlEndpoint) }
                service.drain(runtime: self)
                sendHeartbeat()
                drainDeadline = .now + .milliseconds(Int(configuration.drainTimeout * 1000))
            }
            if draining, let deadline = drainDeadline, !service.isDraining || ContinuousClock.now >= deadline {
                break
            }
            do { try pollOnce(maxWaitMs: draining ? 20 : 1000) } catch {
                // Not a peer's doing (libzmq failing to poll): the service still stops and closes.
                logger.error("the reactor cannot poll: \(error)")
                service.stop(runtime: self)
                closeAll()
                throw error
            }
            if service.isReady != wasReady {
                wasReady = service.isReady
                logger.info(wasReady ? "ready" : "not ready", metadata: ["status": "\(service.status)"])
                if supervisorLink != nil { sendHeartbeat() }
            }
        }
        service.stop(runtime: self)
        pushMetrics()
        closeAll()
        logger.info("stopped")
    }

    func pollOnce(maxWaitMs: Int) throws {
        if pollerDirty { rebuildPoller() }
        let timeout = timers.millisecondsUntilNext(cap: maxWaitMs)
        do {
            try poller.poll(timeout: timeout)
        } catch .terminated {
            handle.requestStop(reason: "context terminated")
            return
        }
        if poller.isReadable(0) {
            handle.wake.drain()
            for work in handle.takeQueued() { work(self) }
        }
        if poller.isReadable(1) { drainRouter() }
        if supervisorLink != nil, poller.isReadable(2) { drainSupervisorReplies() }
        let firstWatcher = supervisorLink == nil ? 2 : 3
        let snapshot = watchers
        for (offset, watcher) in snapshot.enumerated() where poller.count > firstWatcher + offset {
            if poller.isReadable(firstWatcher + offset), !watcher.cancelled { watcher.onReadable(self) }
        }
        for action in timers.takeDue() { action(self) }
    }

    func rebuildPoller() {
        watchers.removeAll { $0.cancelled }
        poller = Poller()
        poller.add(fileDescriptor: handle.wake.readDescriptor)
        poller.add(router)
        if let supervisorLink { poller.add(supervisorLink) }
        for watcher in watchers {
            switch watcher.source {
            case .socket(let socket): poller.add(socket)
            case .descriptor(let fd): poller.add(fileDescriptor: fd)
            }
        }
        pollerDirty = false
    }

    func closeAll() {
        for watcher in watchers { watcher.cancelled = true }
        watchers.removeAll()
        poller = Poller()
        for inbound in inboundGuards { inbound.close() }
        router.close()
        control?.close()
        if let controlDomain { ZAPAuthenticator.release(domain: controlDomain, in: context) }
        publisher?.close()
        telemetryPush?.close()
        supervisorLink?.close()
    }
}

extension ServiceRuntime {
    /// Shuts down the public connections over the inbound guard's limits, counted and logged.
    func checkInbound() {
        for cut in inboundGuards.flatMap({ $0.check() }) {
            inboundCuts.increment()
            warnCut("connection cut: input that never became a message",
                    ["peer": "\(cut.peer)", "held_bytes": "\(cut.held)", "reason": "\(cut.reason)"])
        }
        for cut in outboundGuard?.check() ?? [] {
            outboundCuts.increment()
            warnCut("connection cut: replies it does not read", ["peer": "\(cut.peer)", "held_bytes": "\(cut.held)"])
        }
    }

    private func warnCut(_ message: Logger.Message, _ metadata: Logger.Metadata) {
        let budget = inboundWarnings.take()
        guard budget.allowed else { return }
        var metadata = metadata
        if budget.suppressed > 0 { metadata["suppressed"] = "\(budget.suppressed)" }
        logger.warning(message, metadata: metadata)
    }

    /// A guard of `socket`'s TCP connections (``InboundGuard``); nil for another transport.
    fileprivate static func inboundGuard(_ socket: Socket, _ endpoint: String, _ what: String) throws -> InboundGuard? {
        guard endpoint.hasPrefix("tcp://") else { return nil }
        do { return try InboundGuard(socket) } catch {
            throw RuntimeStartError("cannot watch the \(what)'s connections: \(error)")
        }
    }
}
