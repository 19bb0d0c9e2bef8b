import Foundation
import NetplayAuth
import NetplayService
import NetplayWire

/// What the host of a room controls: kick, ban, swap slots, move itself to another slot, admit
/// or refuse joiners (rooms hosted with ``NetplaySettings/approveJoiners``) and end the room.
/// A hosting match exposes it as ``NetplayMatch/hostControls`` (nil for everyone else), for
/// cluster rooms and LAN rooms alike.
///
/// Every control is an `async` function that throws a ``NetplayError`` (the service's error
/// code, e.g. INVALID_STATE for a swap after the start) and returns once the change is made: in
/// a cluster room the coordinator's request runs off the caller's executor (never on the game
/// loop) and the coordinator pushes the change to the relay (kicks, slots, the end); in a LAN
/// room the host's in-process relay applies it on its next tick. Slots move only before the
/// match starts: each player's rollback engine holds its slot once it runs.
///
/// ```swift
/// if let controls = match.hostControls {
///     for join in try await controls.pendingJoins() { try await controls.approve(join.pendingId) }
///     try await controls.swap(1, 2)        // before match.startNow()
/// }
/// ```
public final class HostControls: Sendable {
    private enum Room: Sendable {
        case cluster(lobby: NetplayLobby, admission: Admission)
        case lan(LanHost)
    }

    private let room: Room

    /// Controls of the cluster room `admission` hosts, asked of its coordinator (`serverKey`:
    /// the cluster's CurveZMQ key, nil for a plain cluster). Nil when `admission` is not a
    /// cluster host's (no coordinator or token, or not the host's ticket).
    public init?(hosting admission: Admission, serverKey: [UInt8]? = nil, timeout: Double = 2) {
        guard let coordinator = admission.coordinatorEndpoint, !admission.participantToken.isEmpty,
              admission.ticket.admitsHost else { return nil }
        room = .cluster(lobby: NetplayLobby(discovery: nil, coordinator: coordinator, timeout: timeout, serverKey: serverKey),
                        admission: admission)
    }

    /// Controls of the LAN room `host` runs.
    public init(lan host: LanHost) {
        room = .lan(host)
    }

    // MARK: Reading

    /// The room as it is now: slots (with the host marked), spectators, state.
    public func session() async throws -> SessionInfo {
        switch room {
        case .cluster(let lobby, let admission):
            let body = try await Self.off { try lobby.call(lobby.coordinatorEndpoint, "coordinator",
                                                           .getSessionRequest(GetSessionRequest(sessionId: admission.sessionId)),
                                                           repeatable: true) }
            guard case .sessionResponse(let response) = body else {
                throw NetplayError(.internal, "The coordinator answered \(body.name) to a session query.")
            }
            return response.session
        case .lan(let host):
            return host.lanAdmission.info()
        }
    }

    /// The joins waiting for this host's decision, oldest first (empty unless the room was
    /// hosted with ``NetplaySettings/approveJoiners``). A joiner that gives up drops out.
    public func pendingJoins() async throws -> [PendingJoin] {
        switch room {
        case .cluster(let lobby, let admission):
            return try await pending(lobby, .listPendingJoinsRequest(ListPendingJoinsRequest(
                sessionId: admission.sessionId, participantId: admission.ticket.participantId,
                participantToken: admission.participantToken)), repeatable: true)
        case .lan(let host):
            return host.lanAdmission.pendingJoins()
        }
    }

    // MARK: Joiners

    /// Admits the waiting join `pendingId` (its joiner's next ask gets a ticket).
    public func approve(_ pendingId: String) async throws {
        try await decide(pendingId, approve: true, reason: "")
    }

    /// Refuses the waiting join `pendingId`; its joiner's join fails REFUSED_BY_HOST with `reason`.
    public func refuse(_ pendingId: String, reason: String = "") async throws {
        try await decide(pendingId, approve: false, reason: reason)
    }

    private func decide(_ pendingId: String, approve: Bool, reason: String) async throws {
        switch room {
        case .cluster(let lobby, let admission):
            _ = try await pending(lobby, .decideJoinRequest(DecideJoinRequest(
                sessionId: admission.sessionId, participantId: admission.ticket.participantId,
                participantToken: admission.participantToken, pendingId: pendingId, approve: approve,
                reason: String(reason.prefix(256)))))
        case .lan(let host):
            try Self.rethrow { () throws(ServiceError) in try host.lanAdmission.decide(pendingId, approve: approve, reason: reason) }
        }
    }

    // MARK: Participants

    /// Removes the player in `slot` (its relay detaches it, reason KICKED; it may join again).
    public func kick(slot: Int, reason: String = "") async throws {
        try await kick(participantId: try await holder(of: slot), ban: false, reason: reason)
    }

