import Dispatch
import Foundation
import NetplayAuth
import NetplayService
import NetplayWire

/// netplay-coordinator's logic on the shared runtime: decodes requests into
/// ``SessionCoordinator`` calls, hashes and verifies passwords off the reactor thread, publishes
/// `sessions.*` and `relays.*` events, keeps discovery's lobby in step, and notifies relays.
public final class CoordinatorService: Service {
    private let configuration: CoordinatorConfiguration
    /// The brain (set in ``start(runtime:)``; reactor thread only).
    public private(set) var core: SessionCoordinator?
    private var announcer: RoomAnnouncer?
    private let notifier = RelayNotifier()
    /// Workers for password hashing (at most `settings.hashingWorkers` jobs run at once; the
    /// queue below picks them fairly across sessions).
    private let passwords = DispatchQueue(label: "netplay.coordinator.passwords", attributes: .concurrent)
    private var hashing: HashingQueue<@Sendable () -> Void>
    /// Copies of a keyed create or join whose first is being hashed: they get the first's answer.
    private var copies = RequestCopies<CopyKey, Request>(maxCopies: 8)
    private var copiesCounter: Counter?
    private let origin = ContinuousClock.now
    private var lock: FileLock?
    private var databasePath = ""
    private var secretSource = ""
    private var sessionsGauge: Gauge?
    private var requestCounters: [String: Counter] = [:]

    /// Creates the service; storage opens in ``start(runtime:)``.
    public init(configuration: CoordinatorConfiguration = CoordinatorConfiguration()) {
        self.configuration = configuration
        let settings = configuration.settings
        hashing = HashingQueue(width: settings.hashingWorkers, perSession: settings.pendingHashesPerSession,
                               perSource: settings.pendingHashesPerSource)
    }

    /// Now, for the coordinator.
    public var now: CoordinatorTime { .now(since: origin) }

    // MARK: Service

    public func start(runtime: ServiceRuntime) throws {
        let directory = runtime.configuration.dataDirectory.path
        lock = try FileLock(path: directory + "/coordinator.lock")
        databasePath = directory + "/" + configuration.databaseName
        let store = try SessionStore(path: databasePath, durability: configuration.durability)
        let keyRing = try resolveKeyRing(directory: directory, runtime: runtime)
        let core = try SessionCoordinator(store: store, keyRing: keyRing, settings: configuration.settings, at: now)
        self.core = core
        sessionsGauge = runtime.metrics.gauge("netplay_coordinator_sessions", help: "Active sessions (lobby and running).")
        copiesCounter = runtime.metrics.counter("netplay_coordinator_request_copies_total",
                                                help: "Copies of a create or join that waited for the first's answer instead of being served again.")
        sessionsGauge?.set(Double(core.activeCount))
        runtime.metrics.gauge("netplay_coordinator_relays", help: "Relays in the registry.") { [weak self] in
            Double(self?.core?.relays.relays.count ?? 0)
        }
        runtime.metrics.gauge("netplay_coordinator_retroarch_sessions", help: "RetroArch sessions the relays report piping.") { [weak self] in
            Double(self?.core?.retroArch.count ?? 0)
        }
        runtime.logger.info("storage open", metadata: ["database": "\(databasePath)", "sessions": "\(core.activeCount)",
                                                      "durability": "\(configuration.durability.rawValue)", "tickets": "\(secretSource)"])
        if let endpoint = configuration.discovery {
            // The announcer id outlives restarts (kept in the database), so a restarted coordinator
            // owns the rooms it announced before, whatever its instance name now.
            let announcerId: String
            if let stored = try core.store.meta("announcer_id"), let text = String(validating: stored, as: UTF8.self), !text.isEmpty {
                announcerId = text
            } else {
                announcerId = runtime.configuration.instance
                try core.store.setMeta("announcer_id", Array(announcerId.utf8))
            }
            let announcer = RoomAnnouncer(endpoint: endpoint, announcerId: announcerId, ttlMs: configuration.roomTTLMs) {
                [unowned runtime] in try? runtime.controlClient(kind: "discovery", endpoint: endpoint)
            }
            self.announcer = announcer
            runtime.logger.info("announcing rooms to discovery (the coordinator runs without it when it is down)",
                                metadata: ["discovery": "\(endpoint)", "announcer": "\(announcerId)"])
            for session in core.sessions.values where session.isActive {
                announcer.set(session.sessionId, room: session.room(hostVersion: configuration.settings.hostVersion))
            }
            runtime.every(seconds: 0.05) { [weak self] runtime in
                guard let self else { return }
                announcer.tick(runtime: runtime, nowMs: now.monotonicMs)
            }
            runtime.every(seconds: 1) { [weak self] runtime in
                guard let self else { return }
                announcer.refreshDue(runtime: runtime, nowMs: now.monotonicMs)
            }
        } else {
            runtime.logger.notice("discovery disabled: rooms are not announced in the lobby")
        }
        runtime.every(seconds: 0.25) { [weak self] runtime in self?.maintain(runtime, housekeeping: false) }
        runtime.every(seconds: 5) { [weak self] runtime in self?.maintain(runtime, housekeeping: true) }
    }

