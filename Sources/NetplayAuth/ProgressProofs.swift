import NetplayWire

/// Signs and checks a relay's statements of how far a session's match had come
/// (``ProgressProof``): under every key of the cluster's key ring (the 8 newest at most),
/// `HMAC-SHA256(key, "netplay.progress.v1" | session_id | 0 | confirmed_frames as 4 bytes
/// big-endian)`, with the cluster secret that signs join tickets.
///
/// A relay sends its peers a fresh proof with their session statistics. A relay rebuilding the
/// session after a restart (or taking it over from another replica) reads the proof a returning
/// peer presents and bounds the peer's claim of confirmed frames by it: only a relay can have
/// signed it, and only for a frame its session had confirmed. Signed under every key, it checks
/// on a relay that holds any one of them: one not given a key just added to the cluster, and one
/// whose ring no longer holds a key retired while the match ran. The statement is about a fact
/// every peer in the session sees, so it is not secret; the label keeps it from ever passing for
/// a ticket or participant token signature.
public struct ProgressProofs: Sendable {
    /// The cluster secrets: all sign (the newest 8), any checks.
    public let keyRing: TicketKeyRing
    private static let label = Array("netplay.progress.v1".utf8)
    /// The most keys a proof is signed under (the wire's limit).
    public static let maxKeys = 8

    /// Creates a signer and checker over the cluster's key ring.
    public init(keyRing: TicketKeyRing) { self.keyRing = keyRing }

    /// The proof that session `sessionId` confirmed frames `0 ..< confirmedFrames`.
    public func proof(sessionId: String, confirmedFrames: UInt32) -> ProgressProof {
        let ids = keyRing.keys.keys.sorted(by: >).prefix(Self.maxKeys)
        return ProgressProof(confirmedFrames: confirmedFrames, macs: ids.map { id in
            KeyedMac(keyId: id, mac: Self.mac(key: keyRing.keys[id] ?? [], sessionId: sessionId, confirmedFrames: confirmedFrames))
        })
    }

    /// The frames `proof` certifies for session `sessionId`, or why it certifies nothing: it
    /// holds no MAC under a key of this ring, or one that does not match.
    public func check(_ proof: ProgressProof, sessionId: String) -> Result<Int, ProgressProofError> {
        var held = false
        for keyed in proof.macs {
            guard let key = keyRing.keys[keyed.keyId] else { continue }
            held = true
            let expected = Self.mac(key: key, sessionId: sessionId, confirmedFrames: proof.confirmedFrames)
            if Sodium.constantTimeEquals(expected, keyed.mac) { return .success(Int(proof.confirmedFrames)) }
        }
        return .failure(held ? .badSignature : .unknownKey(proof.macs.map(\.keyId)))
    }

    private static func mac(key: [UInt8], sessionId: String, confirmedFrames: UInt32) -> [UInt8] {
        let frames = withUnsafeBytes(of: confirmedFrames.bigEndian) { Array($0) }
        return Sodium.hmacSHA256(key: key, label, Array(sessionId.utf8), [0], frames)
    }
}

/// Why a ``ProgressProof`` certifies nothing.
public enum ProgressProofError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Signed only with keys this relay does not hold (these ids: another cluster's, or all
    /// retired).
    case unknownKey([UInt32])
    /// The signature does not match: forged, altered, or another session's.
    case badSignature

    public var description: String {
        switch self {
        case .unknownKey(let ids): "the progress proof is signed with keys \(ids), none of which this relay holds"
        case .badSignature: "the progress proof's signature does not match this session and frame"
        }
    }
}