    /// Removes the player in `slot` and refuses its name and address for the room's life.
    public func ban(slot: Int, reason: String = "") async throws {
        try await kick(participantId: try await holder(of: slot), ban: true, reason: reason)
    }

    /// Removes the participant `participantId` (a player or a spectator), banning it when `ban`.
    public func kick(participantId: String, ban: Bool, reason: String = "") async throws {
        switch room {
        case .cluster(let lobby, let admission):
            _ = try await Self.off { try lobby.call(lobby.coordinatorEndpoint, "coordinator", .kickParticipantRequest(
                KickParticipantRequest(sessionId: admission.sessionId, participantId: admission.ticket.participantId,
                                       participantToken: admission.participantToken, targetParticipantId: participantId,
                                       reason: String(reason.prefix(256)), ban: ban))) }
        case .lan(let host):
            try Self.rethrow { () throws(ServiceError) in
                try host.lanAdmission.kick(participantId: participantId, ban: ban, reason: reason)
            }
        }
    }

    // MARK: Slots

    /// Exchanges slots `a` and `b` (either may be free) before the match starts; the relay moves
    /// attached players at once and each moved match's ``NetplayMatch/slot`` follows.
    public func swap(_ a: Int, _ b: Int) async throws {
        guard let slotA = UInt32(exactly: a), let slotB = UInt32(exactly: b) else {
            throw NetplayError(.badRequest, "Slots are 1 to 8.")
        }
        switch room {
        case .cluster(let lobby, let admission):
            _ = try await Self.off { try lobby.call(lobby.coordinatorEndpoint, "coordinator", .swapSlotsRequest(SwapSlotsRequest(
                sessionId: admission.sessionId, participantId: admission.ticket.participantId,
                participantToken: admission.participantToken, slotA: slotA, slotB: slotB))) }
        case .lan(let host):
            try Self.rethrow { () throws(ServiceError) in try host.lanAdmission.swap(slotA, slotB) }
        }
    }

    /// Moves the host to `slot` before the match starts (whoever held it takes the host's slot).
    /// The host stays the host: only it may start the match, in whichever slot.
    public func moveHost(toSlot slot: Int) async throws {
        let session = try await session()
        guard let own = session.slots.first(where: { $0.participant?.isHost == true })?.slot else {
            throw NetplayError(.invalidState, "The host holds no slot in this room.")
        }
        try await swap(Int(own), slot)
    }

    // MARK: The room

    /// Ends the room for everyone (their matches finish with ``DisconnectReason/sessionEnded(_:)``).
    /// A LAN host still calls ``LanHost/stop()`` afterwards to stop announcing it.
    public func end(reason: String = "") async throws {
        switch room {
        case .cluster(let lobby, let admission):
            _ = try await Self.off { try lobby.call(lobby.coordinatorEndpoint, "coordinator", .endSessionRequest(EndSessionRequest(
                sessionId: admission.sessionId, participantId: admission.ticket.participantId,
                participantToken: admission.participantToken, reason: String(reason.prefix(256))))) }
        case .lan(let host):
            host.lanAdmission.end(reason: reason)
        }
    }

    // MARK: Helpers

    private func holder(of slot: Int) async throws -> String {
        let session = try await session()
        guard let holder = session.slots.first(where: { Int($0.slot) == slot })?.participant else {
            throw NetplayError(.notFound, "Nobody holds slot \(slot).")
        }
        guard !holder.isHost else { throw NetplayError(.invalidState, "The host cannot kick itself; end the room instead.") }
        return holder.participantId
    }

    /// `repeatable`: a list (a decision is not).
    private func pending(_ lobby: NetplayLobby, _ request: Envelope.Body, repeatable: Bool = false) async throws -> [PendingJoin] {
        let body = try await Self.off { try lobby.call(lobby.coordinatorEndpoint, "coordinator", request, repeatable: repeatable) }
        guard case .listPendingJoinsResponse(let response) = body else {
            throw NetplayError(.internal, "The coordinator answered \(body.name) about waiting joins.")
        }
        return response.pending
    }

    /// Runs a blocking coordinator request on a thread of its own, off the caller's executor
    /// (not on the shared concurrency pool, which a few blocked waits would starve).
    private static func off(_ work: @escaping @Sendable () throws -> Envelope.Body) async throws -> Envelope.Body {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try work() }) }
        }
    }

    private static func rethrow(_ work: () throws(ServiceError) -> Void) throws {
        do { try work() } catch { throw NetplayError(error.code, error.message) }
    }
}

extension NetplayMatch {
    /// Whether this participant hosts the room (its ticket admits the host): it alone may start
    /// the match, in whichever slot it plays.
    public var isHost: Bool { role == .player && admission.ticket.admitsHost }

    /// The host's controls over its room; nil unless this match hosts it.
    public var hostControls: HostControls? {
        guard isHost else { return nil }
        return lanHostControls ?? HostControls(hosting: admission, serverKey: options.serverKey)
    }
}