    /// A relay speaks only for itself: the relay id it registers or refreshes must be the
    /// instance its key proved (never self-asserted), and only relays (kind `sync`) register.
    static func requireRelay(_ request: Request, claims relayId: String) throws(ServiceError) {
        guard case .cluster(let kind, let instance) = request.caller, kind == "sync" else {
            throw ServiceError(.permissionDenied, "Only relays (cluster members of kind sync) register; \(request.caller) is not one.")
        }
        guard relayId == instance else {
            throw ServiceError(.permissionDenied, "Relay '\(instance)' cannot speak for relay '\(relayId)'.", field: "relay_id")
        }
    }

    public func handle(_ request: Request, runtime: ServiceRuntime) throws(ServiceError) -> HandlerOutcome {
        guard let core else { throw ServiceError(.unavailable, "The coordinator is starting.", retryAfterMs: 500) }
        count(request.body.name, runtime)
        let time = now
        switch request.body {
        case .createSessionRequest(let create):
            if let waiting = try waitForFirst(request, idempotencyKey: create.idempotencyKey) { return waiting }
            let source = request.source
            let play = create.settings.playPassword, spectate = create.settings.spectatePassword
            let needsHash = !(play.isEmpty && spectate.isEmpty) && core.existingSession(forCreateKey: create.idempotencyKey) == nil
            if needsHash, !hashing.admits(session: "create " + source, source: source) {
                throw Self.hashingBusy
            }
            try core.precheckCreate(create, source: source, at: time)
            if !needsHash {
                return .reply(finish(try core.create(create, source: source, playHash: nil, spectateHash: nil, at: time), runtime))
            }
            let hasher = configuration.settings.passwordHasher
            offload(runtime, request: request, key: "create " + source, copyKey: CopyKey(request, idempotencyKey: create.idempotencyKey), work: { () -> (String?, String?, Bool) in
                let playHash = play.isEmpty ? nil : hasher.hash(play)
                let spectateHash = spectate.isEmpty ? nil : hasher.hash(spectate)
                return (playHash, spectateHash, (play.isEmpty || playHash != nil) && (spectate.isEmpty || spectateHash != nil))
            }, then: { service, core, hashes in
                guard hashes.2 else { return .failure(ServiceError(.internal, "The password could not be hashed (out of memory).")) }
                return Result { () throws(ServiceError) -> Outcome in
                    try core.create(create, source: source, playHash: hashes.0, spectateHash: hashes.1, at: service.now)
                }
            })
            return .deferred
        case .joinSessionRequest(let join):
            if let waiting = try waitForFirst(request, idempotencyKey: join.idempotencyKey) { return waiting }
            let source = request.source
            // The attempt is reserved here, before any hash, so concurrent guesses cannot
            // outrun the session's budget.
            let plan = try core.planJoin(join, source: source, at: time)
            if plan.open { return .reply(finish(try core.join(join, source: source, password: .notNeeded, at: time), runtime)) }
            guard hashing.admits(session: join.sessionId, source: source) else {
                core.releaseJoin(plan, at: time)
                throw Self.hashingBusy
            }
            let candidates = plan.candidates.map { ($0.hash, $0.match) }
            let password = join.password
            offload(runtime, request: request, key: join.sessionId, copyKey: CopyKey(request, idempotencyKey: join.idempotencyKey), work: { () -> PasswordMatch in
                for (hash, match) in candidates where PasswordHasher.verify(password, against: hash) { return match }
                return PasswordMatch.none
            }, then: { service, core, match in
                Result { () throws(ServiceError) -> Outcome in
                    try core.settleJoin(join, source: source, plan: plan, match: match, at: service.now)
                }
            })
            return .deferred
        case .leaveSessionRequest(let leave): return .reply(finish(try core.leave(leave, at: time), runtime))
        case .kickParticipantRequest(let kick): return .reply(finish(try core.kick(kick, at: time), runtime))
        case .swapSlotsRequest(let swap): return .reply(finish(try core.swapSlots(swap, at: time), runtime))
        case .chooseSlotRequest(let choose): return .reply(finish(try core.chooseSlot(choose, at: time), runtime))
        case .startSessionRequest(let start): return .reply(finish(try core.start(start, at: time), runtime))
        case .endSessionRequest(let end): return .reply(finish(try core.end(end, at: time), runtime))
        case .renewTicketRequest(let renew): return .reply(finish(try core.renew(renew, at: time), runtime))
        case .getSessionRequest(let get): return .reply(try core.get(get).reply)
        case .listPendingJoinsRequest(let list): return .reply(try core.pendingJoins(list, at: time).reply)
        case .decideJoinRequest(let decide): return .reply(try core.decideJoin(decide, at: time).reply)
        case .listSessionsRequest(let list):
            if list.includeUnlisted && request.caller == .anonymous {
                throw ServiceError(.permissionDenied, "Unlisted sessions are shown to operators only (the control endpoint).",
                                   field: "include_unlisted")
            }
            return .reply(try core.list(list).reply)
        case .registerRelayRequest(let register):
            try Self.requireRelay(request, claims: register.relay.relayId)
            let outcome = finish(try core.registerRelay(register, at: time), runtime)
            runtime.logger.info("relay registered", metadata: ["relay": "\(register.relay.relayId)", "endpoint": "\(register.relay.endpoint)"])
            return .reply(outcome)
        case .refreshRelayRequest(let refresh):
            try Self.requireRelay(request, claims: refresh.relayId)
            return .reply(finish(try core.refreshRelay(refresh, at: time), runtime))
        case .listRelaysRequest(let list): return .reply(core.listRelays(list, at: time).reply)
        case .listRetroarchSessionsRequest(let list): return .reply(core.listRetroArchSessions(list).reply)
        default:
            throw ServiceError(.unknownRequest, "The coordinator does not handle \(request.body.name).")
        }
    }

