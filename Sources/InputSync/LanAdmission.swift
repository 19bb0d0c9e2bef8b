import Foundation
import NetplayAuth
import NetplayService
import NetplayWire
import Synchronization

/// Admission for a LAN host's in-process relay, which has no coordinator: it answers
/// `JoinSessionRequest` and `GetSessionRequest` itself, checks the content, passwords and free
/// places, assigns slots and signs join tickets with the host's own secret (for relay id "").
///
/// Thread-safe: the host's thread issues its own ticket while the relay's reactor admits joiners.
public final class LanAdmission: Sendable {
    private struct State {
        var players: [Int: (participantId: String, name: String)] = [:]
        var spectators: [String: String] = [:]
        var nextParticipant = 1
        var started = false
        /// Participants the relay has seen in the session (a place is freed only once its holder
        /// attached and then left: a joiner holding a fresh ticket keeps its place).
        var attached: Set<String> = []
    }

    /// The session id the room announces.
    public let sessionId: String
    /// The room's settings (passwords included; never sent back).
    public let settings: SessionSettings
    /// The relay endpoint joiners attach to.
    public let relayEndpoint: String
    private let signer: JoinTicketSigner
    private let ticketTtlMs: UInt64
    private let state = Mutex(State())

    /// Creates the admission for a LAN room hosted with `settings`, signing with `keyRing`.
    public init(sessionId: String, settings: SessionSettings, relayEndpoint: String, keyRing: TicketKeyRing,
                ticketTtlMs: UInt64 = 600_000) {
        self.sessionId = sessionId
        self.settings = settings
        self.relayEndpoint = relayEndpoint
        self.signer = JoinTicketSigner(keyRing: keyRing)
        self.ticketTtlMs = ticketTtlMs
    }

    /// The room name.
    public var roomName: String { settings.roomName }

    /// The sync parameters every ticket carries.
    public var params: SyncParams {
        SyncParams(inputSize: settings.inputSize, maxPlayers: settings.maxPlayers, frameDelay: settings.frameDelay,
                   frameRateMhz: settings.frameRateMhz, predictionWindow: settings.predictionWindow,
                   lagToleranceFrames: settings.lagToleranceFrames, spectatorDelayFrames: settings.spectatorDelayFrames,
                   checksumIntervalFrames: settings.checksumIntervalFrames,
                   maxSpectators: settings.spectatorsAllowed ? max(settings.maxSpectators, 1) : 0)
    }

    /// Players and spectators holding a place now.
    public var occupancy: (players: Int, spectators: Int) {
        state.withLock { ($0.players.count, $0.spectators.count) }
    }

    /// Whether the match has started.
    public var inProgress: Bool { state.withLock { $0.started } }

    /// What the relay's session holds now: whether the match runs, and the participants in it
    /// (attached, or away but still holding their place). Places of participants that were in
    /// it and are gone (left, kicked, timed out) are free for the next joiner.
    public func sessionChanged(running: Bool, present: Set<String>) {
        state.withLock { state in
            state.started = state.started || running
            for (slot, holder) in state.players where state.attached.contains(holder.participantId)
                && !present.contains(holder.participantId) {
                state.players[slot] = nil
            }
            for id in state.spectators.keys where state.attached.contains(id) && !present.contains(id) {
                state.spectators[id] = nil
            }
            state.attached.formUnion(present)
        }
    }

    /// The host's own ticket for slot 1.
    public func hostTicket(name: String) throws(ServiceError) -> JoinTicket {
        try admit(role: .player, name: name, preferredSlot: 1).ticket
    }

    /// Handles the requests a LAN relay answers for the coordinator; nil for anything else.
    public func handle(_ body: Envelope.Body) throws(ServiceError) -> Envelope.Body? {
        switch body {
        case .joinSessionRequest(let request):
            guard request.sessionId == sessionId else {
                throw ServiceError(.notFound, "This LAN host serves session '\(sessionId)', not '\(request.sessionId)'.")
            }
            try check(request)
            let (ticket, slot) = try admit(role: request.role == .spectator ? .spectator : .player, name: request.name,
                                           preferredSlot: Int(request.preferredSlot))
            return .joinSessionResponse(JoinSessionResponse(session: info(), participantId: ticket.participantId,
                                                            participantToken: [], ticket: ticket, slot: UInt32(slot)))
        case .getSessionRequest(let request):
            guard request.sessionId == sessionId else {
                throw ServiceError(.notFound, "This LAN host serves session '\(sessionId)'.")
            }
            return .sessionResponse(SessionResponse(session: info()))
        default:
            return nil
        }
    }

