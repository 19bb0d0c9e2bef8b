import Foundation
import Logging
import NetplayWire
import ZeroMQ

// ServiceRuntime: reading requests off the ROUTER and the control socket, dispatching them to the
// service (Health, Introspect and Ping answered here), and sending replies and messages to peers.
extension ServiceRuntime {
    // MARK: Requests

    /// Reads every request waiting on the ROUTER, bounded per wake-up (4,096 requests, or 20 ms
    /// of handling: a stranger pipelining expensive requests held the control socket and the
    /// timers up for the whole batch) so timers and the other sockets still run.
    func drainRouter() {
        let batchService = rawService
        batchService?.readBatchWillBegin(runtime: self)
        defer { batchService?.readBatchDidEnd(runtime: self) }
        let deadline = ContinuousClock.now + .milliseconds(20)
        for index in 0..<4096 {
            if index & 15 == 15, ContinuousClock.now > deadline { return }
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
            if let outboundGuard, let ledger = router.inboundLedger {
                outboundGuard.noteRequest(from: identity, fd: ledger.lastFd)
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
    func finishRequest(from identity: PeerAddress, first: (bytes: UnsafeRawBufferPointer, more: Bool)?) {
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
            let requestId = EnvelopeHeader.salvageRequestId(undecodable)
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
    func drainControl() {
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
                send(Envelope(requestId: EnvelopeHeader.salvageRequestId(Array(frames[frames.count - 1].prefix(16))),
                              body: .error(ErrorReply(error))), to: peer)
            }
        }
    }

    func dispatch(_ request: Request) {
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
                    "unread_reply_connections": .number(UInt64(outboundGuard?.connectionCount ?? 0)),
                    "outbound_connections_cut_total": .number(UInt64(outboundCuts.value)),
                ],
                "state": service.introspect(section: query.section),
            ]
            reply(to: request, with: .introspectResponse(IntrospectResponse(
                json: document.rendered(), service: configuration.kind, instance: configuration.instance)))
        case .ping(let ping):
            reply(to: request, with: .pong(Pong(nonce: ping.nonce, echoSentAtUs: ping.sentAtUs,
                                                responderUnixMs: UnixTime.nowMs())))
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

    var status: String { draining ? "draining" : (service?.status ?? "starting") }

    func health() -> HealthResponse {
        HealthResponse(service: configuration.kind, instance: configuration.instance, version: version,
                       ready: (service?.isReady ?? false) && !draining, uptimeMs: uptimeMs, pid: UInt32(getpid()),
                       startedAtUnixMs: startedAtUnixMs, status: String(status.prefix(256)), details: healthDetails())
    }

    /// What anyone may learn: who and whether ready, nothing about the host or the cluster.
    func publicHealth() -> HealthResponse {
        HealthResponse(service: configuration.kind, instance: configuration.instance, version: version,
                       ready: (service?.isReady ?? false) && !draining, uptimeMs: uptimeMs, pid: 0,
                       startedAtUnixMs: startedAtUnixMs, status: draining ? "draining" : ((service?.isReady ?? false) ? "ok" : "starting"),
                       details: [])
    }

    /// The runtime's facts (storage, telemetry, events, supervisor), then the service's.
    func healthDetails() -> [KeyValue] {
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
    func sendRouted(_ payload: UnsafeRawBufferPointer, to peer: PeerAddress) throws(ZMQError) {
        // A peer holding its share of unread replies gets no more until it reads (OutboundGuard).
        if !peer.viaControl, let outboundGuard, !outboundGuard.admit(payload.count, to: peer) { throw .wouldBlock }
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
}
