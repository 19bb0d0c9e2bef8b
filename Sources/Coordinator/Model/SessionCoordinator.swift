import NetplayAuth
import NetplayService
import NetplayWire

/// What one coordinator request produced: the reply, and what to tell the world.
public struct Outcome: Sendable {
    /// The reply body.
    public var reply: Envelope.Body
    /// `sessions.*` events to publish.
    public var events: [SessionEvent] = []
    /// `relays.*` events to publish.
    public var relayEvents: [RelayEvent] = []
    /// Sessions whose lobby room may have changed.
    public var touched: [String] = []
    /// Participants a relay should detach (kicked, left, session ended), with the relay endpoint.
    public var detach: [RelayNotice] = []
    /// Lobby rooms of relayed RetroArch sessions that changed, by room id (nil: withdraw).
    public var retroArchRooms: [String: Room?] = [:]

    /// Creates an outcome.
    public init(reply: Envelope.Body) {
        self.reply = reply
    }
}

/// A message for a relay about a session it serves.
public struct RelayNotice: Sendable, Equatable {
    /// The relay's peer endpoint.
    public var endpoint: String
    /// The message body (`CloseRelaySessionRequest` or `DisconnectPeerRequest`).
    public var body: Envelope.Body
}

/// The coordinator's brain, free of sockets: sessions and their state machine, checks, relay
/// registry and assignment, tickets and tokens, with every change written through the
/// ``SessionStore`` before it becomes visible. Runs on the reactor thread only, so requests are
/// serialised and a transaction never interleaves with another.
public final class SessionCoordinator {
    /// The durable store.
    public let store: SessionStore
    /// The relay registry.
    public let relays: RelayRegistry
    /// The RetroArch sessions relays pipe (soft state from their refreshes).
    public let retroArch = RetroArchSessionBook()
    /// Rules and limits.
    public let settings: CoordinatorSettings
    /// Sessions by id (active and recently ended).
    public private(set) var sessions: [String: SessionRecord] = [:]
    private var sortedIds: [String] = []
    private var byCreateKey: [String: String] = [:]
    /// Per relay, the sessions in which its last report had someone attached (a report then
    /// touches only those and the ones it names, not every session).
    private var attachedSessions: [String: Set<String>] = [:]
    let signer: JoinTicketSigner
    let tokens: ParticipantTokens
    /// What binds an idempotency key to its request (keyed with the participant-token key).
    let fingerprints: RequestFingerprints
    /// The admission rules shared with LAN hosts (password budget included).
    var admission: AdmissionPolicy
    var createLimiter: RateLimiter<String>
    var joinLimiter: RateLimiter<String>
    /// Lobby and active sessions per host address.
    private(set) var hostedBySource = HostedBySource()
    /// Last activity per active session (monotonic ms): a change, or someone attached.
    private(set) var lastActivityMs: [String: UInt64] = [:]
    /// Round trips each player measured to relays (session -> participant -> relay -> µs), as
    /// reported at create and join. Soft state: a restarted coordinator picks by load until
    /// players report again.
    var measuredRtts: [String: [String: [String: UInt32]]] = [:]
    /// Joins waiting for their host's decision, per session (rooms whose host approves joiners).
    /// Soft state: after a restart the joiners file their joins again.
    var approvals: [String: HostApprovals] = [:]
    /// Participants the session's relay was told to disconnect (kicked, left), by session, until
    /// a refresh shows them gone: ``strayAttachments(_:on:)`` tells the relay again while it
    /// shows them attached. Not a player the relay timed out: it may come back and play on.
    /// In memory, 10,000 at most.
    var toldToDisconnect: [String: Set<String>] = [:]
    private var eventSequence: UInt64
    private var relayEventSequence: UInt64

