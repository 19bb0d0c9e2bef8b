import NetplayWire

/// Signs and checks a relay's statements of how far a session's match had come
/// (``ProgressProof``): `HMAC-SHA256(keys[key_id], "netplay.progress.v1" | session_id | 0 |
/// confirmed_frames as 4 bytes big-endian)`, with the cluster secret that signs join tickets.
///
/// A relay sends its peers a fresh proof with their session statistics. A relay rebuilding the
/// session after a restart (or taking it over from another replica) reads the proof a returning
/// peer presents and bounds the peer's claim of confirmed frames by it: only a relay can have
/// signed it, and only for a frame its session had confirmed. The statement is about a fact
/// every peer in the session sees, so it is not secret; the label keeps it from ever passing for
/// a ticket or participant token signature.
public struct ProgressProofs: Sendable {
    /// The cluster secrets: the newest signs, any checks (rotation keeps older proofs valid).
    public let keyRing: TicketKeyRing
    private static let label = Array("netplay.progress.v1".utf8)

    /// Creates a signer and checker over the cluster's key ring.
    public init(keyRing: TicketKeyRing) { self.keyRing = keyRing }

    /// The proof that session `sessionId` confirmed frames `0 ..< confirmedFrames`, signed with
    /// key `keyId` when the ring holds it (the session's tickets' key: one the whole cluster
    /// holds, where a relay given a new key first would sign with a key the others lack yet),
    /// otherwise with the ring's signing key.
    public func proof(sessionId: String, confirmedFrames: UInt32, keyId: UInt32? = nil) -> ProgressProof {
        let keyId = keyId.flatMap { keyRing.keys[$0] != nil ? $0 : nil } ?? keyRing.signingKeyId
        return ProgressProof(confirmedFrames: confirmedFrames, keyId: keyId,
                             mac: Self.mac(key: keyRing.keys[keyId] ?? [], sessionId: sessionId, confirmedFrames: confirmedFrames))
    }

    /// The frames `proof` certifies for session `sessionId`, or why it certifies nothing.
    public func check(_ proof: ProgressProof, sessionId: String) -> Result<Int, ProgressProofError> {
        guard let key = keyRing.keys[proof.keyId] else { return .failure(.unknownKey(proof.keyId)) }
        let expected = Self.mac(key: key, sessionId: sessionId, confirmedFrames: proof.confirmedFrames)
        guard Sodium.constantTimeEquals(expected, proof.mac) else { return .failure(.badSignature) }
        return .success(Int(proof.confirmedFrames))
    }

    private static func mac(key: [UInt8], sessionId: String, confirmedFrames: UInt32) -> [UInt8] {
        let frames = withUnsafeBytes(of: confirmedFrames.bigEndian) { Array($0) }
        return Sodium.hmacSHA256(key: key, label, Array(sessionId.utf8), [0], frames)
    }
}

/// Why a ``ProgressProof`` certifies nothing.
public enum ProgressProofError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Signed with a key this relay does not hold (rotated out, or another cluster's).
    case unknownKey(UInt32)
    /// The signature does not match: forged, altered, or another session's.
    case badSignature

    public var description: String {
        switch self {
        case .unknownKey(let id): "the progress proof is signed with key \(id), which this relay does not hold"
        case .badSignature: "the progress proof's signature does not match this session and frame"
        }
    }
}
