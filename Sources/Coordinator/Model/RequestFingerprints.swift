import NetplayAuth
import NetplayService
import NetplayWire

/// What binds an idempotency key to the request it was first used with, so that a replay is
/// granted to that same request only: a create or join under a used key gets the earlier answer
/// (the session, the participant token) when it is the same request, and ALREADY_EXISTS when it
/// is another (the key is not a credential; cf. Stripe's idempotency keys).
///
/// "The same request" is the request with its idempotency key and relay round trips left out (a
/// retry measures those again; the rule of the service's copy memo too). Its fingerprint is
/// `HMAC-SHA256(key, "netplay.request.v1" | kind | encoding)`, stored with the session (create)
/// or the participant (join). It covers the passwords, so it is keyed: under the
/// participant-token key, kept in its own 0600 file and never in the database, so a copy of the
/// database cannot test password guesses against it. A session or participant stored without one
/// (by a coordinator before this rule) grants no replay.
struct RequestFingerprints: Sendable {
    /// The fewest bytes a non-empty idempotency key has: a replay is known by its key, so a short
    /// (guessable) one is refused. NetplayKit sends UUID strings (36 bytes).
    static let minimumKeyBytes = 16
    private static let label = Array("netplay.request.v1".utf8)
    private let key: [UInt8]

    /// Fingerprints under `key` (the participant-token key).
    init(key: [UInt8]) {
        self.key = key
    }

    /// The fingerprint of a keyed create (nil without a key: there is nothing to bind).
    func of(_ request: CreateSessionRequest) throws(ServiceError) -> [UInt8]? {
        var same = request
        same.idempotencyKey = ""
        same.relayRtts = []
        return try fingerprint(kind: 1, same, key: request.idempotencyKey, field: "CreateSessionRequest")
    }

    /// The fingerprint of a keyed join (nil without a key).
    func of(_ request: JoinSessionRequest) throws(ServiceError) -> [UInt8]? {
        var same = request
        same.idempotencyKey = ""
        same.relayRtts = []
        return try fingerprint(kind: 2, same, key: request.idempotencyKey, field: "JoinSessionRequest")
    }

    private func fingerprint(kind: UInt8, _ message: some WireMessage, key idempotencyKey: String,
                             field: String) throws(ServiceError) -> [UInt8]? {
        guard !idempotencyKey.isEmpty else { return nil }
        do {
            return Sodium.hmacSHA256(key: key, Self.label, [kind], try message.encoded())
        } catch {
            throw ServiceError(.badRequest, "The request cannot be encoded: \(error).", field: field)
        }
    }

    /// BAD_REQUEST when `key` is set but shorter than ``minimumKeyBytes`` (`field`: its path).
    static func checkKey(_ key: String, field: String) throws(ServiceError) {
        guard key.isEmpty || key.utf8.count >= minimumKeyBytes else {
            throw ServiceError(.badRequest, "An idempotency key needs at least \(minimumKeyBytes) bytes and should be random (a UUID).",
                               field: field)
        }
    }

    /// ALREADY_EXISTS unless `fingerprint` is `stored`, the fingerprint of the request that first
    /// used the key (nil: none was stored, which grants no replay).
    static func requireSame(_ stored: [UInt8]?, as fingerprint: [UInt8]?, field: String) throws(ServiceError) {
        guard let stored, let fingerprint, Sodium.constantTimeEquals(stored, fingerprint) else {
            throw ServiceError(.alreadyExists, "This idempotency key was used for a different request.", field: field)
        }
    }
}