    /// Loads every session and relay from `store`; tickets are signed with `keyRing`.
    public init(store: SessionStore, keyRing: TicketKeyRing, settings: CoordinatorSettings, at time: CoordinatorTime) throws {
        self.store = store
        self.settings = settings
        relays = RelayRegistry(ttlMs: settings.relayTTLMs, refreshIntervalMs: settings.relayRefreshIntervalMs)
        relays.choice = settings.relayChoice
        signer = JoinTicketSigner(keyRing: keyRing)
        let tokenKey = try store.participantTokenKey()
        tokens = ParticipantTokens(key: tokenKey)
        fingerprints = RequestFingerprints(key: tokenKey)
        admission = AdmissionPolicy(limits: .init(passwordAttemptsPerMinute: settings.passwordAttemptsPerMinute))
        createLimiter = RateLimiter(ratePerSecond: settings.createsPerMinutePerSource / 60, burst: settings.createsPerMinutePerSource)
        joinLimiter = RateLimiter(ratePerSecond: settings.joinsPerMinutePerSource / 60, burst: settings.joinsPerMinutePerSource)
        // Event sequences continue across restarts: start from the wall clock in microseconds.
        eventSequence = time.unixMs * 1000
        relayEventSequence = time.unixMs * 1000
        for var session in try store.loadSessions() {
            // Who is attached is the relays' to say again (their next refresh).
            for index in session.participants.indices { session.participants[index].connected = false }
            sessions[session.sessionId] = session
            // An ended session and a later one may share a key (see existingSession(forCreateKey:)).
            if !session.idempotencyKey.isEmpty, session.isActive || byCreateKey[session.idempotencyKey] == nil {
                byCreateKey[session.idempotencyKey] = session.sessionId
            }
            if session.isActive, !session.relayId.isEmpty { relays.assigned[session.relayId, default: 0] += 1 }
            if session.isActive { activeCount += 1 }
            hostedBySource.replace(nil, with: session)
            if session.isActive { lastActivityMs[session.sessionId] = time.monotonicMs }
        }
        sortedIds = sessions.keys.sorted()
        relays.restore(try store.loadRelays(), nowMs: time.monotonicMs)
    }

    /// Sessions in the lobby or running (kept as sessions change, not counted per request).
    public private(set) var activeCount = 0

    // MARK: Commit

    /// Writes `changes` and, once durable, makes `updated` the session's state.
    func commit(_ updated: SessionRecord, _ changes: [StoreChange], at time: CoordinatorTime) throws(ServiceError) {
        do {
            try store.apply(changes)
        } catch {
            throw ServiceError(.internal, "The coordinator could not store the change: \(error).")
        }
        let previous = sessions[updated.sessionId]
        // A session moved off a relay (``ensureRelay(_:at:)``): the old relay closes it, told only
        // now that the move is stored; a failed write leaves it where it was, served.
        if let previous, previous.isActive, updated.isActive, !previous.relayId.isEmpty, previous.relayId != updated.relayId {
            relays.scheduleClose(updated.sessionId, on: previous.relayId, moved: true)
            // Back on a relay it moved away from: the close queued there then must not end it now.
            relays.cancelClose(updated.sessionId, on: updated.relayId)
        }
        if let previous, previous.isActive, !previous.relayId.isEmpty { relays.assigned[previous.relayId, default: 1] -= 1 }
        if updated.isActive, !updated.relayId.isEmpty { relays.assigned[updated.relayId, default: 0] += 1 }
        activeCount += (updated.isActive ? 1 : 0) - (previous?.isActive == true ? 1 : 0)
        hostedBySource.replace(previous, with: updated)
        if previous == nil {
            sortedIds.insert(updated.sessionId, at: insertionIndex(updated.sessionId))
            if !updated.idempotencyKey.isEmpty { byCreateKey[updated.idempotencyKey] = updated.sessionId }
        }
        sessions[updated.sessionId] = updated
        noteActivity(updated.sessionId, nowMs: time.monotonicMs)
    }

