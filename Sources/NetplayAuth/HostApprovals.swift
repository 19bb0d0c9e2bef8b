import NetplayService
import NetplayWire

/// Joins waiting for their host's decision in one room whose host approves joiners
/// (`SessionSettings.approve_joiners`): the coordinator keeps one per session, a LAN host one
/// for its room. Soft state: a restart forgets it, and the joiners simply ask again.
///
/// A join is known by the joiner's idempotency key (random, chosen by the joiner, sent only
/// over its own link): the first ask files it and answers AWAITING_HOST; each ask with the same
/// key (and the same request but for its relay round trips: ALREADY_EXISTS otherwise) keeps it
/// alive and gets the decision once there is one. The host sees the waiting joins
/// by a `pending_id` that is not the key, so nobody can answer for the joiner. A join nobody
/// asked about for ``askTimeoutMs`` (the joiner gave up), or waiting longer than ``maxWaitMs``, is
/// dropped; so is a decision not picked up within ``askTimeoutMs``.
public struct HostApprovals: Sendable {
    /// Where a join stands.
    public enum Decision: Sendable, Equatable {
        /// The host has not decided.
        case waiting
        /// The host admitted it: the join goes ahead.
        case approved
        /// The host refused it, with its reason.
        case refused(String)
    }

    private struct Entry: Sendable {
        var pendingId: String
        var key: String
        var name: String
        var role: Role
        var requestedSlot: UInt32
        /// The request's HMAC under the book's own key, idempotency key and round trips left out.
        var fingerprint: [UInt8]
        var requestedAtUnixMs: UInt64
        /// The address it was filed from ("" unknown).
        var source: String
        var firstAskedMs: UInt64
        var lastAskedMs: UInt64
        var decision: Decision
    }

    /// A join nobody asked about for this long is dropped (milliseconds).
    public let askTimeoutMs: UInt64
    /// A join waits this long at most (milliseconds).
    public let maxWaitMs: UInt64
    /// Joins waiting at most (beyond: RATE_LIMITED).
    public let capacity: Int
    /// Joins one address may have waiting at most (beyond: RATE_LIMITED), so one address cannot
    /// fill the host's list (and every real joiner's place on it) with names of its choosing.
    public let perSource: Int
    private var entries: [Entry] = []
    private var nextId = 1
    /// Keys the fingerprints (they cover passwords); random per book, never stored.
    private let fingerprintKey = Sodium.randomBytes(32)

    /// An empty book with these limits.
    public init(askTimeoutMs: UInt64 = 15_000, maxWaitMs: UInt64 = 180_000, capacity: Int = 64, perSource: Int = 4) {
        self.askTimeoutMs = askTimeoutMs
        self.maxWaitMs = maxWaitMs
        self.capacity = capacity
        self.perSource = perSource
    }

    /// The join `request` asks about (known by its idempotency key; `source` the address it came
    /// from, "" unknown; `nowMs` monotonic, `unixMs` the wall clock): filed on its first ask.
    /// Returns normally when the host approved it (the caller admits it and calls
    /// ``admitted(key:)``); otherwise throws AWAITING_HOST (retry after a moment),
    /// REFUSED_BY_HOST (a refusal is told once, then forgotten), RATE_LIMITED (too many waiting,
    /// or ``perSource`` from its address) or BAD_REQUEST (no idempotency key to know it by).
    public mutating func ask(_ request: JoinSessionRequest, source: String, nowMs: UInt64, unixMs: UInt64) throws(ServiceError) {
        expire(nowMs: nowMs)
        let key = request.idempotencyKey
        guard !key.isEmpty else {
            throw ServiceError(.badRequest, "This room's host approves each joiner: the join needs an idempotency key to ask again with.",
                               field: "JoinSessionRequest.idempotency_key")
        }
        let name = String(request.name.prefix(64))
        let role = request.admittedRole
        let fingerprint = try fingerprint(of: request)
        if let index = entries.firstIndex(where: { $0.key == key }) {
            // The host decides on a join: the key asks only about that very request (it is not
            // a credential another joiner could use to come in on an approval).
            guard Sodium.constantTimeEquals(entries[index].fingerprint, fingerprint) else {
                throw ServiceError(.alreadyExists, "This idempotency key was used for another join (another name, role, slot, password or game).",
                                   field: "JoinSessionRequest.idempotency_key")
            }
            entries[index].lastAskedMs = nowMs
            switch entries[index].decision {
            case .approved: return
            case .refused(let reason):
                entries.remove(at: index)
                throw ServiceError(.refusedByHost, reason.isEmpty ? "The host refused your join." : "The host refused your join: \(reason)")
            case .waiting: throw Self.awaiting
            }
        }
        guard entries.count < capacity else {
            throw ServiceError(.rateLimited, "Too many joins wait for this host's decision; retry later.", retryAfterMs: 5_000)
        }
        guard source.isEmpty || entries.lazy.filter({ $0.source == source }).count < perSource else {
            throw ServiceError(.rateLimited, "\(perSource) joins from your address already wait for this host's decision; retry later.",
                               retryAfterMs: 5_000)
        }
        let pendingId = "j-\(nextId)-" + Hex.encode(Sodium.randomBytes(4))
        nextId += 1
        entries.append(Entry(pendingId: pendingId, key: key, name: name, role: role, requestedSlot: request.preferredSlot,
                             fingerprint: fingerprint, requestedAtUnixMs: unixMs, source: source, firstAskedMs: nowMs, lastAskedMs: nowMs, decision: .waiting))
        throw Self.awaiting
    }

