import NetplayService
import NetplayWire

/// The coordinator requests end-to-end tests make as a client would: a session hosted, a ticket
/// for one more participant.
extension BlockingClient {
    /// Creates a session with `settings`, hosted by `hostName`; throws when none is created or it
    /// comes without the host's ticket.
    public func createSession(_ settings: SessionSettings, hostName: String) throws -> (created: CreateSessionResponse, ticket: JoinTicket) {
        guard case .createSessionResponse(let created) = try request(.createSessionRequest(
            CreateSessionRequest(settings: settings, hostName: hostName))), let ticket = created.ticket else {
            throw HarnessError("no session '\(settings.roomName)' for \(hostName)")
        }
        return (created, ticket)
    }

    /// Joins session `sessionId` as `role` under `name` with `content`: the ticket it gets.
    public func ticket(session sessionId: String, _ role: Role, _ name: String, content: ContentInfo) throws -> JoinTicket {
        guard case .joinSessionResponse(let joined) = try request(.joinSessionRequest(JoinSessionRequest(
            sessionId: sessionId, role: role, name: name, content: content))), let ticket = joined.ticket else {
            throw HarnessError("no ticket for \(name)")
        }
        return ticket
    }
}
