/// Mints and checks participant tokens: the secret a participant presents with later requests
/// (leave, kick, start, renew).
///
/// A token is `HMAC-SHA256(key, "netplay.participant.v1" | session_id | 0 | participant_id)`,
/// so the coordinator stores only its key: a retried create or join (same idempotency key) gets
/// the same token back and a restarted coordinator with the same key accepts old tokens. Whoever
/// holds the key can compute every token (the host's included), so the coordinator keeps it in
/// its own file, `participant-token.key` in the data directory, readable by the owner only
/// (0600), not in its database: a copy of `coordinator.sqlite` alone reveals no token. Checking
/// compares in constant time.
public struct ParticipantTokens: Sendable {
    private let key: [UInt8]
    private static let label = Array("netplay.participant.v1".utf8)

    /// Creates a minter over a secret key (at least 16 bytes; the coordinator keeps 32 random
    /// bytes in its 0600 key file).
    public init(key: [UInt8]) {
        precondition(key.count >= 16, "participant token key too short")
        self.key = key
    }

    /// The token of `participantId` in `sessionId` (32 bytes).
    public func token(sessionId: String, participantId: String) -> [UInt8] {
        Sodium.hmacSHA256(key: key, Self.label, Array(sessionId.utf8), [0], Array(participantId.utf8))
    }

    /// True when `token` is the one minted for this participant.
    public func check(_ token: [UInt8], sessionId: String, participantId: String) -> Bool {
        Sodium.constantTimeEquals(self.token(sessionId: sessionId, participantId: participantId), token)
    }
}