    /// What tells this join from any other: the request but for its idempotency key and relay
    /// round trips (a retry measures those again).
    private func fingerprint(of request: JoinSessionRequest) throws(ServiceError) -> [UInt8] {
        var same = request
        same.idempotencyKey = ""
        same.relayRtts = []
        do {
            return Sodium.hmacSHA256(key: fingerprintKey, Array("netplay.approval.v1".utf8), try same.encoded())
        } catch {
            throw ServiceError(.badRequest, "The join cannot be encoded: \(error).", field: "JoinSessionRequest")
        }
    }

    private static let awaiting = ServiceError(.awaitingHost, "The host has not decided on your join yet; ask again shortly.",
                                               retryAfterMs: 500)

    /// Whether `request` asks about a join filed before (its asks cost no join budget): its
    /// idempotency key and the rest of the request both match. A filed key with another request
    /// (another password, say) is a new join, and pays as one.
    public func isFiled(_ request: JoinSessionRequest) -> Bool {
        guard !request.idempotencyKey.isEmpty, let entry = entries.first(where: { $0.key == request.idempotencyKey }),
              let fingerprint = try? fingerprint(of: request) else { return false }
        return Sodium.constantTimeEquals(entry.fingerprint, fingerprint)
    }

    /// The approved join with this key went through: forgotten.
    public mutating func admitted(key: String) {
        entries.removeAll { $0.key == key && $0.decision == .approved }
    }

    /// The host's decision on `pendingId`: NOT_FOUND when no such join waits (dropped, or
    /// already decided).
    public mutating func decide(_ pendingId: String, approve: Bool, reason: String, nowMs: UInt64) throws(ServiceError) {
        expire(nowMs: nowMs)
        guard let index = entries.firstIndex(where: { $0.pendingId == pendingId && $0.decision == .waiting }) else {
            throw ServiceError(.notFound, "No join '\(pendingId)' waits for a decision (the joiner gave up, or it was decided).",
                               field: "DecideJoinRequest.pending_id")
        }
        entries[index].decision = approve ? .approved : .refused(String(reason.prefix(256)))
        // The decision waits for the joiner's next ask, as long as a join waits for one.
        entries[index].lastAskedMs = nowMs
    }

    /// The joins waiting for a decision, oldest first.
    public mutating func waiting(nowMs: UInt64) -> [PendingJoin] {
        expire(nowMs: nowMs)
        return entries.filter { $0.decision == .waiting }.map {
            PendingJoin(pendingId: $0.pendingId, name: $0.name, role: $0.role, requestedSlot: $0.requestedSlot,
                        requestedAtUnixMs: $0.requestedAtUnixMs)
        }
    }

    /// Whether nothing is filed.
    public var isEmpty: Bool { entries.isEmpty }

    /// Drops joins nobody asked about for ``askTimeoutMs`` or filed more than ``maxWaitMs`` ago.
    public mutating func expire(nowMs: UInt64) {
        entries.removeAll { nowMs &- $0.lastAskedMs > askTimeoutMs || nowMs &- $0.firstAskedMs > maxWaitMs }
    }
}
