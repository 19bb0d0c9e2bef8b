import Foundation
import NetplayAuth
import Synchronization

/// The idempotency keys of a lobby's creates and joins that went unanswered, so that when the
/// player tries again the coordinator knows the retry for the same request.
///
/// A create or join whose reply never came may still have gone through: the coordinator made the
/// session, or gave the seat, and only the answer was lost. Tried again under a fresh key, it
/// would make a second session (the first one is left in the lobby as a room nobody hosts, and
/// counts against the address's room limit until it idles out) or take a second seat. Tried again
/// under the first key, the coordinator answers with what it already did (a fresh ticket for it).
///
/// "The same request" is the same service endpoint and the same request with its key and relay
/// measurements left out; it is remembered by a keyed hash, so a join's password is not kept. A
/// key is forgotten once its request is answered (either way: a success, or the service's
/// refusal), after ``lifetime``, or when more than ``limit`` are kept. Two calls of the same
/// request at once, neither a retry, each draw a key of their own; when both go unanswered, the
/// key kept is that of the one that gave up first. A LAN host answers a known key the same way
/// (``InputSync/LanAdmission``), while the seat is held.
final class RetryKeys: Sendable {
    /// Unanswered requests remembered at most (the oldest is forgotten first).
    static let limit = 16
    /// The process's store, which every ``NetplayLobby`` uses.
    static let shared = RetryKeys()
    /// How long a key is offered to retries: the coordinator's default lobby expiry, after which
    /// a session nobody joined is gone anyway.
    static let lifetime: Duration = .seconds(1_800)

    private struct Kept {
        let key: String
        let since: ContinuousClock.Instant
    }

    /// Keys the hash, so the remembered requests say nothing of what they held.
    private let hashKey = Sodium.randomBytes(32)
    private let kept = Mutex<[[UInt8]: Kept]>([:])

    /// Runs `call` with the key of an earlier unanswered `request` to `endpoint` (`request`: its
    /// encoding with an empty key and no measurements), or with a new key. The key is kept when
    /// the call ends unanswered (UNAVAILABLE, or TIMEOUT waiting for a host's approval) and
    /// forgotten when it ends otherwise.
    func withKey<T>(endpoint: String, request: [UInt8], now: ContinuousClock.Instant = .now,
                    _ call: (String) throws -> T) throws -> T {
        let fingerprint = Sodium.hmacSHA256(key: hashKey, Array(endpoint.utf8), [0], request)
        let key = kept.withLock { kept in
            kept = kept.filter { now - $0.value.since < Self.lifetime }
            return kept[fingerprint]?.key
        } ?? UUID().uuidString
        do {
            let result = try call(key)
            kept.withLock { $0[fingerprint] = nil }
            return result
        } catch let error as NetplayError where error.code == .unavailable || error.code == .timeout {
            kept.withLock { kept in
                kept[fingerprint] = kept[fingerprint] ?? Kept(key: key, since: now)
                if kept.count > Self.limit, let oldest = kept.min(by: { $0.value.since < $1.value.since })?.key {
                    kept[oldest] = nil
                }
            }
            throw error
        } catch {
            kept.withLock { $0[fingerprint] = nil }
            throw error
        }
    }

    /// How many keys are kept (tests).
    var count: Int { kept.withLock { $0.count } }
}
