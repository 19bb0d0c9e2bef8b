import Foundation
import NetplayService
import NetplayWire

// RelayCore: the coordinator's control of the relay (closing sessions, disconnecting and
// removing participants).
extension RelayCore {
    // MARK: - Coordinator control

    /// Handles a control request of the coordinator (CloseRelaySessionRequest,
    /// DisconnectPeerRequest, AssignSlotsRequest) or of a LAN host; returns its reply.
    func control(_ body: Envelope.Body, now: UInt64) throws(ServiceError) -> Envelope.Body {
        switch body {
        case .closeRelaySessionRequest(let request):
            guard let session = sessions[request.sessionId] else {
                throw ServiceError(.notFound, "This relay serves no session '\(request.sessionId)'.")
            }
            endSession(session, reason: request.reason == .unspecified ? .sessionEnded : request.reason,
                       detail: request.message.isEmpty ? "closed by the coordinator" : request.message, now: now, report: false)
            return .ack(Ack(detail: "closed"))
        case .disconnectPeerRequest(let request):
            let reason = request.reason == .unspecified ? DetachReason.kicked : request.reason
            guard let session = sessions[request.sessionId],
                  let participant = session.participants.first(where: { $0.participantId == request.participantId }) else {
                // Gone for good (kicked, or left at the coordinator) before it ever attached here:
                // its tickets admit it no more all the same (``RelaySession/remove`` does this for
                // one that is here).
                guard reason == .kicked || reason == .leaving else {
                    throw ServiceError(.notFound, "No participant '\(request.participantId)' in session '\(request.sessionId)'.")
                }
                revoke(sessionId: request.sessionId, participantId: request.participantId, kicked: reason == .kicked)
                return .ack(Ack(detail: "revoked"))
            }
            peers.forget(participant)
            session.remove(participant, reason: reason,
                           detail: request.message.isEmpty ? "disconnected by the coordinator" : request.message, now: now)
            return .ack(Ack(detail: "disconnected"))
        case .assignSlotsRequest(let request):
            guard let session = sessions[request.sessionId] else {
                throw ServiceError(.notFound, "This relay serves no session '\(request.sessionId)'.")
            }
            try session.assign(request, routes: peers, now: now, wallNowMs: UnixTime.nowMs() &- verifier.clockSkewMs)
            return .ack(Ack(detail: "assigned"))
        default:
            throw ServiceError(.unknownRequest, "\(body.name) is no control request.")
        }
    }

    /// Closes sessions the coordinator says this relay should no longer serve; the peers of those
    /// in `moved` are told SESSION_MOVED (they ask the coordinator where the session went).
    public func close(sessionIds: [String], moved: Set<String> = [], now: UInt64) {
        for id in sessionIds {
            guard let session = sessions[id] else { continue }
            if moved.contains(id) {
                endSession(session, reason: .sessionMoved, detail: "the session moved to another relay", now: now, report: false)
            } else {
                endSession(session, reason: .sessionEnded, detail: "closed by the coordinator", now: now, report: false)
            }
        }
    }

    // MARK: - Removed participants

    /// Refuses every attach of `participantId` in `sessionId` from now until no ticket issued to
    /// it before could admit it (see ``revocationEnd(ticketExpiresAtUnixMs:nowUnixMs:configuration:)``),
    /// whether or not it is attached now (`kicked`: the host removed it; else it left, and gives
    /// way to kicks when the book is full). A kick or a leave (`DisconnectPeerRequest` with reason
    /// `KICKED` or `LEAVING`) does this by itself; this is for a removal pushed another way.
    /// Call it only for a request proven to come from the coordinator.
    public func revoke(sessionId: String, participantId: String, kicked: Bool = true) {
        let wallNow = UnixTime.nowMs()
        let seen = sessions[sessionId]?.participants.first { $0.participantId == participantId }?.ticketExpiresAtUnixMs ?? 0
        revocations.revoke(sessionId: sessionId, participantId: participantId,
                           untilUnixMs: Self.revocationEnd(ticketExpiresAtUnixMs: seen, nowUnixMs: wallNow,
                                                           configuration: configuration),
                           kicked: kicked, nowUnixMs: wallNow)
    }

    /// When a removal stops mattering: every ticket issued to the participant before it (the
    /// newest one the relay saw, or one issued just now and living the longest a ticket lives)
    /// has expired, and the grace in which an expired ticket still resumes is over.
    static func revocationEnd(ticketExpiresAtUnixMs: UInt64, nowUnixMs: UInt64, configuration: RelayConfiguration) -> UInt64 {
        max(ticketExpiresAtUnixMs, nowUnixMs &+ configuration.maxTicketLifetimeMs) &+ configuration.resumeGraceMs
    }
}