    public var isReady: Bool { core != nil }

    public var status: String {
        guard let core else { return "starting" }
        let discovery: String
        switch (configuration.discovery, announcer?.reachable) {
        case (nil, _): discovery = "discovery disabled"
        case (_, true?): discovery = "discovery reachable"
        case (_, false?): discovery = "discovery unreachable"
        case (_, nil): discovery = "discovery not contacted yet"
        }
        return "ok: \(core.activeCount) sessions, \(core.relays.relays.count) relays; \(discovery)"
    }

    public var healthDetails: [(key: String, value: String)] {
        guard let core else { return [] }
        let discovery: String
        switch (configuration.discovery, announcer?.reachable) {
        case (nil, _): discovery = "disabled"
        case (let endpoint?, true?): discovery = "\(endpoint) (reachable)"
        case (let endpoint?, false?): discovery = "\(endpoint) (unreachable)"
        case (let endpoint?, nil): discovery = "\(endpoint) (not contacted yet)"
        }
        return [("discovery", discovery), ("sessions_active", "\(core.activeCount)"),
                ("relays_registered", "\(core.relays.relays.count)")]
    }

    public func introspect(section: String) -> JSONValue {
        guard let core else { return ["state": "starting"] }
        let time = now
        var document: [String: JSONValue] = [
            "database": .string(databasePath),
            "durability": .string(configuration.durability.rawValue),
            "ticket_keys": .string(secretSource),
            "sessions_active": .number(core.activeCount),
            "sessions_stored": .number(core.sessions.count),
            "discovery": [
                "endpoint": configuration.discovery.map(JSONValue.string) ?? .null,
                "reachable": announcer?.reachable.map(JSONValue.bool) ?? .null,
                "rooms_announced": .number(announcer?.announcedCount ?? 0),
                "backlog": .number(announcer?.backlog ?? 0),
            ],
            "relays": .array(core.relays.relays.map { entry in
                [
                    "relay_id": .string(entry.info.relayId), "endpoint": .string(entry.info.endpoint),
                    "live": .bool(core.relays.isLive(entry.info.relayId, nowMs: time.monotonicMs)),
                    "draining": .bool(entry.info.draining), "sessions_reported": .number(entry.info.load?.sessions ?? 0),
                    "sessions_assigned": .number(core.relays.assigned[entry.info.relayId] ?? 0),
                ]
            }),
        ]
        if section == "" || section == "sessions" {
            document["sessions"] = .array(core.orderedIds.prefix(500).compactMap { core.sessions[$0] }.map { session in
                [
                    "session_id": .string(session.sessionId), "state": .string(session.state.protoName),
                    "game": .string(session.settings.content.gameName), "players": .number(session.players.count),
                    "spectators": .number(session.spectators.count), "relay_id": .string(session.relayId),
                    "version": .number(session.version),
                ]
            })
        }
        return .object(document)
    }