    /// Notes who is attached in the sessions assigned to `relayId`, as it reports them
    /// (`attached[sessionId]`; a session left out has nobody attached). Transient: not stored.
    /// Returns the active sessions in which someone attached or detached (in id order), whose
    /// `sessions.*` subscribers should hear it.
    @discardableResult
    func notePresence(on relayId: String, attached: [String: Set<String>], nowMs: UInt64) -> [String] {
        let previously = attachedSessions[relayId] ?? []
        var now = Set<String>()
        var changedActive: [String] = []
        for sessionId in previously.union(attached.keys) {
            guard var session = sessions[sessionId] else { continue }
            // A session that ended or moved to another relay has nobody attached here.
            let here = session.isActive && session.relayId == relayId ? attached[sessionId] ?? [] : []
            var changed = false
            for index in session.participants.indices {
                let connected = here.contains(session.participants[index].participantId)
                if session.participants[index].connected != connected {
                    session.participants[index].connected = connected
                    changed = true
                }
            }
            if changed {
                sessions[sessionId] = session
                if session.isActive { changedActive.append(sessionId) }
            }
            if !here.isEmpty {
                now.insert(sessionId)
                noteActivity(sessionId, nowMs: nowMs)
            }
        }
        attachedSessions[relayId] = now.isEmpty ? nil : now
        return changedActive.sorted()
    }

    /// Marks `sessionId` active at `nowMs` (monotonic), or forgets it once it is no longer active.
    func noteActivity(_ sessionId: String, nowMs: UInt64) {
        if sessions[sessionId]?.isActive == true { lastActivityMs[sessionId] = nowMs } else { lastActivityMs[sessionId] = nil }
    }

    func forget(_ sessionId: String) throws(ServiceError) {
        do { try store.apply([.deleteSession(sessionId)]) } catch {
            throw ServiceError(.internal, "The coordinator could not delete session \(sessionId): \(error).")
        }
        guard let session = sessions.removeValue(forKey: sessionId) else { return }
        if session.isActive, !session.relayId.isEmpty { relays.assigned[session.relayId, default: 1] -= 1 }
        if session.isActive { activeCount -= 1 }
        hostedBySource.replace(session, with: nil)
        lastActivityMs[sessionId] = nil
        admission.forget(sessionId)
        let index = insertionIndex(sessionId)
        if index < sortedIds.count, sortedIds[index] == sessionId { sortedIds.remove(at: index) }
        if byCreateKey[session.idempotencyKey] == sessionId { byCreateKey[session.idempotencyKey] = nil }
    }

    /// The session a create under `key` made, while it is active: a retry of that same create gets
    /// it back (``replayedSession(_:)`` checks that it is the same). Once it
    /// has ended, a create under the same key (a player trying again long after an answer was
    /// lost) makes a new session, which the key then names.
    func existingSession(forCreateKey key: String) -> SessionRecord? {
        guard !key.isEmpty, let id = byCreateKey[key], let session = sessions[id], session.isActive else { return nil }
        return session
    }

    func insertionIndex(_ id: String) -> Int {
        var low = 0, high = sortedIds.count
        while low < high {
            let mid = (low + high) / 2
            if sortedIds[mid] < id { low = mid + 1 } else { high = mid }
        }
        return low
    }

    /// Session ids in order (for paging).
    var orderedIds: [String] { sortedIds }

    // MARK: Events

    func event(_ kind: SessionEventKind, _ session: SessionRecord, participant: String = "", reason: String = "",
               at time: CoordinatorTime) -> SessionEvent {
        eventSequence += 1
        return SessionEvent(sequence: eventSequence, kind: kind, session: session.info, participantId: participant,
                            reason: String(reason.prefix(256)), timestampUnixMs: time.unixMs)
    }

    func relayEvent(_ kind: RelayEventKind, _ info: RelayInfo, sessions: [String], at time: CoordinatorTime) -> RelayEvent {
        relayEventSequence += 1
        return RelayEvent(sequence: relayEventSequence, kind: kind, relay: info, sessionIds: Array(sessions.prefix(1000)),
                          timestampUnixMs: time.unixMs)
    }

    // MARK: Identity

    /// Checks `token` for `participantId` in `session`: UNAUTHENTICATED when either is wrong.
    func authenticate(_ session: SessionRecord, _ participantId: String, _ token: [UInt8], field: String) throws(ServiceError) -> ParticipantRecord {
        guard let participant = session.participant(participantId),
              tokens.check(token, sessionId: session.sessionId, participantId: participantId) else {
            throw ServiceError(.unauthenticated, "Unknown participant or wrong participant token for session \(session.sessionId).",
                               field: field)
        }
        return participant
    }

