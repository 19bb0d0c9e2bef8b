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
    private var telemetryPush: Socket?
    let supervisorLink: Socket?
    /// The ZAP domain of this service's control sockets.
    private let controlDomain: String?

    private let startedAt = ContinuousClock.now
    private let startedAtUnixMs = UInt64(Date().timeIntervalSince1970 * 1000)
    private var timers = TimerQueue()
    private var watchers: [Watcher] = []
    private var pollerDirty = true
    private var poller = Poller()
    private var heartbeatSequence: UInt64 = 0
    private var metricsSequence: UInt64 = 0
    private var eventSequence: UInt64 = 0
    private var telemetryReachable: Bool?
    private(set) var draining = false
    private var service: (any Service)?
    /// The same object as `service` (held there), when it takes raw frames; unowned so reading it
    /// on every frame costs no retain.
    private unowned(unsafe) var rawService: (any RawFrameService)?

    private let requestsTotal: Counter
    private let refusedTotal: Counter
    /// At most one refusal warning a second (the counter counts them all).
    private let refusalWarnings = WarningBudget(perSeconds: 1)
    private let malformedTotal: Counter
    private let repliesDropped: Counter
    private let requestSeconds: Histogram

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

        router = try SocketDefaults.server(.router, context: context, curve: configuration.curve)
        if configuration.curve != nil { try router.set(.zapDomain(ZAPAuthenticator.publicDomain)) }
        try router.set(.routerHandover(true))
        boundEndpoint = try bound(router, configuration.endpoint, "requests endpoint")
        if let endpoint = configuration.control, let identity, let controlDomain {
            let socket = try SocketDefaults.server(.router, context: context, curve: identity)
            try socket.set(.zapDomain(controlDomain))
            try socket.set(.routerHandover(true))
            boundControlEndpoint = try bound(socket, endpoint, "control endpoint")
            control = socket
        } else {
            control = nil
        }
        if let events = configuration.events {
            let socket: Socket
            if !configuration.publicEvents, let identity, let controlDomain {
                socket = try SocketDefaults.server(.pub, context: context, curve: identity)
                try socket.set(.zapDomain(controlDomain))
            } else {
                socket = try SocketDefaults.server(.pub, context: context, curve: configuration.curve)
                if configuration.curve != nil { try socket.set(.zapDomain(ZAPAuthenticator.publicDomain)) }
            }
            boundEventsEndpoint = try bound(socket, events, "events endpoint")
            publisher = socket
        } else {
            publisher = nil
        }
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
    private func connectTelemetry() {
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
    private static func publishMembership(_ member: TrustStore.Member, in trust: TrustStore, logger: Logger) {
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

    /// Milliseconds since the service started (monotonic).
    public var uptimeMs: UInt64 {
        let elapsed = ContinuousClock.now - startedAt
        return UInt64(elapsed.components.seconds) * 1000 + UInt64(elapsed.components.attoseconds / 1_000_000_000_000_000)
    }

    // MARK: Running

    /// Runs `service` until a stop is requested, then drains and closes. Call on the thread
    /// that will own the sockets (the one that created this runtime).
    public func run(_ service: any Service) throws {
        self.service = service
        rawService = service as? any RawFrameService
        do {
            try service.start(runtime: self)
        } catch {
            throw RuntimeStartError("start failed: \(error)")
        }
        if let control { watch(control) { runtime in runtime.drainControl() } }
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
            try pollOnce(maxWaitMs: draining ? 20 : 1000)
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

    private func pollOnce(maxWaitMs: Int) throws {
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

    private func rebuildPoller() {
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

    private func closeAll() {
        for watcher in watchers { watcher.cancelled = true }
        watchers.removeAll()
        poller = Poller()
        router.close()
        control?.close()
        if let controlDomain { ZAPAuthenticator.release(domain: controlDomain, in: context) }
        publisher?.close()
        telemetryPush?.close()
        supervisorLink?.close()
    }

    // MARK: Requests

    /// Reads every request waiting on the ROUTER (bounded per wake-up so timers still run).
    private func drainRouter() {
        let batchService = rawService
        batchService?.readBatchWillBegin(runtime: self)
        defer { batchService?.readBatchDidEnd(runtime: self) }
        for _ in 0..<4096 {
            // Frames are read into the socket's reusable message, without a closure per frame;
            // "more" comes with each frame (no ZMQ_RCVMORE option call).
            let identity: PeerAddress
            do {
                let frame = try router.receiveBorrowed(flags: .dontWait)
                identity = PeerAddress(routingId: frame.bytes)
                guard frame.more else {
                    finishRequest(from: identity, first: nil)
                    continue
                }
            } catch {
                return  // wouldBlock: drained
            }
            // The rest of this message is already queued: read it without blocking.
            let first: (bytes: UnsafeRawBufferPointer, more: Bool)
            do {
                first = try router.receiveBorrowed(flags: .dontWait)
            } catch {
                finishRequest(from: identity, first: nil)
                continue
            }
            // The hot path: [id, payload] from a DEALER, taken by the service before decoding.
            if !first.more, let rawService, !draining, rawService.handleRawFrame(first.bytes, from: identity, runtime: self) {
                requestsTotal.increment()
                continue
            }
            finishRequest(from: identity, first: first)
        }
    }

    /// Reads and dispatches the rest of a request whose routing id was read, and whose first frame
    /// after it (if any was read: nil when there was none or it could not be read) is `first`,
    /// already offered to the raw-frame service when it was the last one. Accepted shapes:
    /// [id, payload] from a DEALER, [id, "", payload] from a REQ.
    @inline(never)
    private func finishRequest(from identity: PeerAddress, first: (bytes: UnsafeRawBufferPointer, more: Bool)?) {
        var more = first != nil
        var framesAfterIdentity = 0
        var delimited = false
        var envelope: Result<Envelope, WireError>?
        var undecodable: [UInt8] = []
        var handledRaw = false
        var pending = first
        while more {
            let frame: (bytes: UnsafeRawBufferPointer, more: Bool)
            if let read = pending {
                frame = read
                pending = nil
            } else {
                do {
                    frame = try router.receiveBorrowed(flags: .dontWait)
                } catch {
                    break
                }
            }
            let bytes = frame.bytes
            let hasMore = frame.more
            more = hasMore
            framesAfterIdentity += 1
            if framesAfterIdentity == 1 && hasMore && bytes.isEmpty {
                delimited = true
            } else if !hasMore && (framesAfterIdentity == 1 || (framesAfterIdentity == 2 && delimited)) {
                // A single frame was offered to the raw-frame service already (and declined).
                if framesAfterIdentity == 2, let rawService, !draining,
                   rawService.handleRawFrame(bytes, from: identity.delimitedCopy, runtime: self) {
                    handledRaw = true
                    continue  // the last frame: the loop ends
                }
                envelope = Result { () throws(WireError) -> Envelope in try Envelope(decoding: bytes) }
                if case .failure = envelope { undecodable = Array(bytes.prefix(16)) }
            } else {
                envelope = nil
            }
        }
        if framesAfterIdentity > (delimited ? 2 : 1) { envelope = nil }
        let source = framesAfterIdentity > 0 ? (router.propertyOfLastFrame("Peer-Address") ?? "") : ""
        requestsTotal.increment()
        if handledRaw && framesAfterIdentity == (delimited ? 2 : 1) { return }
        let peer = delimited ? identity.delimitedCopy : identity
        switch envelope {
        case .success(let envelope):
            dispatch(Request(envelope: envelope, peer: peer, source: source))
        case .failure(let error):
            malformedTotal.increment()
            logger.debug("malformed request", metadata: ["peer": "\(peer)", "error": "\(error)"])
            let requestId = Self.salvageRequestId(undecodable)
            send(Envelope(requestId: requestId, body: .error(ErrorReply(error))), to: peer)
        case nil:
            malformedTotal.increment()
            logger.debug("malformed multipart request", metadata: ["peer": "\(peer)", "frames": "\(framesAfterIdentity)"])
            let reply = ErrorReply(code: .malformed,
                                   message: "A request is one frame holding a netplay.v1.Envelope (after an optional empty delimiter); got \(framesAfterIdentity) frames.")
            send(Envelope(body: .error(reply)), to: peer)
        }
    }

    /// Reads the requests waiting on the control endpoint: each carries the ``Caller`` its
    /// CurveZMQ key proved (the ZAP handler's `User-Id`).
    private func drainControl() {
        guard let control else { return }
        for _ in 0..<1024 {
            guard let frames = try? control.receiveMultipart(flags: .dontWait) else { return }
            let caller = ZAPAuthenticator.caller(fromUserId: control.propertyOfLastFrame("User-Id"))
            let source = control.propertyOfLastFrame("Peer-Address") ?? ""
            requestsTotal.increment()
            guard frames.count == 2 || (frames.count == 3 && frames[1].isEmpty) else {
                malformedTotal.increment()
                continue
            }
            let peer = PeerAddress(routingId: frames[0], delimited: frames.count == 3, viaControl: true)
            do {
                let envelope = try Envelope(decoding: frames[frames.count - 1])
                dispatch(Request(envelope: envelope, peer: peer, source: source, caller: caller))
            } catch {
                malformedTotal.increment()
                send(Envelope(requestId: Self.salvageRequestId(Array(frames[frames.count - 1].prefix(16))),
                              body: .error(ErrorReply(error))), to: peer)
            }
        }
    }

    /// Reads field 1 (request_id, a varint) from the start of an undecodable frame, so even an
    /// Error reply to a malformed request carries the request's id when it can be recovered.
    static func salvageRequestId(_ bytes: [UInt8]) -> UInt64 {
        guard bytes.first == 0x08 else { return 0 }
        var value: UInt64 = 0
        var shift: UInt64 = 0
        for byte in bytes.dropFirst().prefix(10) {
            value |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return value }
            shift += 7
        }
        return 0
    }

    private func dispatch(_ request: Request) {
        guard let service else { return }
        let started = ContinuousClock.now
        defer {
            let elapsed = ContinuousClock.now - started
            requestSeconds.observe(Double(elapsed.components.attoseconds) / 1e18 + Double(elapsed.components.seconds))
        }
        let plane = RequestPlane.of(request.body)
        guard plane.admits(request.caller) else {
            refusedTotal.increment()
            let budget = refusalWarnings.take()
            if budget.allowed {
                var metadata: Logger.Metadata = [
                    "body": "\(request.body.name)", "plane": "\(plane.rawValue)", "caller": "\(request.caller)",
                    "peer": "\(request.source.isEmpty ? request.peer.description : request.source)",
                    "endpoint": "\(request.peer.viaControl ? boundControlEndpoint ?? "" : boundEndpoint)"]
                if budget.suppressed > 0 { metadata["suppressed"] = "\(budget.suppressed)" }
                logger.warning("refused request: its plane needs another credential", metadata: metadata)
            }
            let message = request.peer.viaControl
                ? "\(request.body.name) belongs to the \(plane.rawValue) plane, which \(request.caller) may not use."
                : "\(request.body.name) belongs to the \(plane.rawValue) plane: send it to the control endpoint with a cluster or operator key (docs/security.md)."
            reply(to: request, with: .error(ServiceError(.permissionDenied, message).reply))
            return
        }
        switch request.body {
        case .healthRequest:
            reply(to: request, with: .healthResponse(request.caller == .anonymous ? publicHealth() : health()))
        case .introspectRequest(let query):
            let document: JSONValue = [
                "service": .string(configuration.kind),
                "instance": .string(configuration.instance),
                "version": .string(version),
                "ready": .bool(service.isReady && !draining),
                "status": .string(status),
                "uptime_ms": .number(uptimeMs),
                "endpoint": .string(boundEndpoint),
                "events": boundEventsEndpoint.map(JSONValue.string) ?? .null,
                "runtime": [
                    "requests_total": .number(UInt64(requestsTotal.value)),
                    "malformed_frames_total": .number(UInt64(malformedTotal.value)),
                    "replies_dropped_total": .number(UInt64(repliesDropped.value)),
                ],
                "state": service.introspect(section: query.section),
            ]
            reply(to: request, with: .introspectResponse(IntrospectResponse(
                json: document.rendered(), service: configuration.kind, instance: configuration.instance)))
        case .ping(let ping):
            reply(to: request, with: .pong(Pong(nonce: ping.nonce, echoSentAtUs: ping.sentAtUs,
                                                responderUnixMs: UInt64(Date().timeIntervalSince1970 * 1000))))
        case .pong where service.receivesPongs:
            // The service's own pings answered: never replied to, whatever the service says.
            _ = try? service.handle(request, runtime: self)
        case .error, .pong, .ack:
            // Replies sent to us unasked: never answer them (that could loop between services).
            logger.debug("ignored unsolicited reply", metadata: ["body": "\(request.body.name)", "peer": "\(request.peer)"])
        default:
            if draining {
                reply(to: request, with: .error(ServiceError(.shuttingDown, "\(configuration.instance) is shutting down; retry elsewhere.").reply))
                return
            }
            do {
                switch try service.handle(request, runtime: self) {
                case .reply(let body): reply(to: request, with: body)
                case .deferred, .none: break
                }
            } catch {
                logger.debug("request failed", metadata: ["body": "\(request.body.name)", "code": "\(error.code)", "error": "\(error.message)"])
                reply(to: request, with: .error(error.reply))
            }
        }
    }

    private var status: String { draining ? "draining" : (service?.status ?? "starting") }

    private func health() -> HealthResponse {
        HealthResponse(service: configuration.kind, instance: configuration.instance, version: version,
                       ready: (service?.isReady ?? false) && !draining, uptimeMs: uptimeMs, pid: UInt32(getpid()),
                       startedAtUnixMs: startedAtUnixMs, status: String(status.prefix(256)), details: healthDetails())
    }

    /// What anyone may learn: who and whether ready, nothing about the host or the cluster.
    private func publicHealth() -> HealthResponse {
        HealthResponse(service: configuration.kind, instance: configuration.instance, version: version,
                       ready: (service?.isReady ?? false) && !draining, uptimeMs: uptimeMs, pid: 0,
                       startedAtUnixMs: startedAtUnixMs, status: draining ? "draining" : ((service?.isReady ?? false) ? "ok" : "starting"),
                       details: [])
    }

    /// The runtime's facts (storage, telemetry, events, supervisor), then the service's.
    private func healthDetails() -> [KeyValue] {
        let telemetry: String
        switch (configuration.telemetry, telemetryReachable) {
        case (nil, _): telemetry = "off"
        case (let endpoint?, true?): telemetry = "\(endpoint) (reachable)"
        case (let endpoint?, false?): telemetry = "\(endpoint) (unreachable: pushes dropped)"
        case (let endpoint?, nil): telemetry = "\(endpoint) (nothing pushed yet)"
        }
        var details: [(key: String, value: String)] = [
            ("data_dir", configuration.dataDirectory.path),
            ("endpoint", boundEndpoint),
            ("events", boundEventsEndpoint ?? "off"),
            ("telemetry", telemetry),
            ("supervisor", configuration.supervisor ?? "none"),
        ]
        details += service?.healthDetails ?? []
        return details.prefix(32).map { KeyValue(key: String($0.key.prefix(64)), value: String($0.value.prefix(256))) }
    }

    /// Answers `request` (now, or later for a ``HandlerOutcome/deferred`` request).
    @discardableResult
    public func reply(to request: Request, with body: Envelope.Body) -> Bool {
        send(request.envelope.reply(body), to: request.peer)
    }

    /// Sends `envelope` to a connected peer without waiting. Returns false when the peer is gone
    /// or its queue is full (the message is dropped and counted, never blocks the reactor).
    @discardableResult
    public func send(_ envelope: Envelope, to peer: PeerAddress) -> Bool {
        let payload: [UInt8]
        do {
            payload = try envelope.encoded()
        } catch {
            logger.error("reply failed to encode", metadata: ["body": "\(envelope.body.name)", "error": "\(error)"])
            if case .error = envelope.body { return false }
            let fallback = Envelope(requestId: envelope.requestId,
                                    body: .error(ErrorReply(code: .internal, message: "The reply could not be encoded: \(error)")))
            return send(fallback, to: peer)
        }
        do {
            let result = payload.withUnsafeBytes { payload -> Result<Void, ZMQError> in
                do throws(ZMQError) {
                    try sendRouted(payload, to: peer)
                    return .success(())
                } catch {
                    return .failure(error)
                }
            }
            try result.get()
            return true
        } catch {
            repliesDropped.increment()
            logger.debug("send dropped", metadata: ["peer": "\(peer)", "error": "\(error)"])
            return false
        }
    }

    /// Sends an already encoded Envelope to a connected peer, for hot paths that encode their
    /// own messages. Same rules as ``send(_:to:)``: never blocks; false when dropped.
    @discardableResult
    public func send(encoded payload: UnsafeRawBufferPointer, to peer: PeerAddress) -> Bool {
        do {
            try sendRouted(payload, to: peer)
            return true
        } catch {
            repliesDropped.increment()
            return false
        }
    }

    /// `[id, ("",) payload]` to `peer` on the ROUTER, never blocking.
    @inline(__always)
    private func sendRouted(_ payload: UnsafeRawBufferPointer, to peer: PeerAddress) throws(ZMQError) {
        let socket = peer.viaControl ? (control ?? router) : router
        let result = peer.withRoutingId { identity -> Result<Void, ZMQError> in
            do throws(ZMQError) {
                try socket.sendRouted(to: identity, delimited: peer.delimited, payload: payload)
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        try result.get()
    }

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
                                 topic: String(topic.prefix(128)), timestampUnixMs: UInt64(Date().timeIntervalSince1970 * 1000),
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

    private func sendHeartbeat() {
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

    private func drainSupervisorReplies() {
        guard let supervisorLink else { return }
        while let frame = try? supervisorLink.receive(flags: .dontWait) {
            if let envelope = try? Envelope(decoding: frame), case .error(let error) = envelope.body {
                logger.warning("supervisor rejected heartbeat", metadata: ["error": "\(error.message)"])
            }
        }
    }

    // MARK: Timers and watchers

    /// Runs `action` every `seconds` on the reactor thread until cancelled.
    @discardableResult
    public func every(seconds: Double, _ action: @escaping (ServiceRuntime) -> Void) -> TimerID {
        timers.add(after: seconds, repeating: seconds, action)
    }

    /// Runs `action` once after `seconds`.
    @discardableResult
    public func after(seconds: Double, _ action: @escaping (ServiceRuntime) -> Void) -> TimerID {
        timers.add(after: seconds, repeating: nil, action)
    }

    /// Cancels a timer (no effect if it already ran or was cancelled).
    public func cancel(_ timer: TimerID) {
        timers.cancel(timer)
    }

    /// Calls `onReadable` whenever `socket` has input. The socket must belong to this thread.
    @discardableResult
    public func watch(_ socket: Socket, onReadable: @escaping (ServiceRuntime) -> Void) -> Watcher {
        let watcher = Watcher(source: .socket(socket), onReadable: onReadable)
        watchers.append(watcher)
        pollerDirty = true
        return watcher
    }

    /// Calls `onReadable` whenever the file descriptor `fd` (a UDP socket, a pipe) is readable.
    @discardableResult
    public func watch(fileDescriptor fd: Int32, onReadable: @escaping (ServiceRuntime) -> Void) -> Watcher {
        let watcher = Watcher(source: .descriptor(fd), onReadable: onReadable)
        watchers.append(watcher)
        pollerDirty = true
        return watcher
    }

    /// Stops watching.
    public func unwatch(_ watcher: Watcher) {
        watcher.cancelled = true
        pollerDirty = true
    }

    /// A socket for the service to bind that admits cluster and operator keys only (CurveZMQ
    /// with this instance's identity; each message's `User-Id` names the sender, see
    /// ``ZAPAuthenticator/caller(fromUserId:)``). Without a trust store, a plain server socket.
    public func controlServerSocket(_ type: SocketType) throws -> Socket {
        guard let identity, let controlDomain else {
            return try SocketDefaults.server(type, context: context, curve: configuration.curve)
        }
        let socket = try SocketDefaults.server(type, context: context, curve: identity)
        try socket.set(.zapDomain(controlDomain))
        return socket
    }

    /// A client (DEALER) to another service's public endpoint, driven by this reactor.
    public func client(to endpoint: String, serverKey: [UInt8]? = nil) throws -> ServiceClient {
        try ServiceClient(runtime: self, endpoint: endpoint, serverKey: serverKey, keys: configuration.curve)
    }

    /// A client (DEALER) to a cluster member's control endpoint, authenticated with this
    /// instance's identity. Nil when the control plane is off or the member has no control endpoint.
    public func controlClient(to member: TrustStore.Member) throws -> ServiceClient? {
        guard let identity, let endpoint = member.control else { return nil }
        return try ServiceClient(runtime: self, endpoint: endpoint, serverKey: member.publicKey, keys: identity)
    }

    /// A control-plane client to the member of kind `kind` (the one at `endpoint`, a public or
    /// control endpoint, when several are known). Nil until the member's key is in the trust store.
    public func controlClient(kind: String, endpoint: String? = nil) throws -> ServiceClient? {
        guard let trust else { return nil }
        let candidates = trust.members(kind: kind)
        let member = endpoint.flatMap { wanted in candidates.first { $0.endpoint == wanted || $0.control == wanted } }
            ?? (candidates.count == 1 ? candidates[0] : nil)
        guard let member else { return nil }
        return try controlClient(to: member)
    }
}

/// Something the reactor polls for a service: a socket or a file descriptor.
public final class Watcher {
    enum Source {
        case socket(Socket)
        case descriptor(Int32)
    }
    let source: Source
    let onReadable: (ServiceRuntime) -> Void
    var cancelled = false

    init(source: Source, onReadable: @escaping (ServiceRuntime) -> Void) {
        self.source = source
        self.onReadable = onReadable
    }
}

/// A failure to start a service, with a one-line reason for the operator.
public struct RuntimeStartError: Error, CustomStringConvertible {
    /// The reason.
    public let description: String
    /// Creates an error.
    public init(_ description: String) { self.description = description }
}