    public func stop(runtime: ServiceRuntime) {
        core?.store.close()
        lock = nil
    }

    // MARK: Internals

    /// Publishes what an outcome says and returns its reply.
    private func finish(_ outcome: Outcome, _ runtime: ServiceRuntime) -> Envelope.Body {
        for event in outcome.events {
            let topic = SessionTopics.topic(for: event.kind)
            runtime.emit(topic: topic, .sessionEvent(event), message: "\(topic) \(event.session.sessionId)",
                         sessionId: event.session.sessionId,
                         attributes: event.participantId.isEmpty ? [:] : ["participant": event.participantId])
        }
        for event in outcome.relayEvents {
            let topic = SessionTopics.topic(for: event.kind)
            runtime.emit(topic: topic, .relayEvent(event), severity: event.kind == .dropped ? .warning : .info,
                         message: "\(topic) \(event.relay.relayId)", attributes: ["relay": event.relay.relayId])
            if event.kind == .dropped {
                runtime.logger.warning("relay dropped: no refresh within its TTL",
                                       metadata: ["relay": "\(event.relay.relayId)", "sessions": "\(event.sessionIds.count)"])
            }
        }
        if let announcer, let core {
            for id in outcome.touched {
                announcer.set(id, room: core.sessions[id]?.room(hostVersion: configuration.settings.hostVersion))
            }
            for (id, room) in outcome.retroArchRooms { announcer.set(id, room: room) }
        }
        for notice in outcome.detach {
            let relayId = core?.relays.relays.first { $0.info.endpoint == notice.endpoint }?.info.relayId
            notifier.send(notice, relayId: relayId, runtime: runtime)
        }
        if !outcome.touched.isEmpty || !outcome.events.isEmpty { sessionsGauge?.set(Double(core?.activeCount ?? 0)) }
        return outcome.reply
    }

    /// The refusal when a session or source already has its share of password hashes pending.
    static let hashingBusy = ServiceError(.rateLimited, "Too many password checks pending for this session or address; retry shortly.",
                                          retryAfterMs: 1_000)

    /// Queues `work` (password hashing) for a worker, fairly across `key`s (session ids, or a
    /// source's creates), then runs `then` back on the reactor, replying to `request` with its
    /// outcome or error. The caller checked that the queue admits it.
    /// `copyKey`: copies of the request that arrive meanwhile wait for its answer (nil: a request
    /// without an idempotency key, whose copies are served on their own).
    private func offload<T: Sendable>(_ runtime: ServiceRuntime, request: Request, key: String, copyKey: CopyKey?,
                                      work: @escaping @Sendable () -> T,
                                      then: @escaping (CoordinatorService, SessionCoordinator, T) -> Result<Outcome, ServiceError>) {
        let handle = runtime.handle
        let box = ReactorBound(self)
        let continuation = ReactorBound(then)
        let source = request.source
        if let copyKey { copies.begin(copyKey) }
        hashing.enqueue({
            let result = work()
            handle.enqueue { runtime in
                let service = box.value
                service.hashing.finished(session: key, source: source)
                service.pump(runtime)
                let waiting = copyKey.map { service.copies.finish($0) } ?? []
                guard let core = service.core else { return }
                let answer: Envelope.Body
                switch continuation.value(service, core, result) {
                case .success(let outcome): answer = service.finish(outcome, runtime)
                case .failure(let error): answer = .error(error.reply)
                }
                runtime.reply(to: request, with: answer)
                for copy in waiting {
                    core.noteCopyRtts(copy.body, answer: answer)
                    runtime.reply(to: copy, with: answer)
                }
            }
        }, session: key, source: source)
        pump(runtime)
    }

