import Foundation
import MemberwiseInit
import NetplayWire

/// Signs join tickets with the cluster secret (the coordinator's side).
///
/// `signature = HMAC-SHA256(keys[key_id], JoinTicket.encoded() with an empty signature)`; the
/// encoding is NetplayWire's deterministic protobuf-c encoding, so any holder of the secret
/// recomputes the same bytes.
@PublicMemberwiseInit
public struct JoinTicketSigner: Sendable {
    /// The secrets; new tickets use ``TicketKeyRing/signingKeyId``.
    public let keyRing: TicketKeyRing

    /// Returns `ticket` with `keyId`, a fresh 16-byte `nonce` (when it has none) and `signature`
    /// set. Throws when the ticket does not validate (a field too long, a required field missing).
    public func sign(_ ticket: JoinTicket) throws(WireError) -> JoinTicket {
        var signed = ticket
        signed.keyId = keyRing.signingKeyId
        if signed.nonce.isEmpty { signed.nonce = Sodium.randomBytes(16) }
        signed.signature = []
        let bytes = try signed.encoded()
        signed.signature = Sodium.hmacSHA256(key: keyRing.signingKey, bytes)
        return signed
    }

    /// Builds and signs a ticket valid from `nowUnixMs` for `ttlMs`.
    public func issue(sessionId: String, participantId: String, role: Role, slot: UInt32, relayId: String,
                      relayEndpoint: String, params: SyncParams, name: String, ttlMs: UInt64,
                      nowUnixMs: UInt64 = UnixTime.nowMs()) throws(WireError) -> JoinTicket {
        try sign(JoinTicket(sessionId: sessionId, participantId: participantId, role: role, slot: slot,
                            relayId: relayId, relayEndpoint: relayEndpoint, issuedAtUnixMs: nowUnixMs,
                            expiresAtUnixMs: nowUnixMs + ttlMs, params: params, name: name))
    }
}

/// Checks join tickets (the relay's side): signature under a known key, expiry, and the relay
/// it names. The relay admits nobody without a ticket that passes.
@PublicMemberwiseInit
public struct JoinTicketVerifier: Sendable {
    /// The secrets (the same cluster secret as the coordinator's).
    public let keyRing: TicketKeyRing
    /// Tolerated clock difference between coordinator and relay for `issued_at` in the future.
    public var clockSkewMs: UInt64 = 30_000
    /// The longest a ticket may live (`expires_at - issued_at`), or nil for any. A relay sets it
    /// to how long it remembers a removed participant: a ticket living longer would admit a
    /// kicked player again once the relay forgot the kick.
    public var maxLifetimeMs: UInt64? = nil

    /// Verifies `ticket`. With `relayId`, a ticket naming another relay is refused (a ticket for
    /// relay "" — a LAN host's in-process relay — is accepted by any relay only when `relayId`
    /// is nil). Returns the ticket unchanged when it passes.
    @discardableResult
    public func verify(_ ticket: JoinTicket, relayId: String? = nil,
                       nowUnixMs: UInt64 = UnixTime.nowMs()) throws(TicketError) -> JoinTicket {
        guard let key = keyRing.keys[ticket.keyId] else { throw .unknownKey(ticket.keyId) }
        guard ticket.signature.count == 32 else { throw .badSignature }
        var unsigned = ticket
        unsigned.signature = []
        let bytes: [UInt8]
        do { bytes = try unsigned.encoded() } catch { throw .malformed(error.description) }
        let expected = Sodium.hmacSHA256(key: key, bytes)
        guard Sodium.constantTimeEquals(expected, ticket.signature) else { throw .badSignature }
        // Only a genuine ticket's contents are worth reporting on.
        if let relayId, ticket.relayId != relayId { throw .wrongRelay(expected: relayId, actual: ticket.relayId) }
        guard ticket.issuedAtUnixMs <= nowUnixMs + clockSkewMs else { throw .notYetValid(issuedAtUnixMs: ticket.issuedAtUnixMs) }
        guard nowUnixMs < ticket.expiresAtUnixMs else { throw .expired(expiredAtUnixMs: ticket.expiresAtUnixMs) }
        if let maxLifetimeMs, ticket.expiresAtUnixMs > ticket.issuedAtUnixMs &+ maxLifetimeMs {
            throw .livesTooLong(lifetimeMs: ticket.expiresAtUnixMs &- ticket.issuedAtUnixMs, maxMs: maxLifetimeMs)
        }
        if ticket.role == .player, !(1...8).contains(ticket.slot) { throw .malformed("a player ticket needs a slot from 1 to 8") }
        if ticket.role == .spectator, ticket.slot != 0 { throw .malformed("a spectator ticket has slot 0") }
        if ticket.role == .unspecified { throw .malformed("the ticket names no role") }
        return ticket
    }
}

/// Why a join ticket was refused, with the `ErrorCode` to reply.
public enum TicketError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Signed with a key id this relay does not hold.
    case unknownKey(UInt32)
    /// The signature does not match the contents (forged or altered).
    case badSignature
    /// Past its expiry.
    case expired(expiredAtUnixMs: UInt64)
    /// Issued in the future beyond the tolerated clock skew.
    case notYetValid(issuedAtUnixMs: UInt64)
    /// Genuine, but for another relay.
    case wrongRelay(expected: String, actual: String)
    /// Genuine, but living longer than the verifier takes (``JoinTicketVerifier/maxLifetimeMs``).
    case livesTooLong(lifetimeMs: UInt64, maxMs: UInt64)
    /// Inconsistent fields.
    case malformed(String)

    /// `TICKET_EXPIRED` for an expired ticket, `TICKET_INVALID` otherwise.
    public var errorCode: ErrorCode {
        if case .expired = self { return .ticketExpired }
        return .ticketInvalid
    }

    public var description: String {
        switch self {
        case .unknownKey(let id): "The ticket is signed with unknown key \(id)."
        case .badSignature: "The ticket's signature does not match: it was forged or altered."
        case .expired(let at): "The ticket expired at \(at) ms; renew it with the coordinator."
        case .notYetValid(let at): "The ticket was issued in the future (\(at) ms); check the clocks."
        case .wrongRelay(let expected, let actual): "The ticket is for relay '\(actual)', not '\(expected)'."
        case .livesTooLong(let lifetime, let max):
            "The ticket lives \(lifetime / 1000) s; this relay takes tickets of at most \(max / 1000) s (the coordinator's --ticket-ttl must not exceed it)."
        case .malformed(let reason): "The ticket is malformed: \(reason)."
        }
    }

    /// The wire error reply.
    public var reply: ErrorReply { ErrorReply(code: errorCode, message: description) }
}

extension JoinTicket {
    /// Participant ids the ticket issuer gives a session's host begin with this. Ids are minted
    /// by the issuer (never chosen by a player) and signed into the ticket, so a relay can tell
    /// the host from its ticket alone; the relay trusts the host's checksums over a lone
    /// dissenter's (a two-player tie).
    public static let hostParticipantIdPrefix = "h-"

    /// Whether the ticket admits the session's host (see ``hostParticipantIdPrefix``).
    public var admitsHost: Bool { role == .player && participantId.hasPrefix(Self.hostParticipantIdPrefix) }
}