    /// Like ``authenticate(_:_:_:field:)``, and PERMISSION_DENIED unless the participant is the host.
    func authenticateHost(_ session: SessionRecord, _ participantId: String, _ token: [UInt8], what: String,
                          field: String) throws(ServiceError) -> ParticipantRecord {
        let participant = try authenticate(session, participantId, token, field: field)
        guard participant.isHost else {
            throw ServiceError(.permissionDenied, "Only the host may \(what).", field: field)
        }
        return participant
    }

    /// The active session `id`, when `participantId` is its host: ``activeSession(_:field:)`` then
    /// ``authenticateHost(_:_:_:what:field:)``, their error fields named after `request`, the
    /// message's name (`StartSessionRequest.session_id`, `StartSessionRequest.participant_token`).
    func hostedSession(_ id: String, _ participantId: String, _ token: [UInt8], what: String,
                       request: String) throws(ServiceError) -> SessionRecord {
        let session = try activeSession(id, field: "\(request).session_id")
        _ = try authenticateHost(session, participantId, token, what: what, field: "\(request).participant_token")
        return session
    }

    func session(_ id: String, field: String) throws(ServiceError) -> SessionRecord {
        guard let session = sessions[id] else {
            throw ServiceError(.notFound, "No session '\(id)'.", field: field)
        }
        return session
    }

    func activeSession(_ id: String, field: String) throws(ServiceError) -> SessionRecord {
        let session = try session(id, field: field)
        guard session.isActive else {
            throw ServiceError(.sessionEnded, "Session \(id) has ended.", field: field)
        }
        return session
    }

    static func randomId(prefix: String, bytes: Int) -> String {
        prefix + Hex.encode(Sodium.randomBytes(bytes))
    }

    // MARK: Tickets and relays

    /// A signed ticket admitting `participant` to the session's relay (nil for LAN sessions).
    func ticket(_ session: SessionRecord, _ participant: ParticipantRecord, at time: CoordinatorTime) throws(ServiceError) -> JoinTicket? {
        guard session.settings.transport != .lan else { return nil }
        do {
            return try signer.issue(sessionId: session.sessionId, participantId: participant.participantId, role: participant.role,
                                    slot: participant.role == .player ? participant.slot : 0, relayId: session.relayId,
                                    relayEndpoint: session.relayEndpoint, params: session.syncParams, name: participant.name,
                                    ttlMs: settings.ticketTTLMs, nowUnixMs: time.unixMs)
        } catch {
            throw ServiceError(.internal, "The ticket could not be signed: \(error).")
        }
    }

    /// Gives `session` a live relay when its own is gone or draining (or it has none): the one nearest its
    /// players (``RelayRegistry/pick(region:rtts:nowMs:)``). Returns true when the relay changed;
    /// the old relay is told to close it once the change is committed. NO_RELAY when no live
    /// relay can take it.
    func ensureRelay(_ session: inout SessionRecord, at time: CoordinatorTime) throws(ServiceError) -> Bool {
        guard session.settings.transport != .lan else { return false }
        if !session.relayId.isEmpty, relays.isLive(session.relayId, nowMs: time.monotonicMs),
           relays.entry(session.relayId)?.info.draining != true { return false }
        guard let relay = relays.pick(region: session.settings.region, rtts: playerRtts(session), nowMs: time.monotonicMs) else {
            throw ServiceError(.noRelay, "No live relay can take the session; retry shortly.", retryAfterMs: 1_000)
        }
        session.relayId = relay.relayId
        session.relayEndpoint = relay.endpoint
        return true
    }
}

extension Dictionary where Value == Int {
    /// Subtracts one, removing the key at zero.
    mutating func decrement(_ key: Key) {
        guard let value = self[key] else { return }
        self[key] = value > 1 ? value - 1 : nil
    }
}