    /// A create or join keyed by everything that decides its answer: the sender's address and the
    /// whole request (password and idempotency key included) but for its relay round trips, which
    /// a player's retry measures again.
    struct CopyKey: Hashable {
        let source: String
        let body: Envelope.Body

        /// Nil for a request without an idempotency key: two of those are two requests.
        init?(_ request: Request, idempotencyKey: String) {
            guard !idempotencyKey.isEmpty else { return nil }
            source = request.source
            switch request.body {
            case .createSessionRequest(var create):
                create.relayRtts = []
                body = .createSessionRequest(create)
            case .joinSessionRequest(var join):
                join.relayRtts = []
                body = .joinSessionRequest(join)
            default:
                body = request.body
            }
        }
    }

    /// `.deferred` when `request` is a copy of one being hashed (it gets that one's answer, and
    /// costs no hash, rate-limit token or password attempt); nil when it is to be served itself.
    /// RATE_LIMITED when too many copies of it already wait.
    private func waitForFirst(_ request: Request, idempotencyKey: String) throws(ServiceError) -> HandlerOutcome? {
        guard let key = CopyKey(request, idempotencyKey: idempotencyKey), copies.isServing(key) else { return nil }
        guard copies.wait(request, for: key) else { throw Self.hashingBusy }
        copiesCounter?.increment()
        return .deferred
    }

    /// Starts queued hashes while workers are free.
    private func pump(_ runtime: ServiceRuntime) {
        while let entry = hashing.next() { passwords.async(execute: entry.job) }
    }

    private func maintain(_ runtime: ServiceRuntime, housekeeping: Bool) {
        guard let core else { return }
        let outcome = core.maintain(at: now, housekeeping: housekeeping)
        if !outcome.relayEvents.isEmpty {
            _ = finish(outcome, runtime)
            notifier.prune(keeping: Set(core.relays.relays.map(\.info.endpoint)))
        }
        guard housekeeping else { return }
        core.expireWaitingJoins(at: now)
        let expired = core.expireIdleSessions(at: now)
        if !expired.events.isEmpty {
            runtime.logger.info("idle sessions ended", metadata: ["sessions": "\(expired.events.count)",
                                                                   "lobby_idle_seconds": "\(configuration.settings.lobbyIdleMs / 1000)",
                                                                   "running_idle_seconds": "\(configuration.settings.runningIdleMs / 1000)"])
            _ = finish(expired, runtime)
        }
    }

    private func count(_ name: String, _ runtime: ServiceRuntime) {
        if requestCounters[name] == nil {
            requestCounters[name] = runtime.metrics.counter("netplay_coordinator_requests_total", help: "Coordinator requests by kind.",
                                                            labels: ["request": name])
        }
        requestCounters[name]?.increment()
    }

    private func resolveKeyRing(directory: String, runtime: ServiceRuntime) throws -> TicketKeyRing {
        if let ring = configuration.keyRing {
            secretSource = "configured (key \(ring.signingKeyId))"
            return ring
        }
        let path = directory + "/cluster-secret"
        if FileManager.default.fileExists(atPath: path) {
            secretSource = "generated earlier (\(path))"
            return try TicketKeyRing(contentsOf: path)
        }
        let ring = TicketKeyRing.generate()
        // Created 0600 at open(2) and linked into place: never readable by others, not even
        // briefly; a coordinator starting at the same moment keeps the first one written.
        try KeyFile.atomicWrite(Data(ring.text.utf8), to: URL(fileURLWithPath: path), mode: 0o600, replacing: false)
        let kept = try TicketKeyRing(contentsOf: path)
        secretSource = "generated (\(path))"
        runtime.logger.warning("no cluster secret configured: generated one; give relays the same secret (NETPLAY_CLUSTER_SECRET_FILE)",
                               metadata: ["path": "\(path)"])
        return kept
    }
}