    private func check(_ request: JoinSessionRequest) throws(ServiceError) {
        let host = settings.content
        if request.role != .spectator {
            let content = request.content
            if host.crc32 != 0, content.crc32 != 0, host.crc32 != content.crc32 {
                throw ServiceError(.contentMismatch, "The same ROM is required: your content's CRC32 differs from the host's.")
            }
            if !host.md5.isEmpty, !content.md5.isEmpty, host.md5 != content.md5 {
                throw ServiceError(.contentMismatch, "The same ROM is required: your content's MD5 differs from the host's.")
            }
            if !host.coreId.isEmpty, !content.coreId.isEmpty, host.coreId != content.coreId {
                throw ServiceError(.coreMismatch, "The host runs core '\(host.coreId)', not '\(content.coreId)'.")
            }
            if !host.coreVersion.isEmpty, !content.coreVersion.isEmpty, host.coreVersion != content.coreVersion {
                throw ServiceError(.coreVersionMismatch, "The host runs core version '\(host.coreVersion)', not '\(content.coreVersion)'.")
            }
            try checkPassword(request.password, expected: settings.playPassword)
        } else {
            guard settings.spectatorsAllowed else { throw ServiceError(.spectatorsNotAllowed, "This room allows no spectators.") }
            try checkPassword(request.password, expected: settings.spectatePassword)
        }
    }

    private func checkPassword(_ given: String, expected: String) throws(ServiceError) {
        guard !expected.isEmpty else { return }
        guard Sodium.constantTimeEquals(Array(given.utf8), Array(expected.utf8)) else {
            throw ServiceError(.wrongPassword, "Wrong password.")
        }
    }

    private func admit(role: Role, name: String, preferredSlot: Int) throws(ServiceError) -> (ticket: JoinTicket, slot: Int) {
        let maxPlayers = Int(settings.maxPlayers)
        let maxSpectators = Int(params.maxSpectators)
        let admitted = state.withLock { state -> (String, Int)? in
            let participantId = "lan-\(state.nextParticipant)"
            if role == .spectator {
                guard state.spectators.count < maxSpectators else { return nil }
                state.nextParticipant += 1
                state.spectators[participantId] = name
                return (participantId, 0)
            }
            let free = (1 ... maxPlayers).filter { state.players[$0] == nil }
            guard let slot = free.contains(preferredSlot) ? preferredSlot : free.first else { return nil }
            state.nextParticipant += 1
            state.players[slot] = (participantId, name)
            return (participantId, slot)
        }
        guard let (participantId, slot) = admitted else {
            throw role == .spectator ? ServiceError(.spectatorsFull, "Every spectator place is taken.")
                : ServiceError(.roomFull, "Every player slot is taken.")
        }
        do {
            let ticket = try signer.issue(sessionId: sessionId, participantId: participantId, role: role, slot: UInt32(slot),
                                          relayId: "", relayEndpoint: relayEndpoint, params: params,
                                          name: String(name.prefix(64)), ttlMs: ticketTtlMs)
            return (ticket, slot)
        } catch {
            throw ServiceError(.internal, "The ticket could not be signed: \(error)")
        }
    }

    /// The session as a coordinator would describe it.
    public func info() -> SessionInfo {
        var blanked = settings
        blanked.playPassword = ""
        blanked.spectatePassword = ""
        let (players, spectators, started) = state.withLock { ($0.players, $0.spectators, $0.started) }
        let slots = (1 ... Int(settings.maxPlayers)).map { slot in
            Slot(slot: UInt32(slot), participant: players[slot].map {
                Participant(participantId: $0.participantId, name: $0.name, role: .player, slot: UInt32(slot),
                            isHost: slot == 1)
            })
        }
        return SessionInfo(sessionId: sessionId, state: started ? .running : .lobby, settings: blanked,
                           hasPassword: !settings.playPassword.isEmpty,
                           hasSpectatePassword: !settings.spectatePassword.isEmpty, slots: slots,
                           spectators: spectators.map { Participant(participantId: $0.key, name: $0.value, role: .spectator) },
                           hostParticipantId: players[1]?.participantId ?? "", relayEndpoint: relayEndpoint)
    }
}
