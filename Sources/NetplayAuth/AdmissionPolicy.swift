import MemberwiseInit
import NetplayService
import NetplayWire

/// Why admission refused a join: the services' own error (a code, one sentence, the field), so
/// the coordinator and a LAN host reply with it unchanged and answer the same join the same way.
public typealias AdmissionDenial = ServiceError

/// Which of a room's passwords a join's password matched.
public enum PasswordMatch: Sendable, Equatable {
    /// No password was needed.
    case notNeeded
    /// The play password matched.
    case play
    /// The spectate password matched.
    case spectate
    /// Nothing matched.
    case none
}

/// A room as admission sees it: content, places, which passwords exist, who is banned.
@PublicMemberwiseInit
public struct AdmissionRoom: Sendable, Equatable {
    /// The session id.
    public var sessionId: String
    /// The host's content (a zero CRC32, empty MD5, core id or version is not checked).
    public var content: ContentInfo
    /// Player slots (1...maxPlayers).
    public var maxPlayers: UInt32
    /// Slots held now.
    public var takenSlots: Set<UInt32>
    /// Whether spectators may join.
    public var spectatorsAllowed: Bool
    /// Spectator places.
    public var maxSpectators: UInt32
    /// Spectator places held now.
    public var spectators: Int
    /// A play password is set.
    public var hasPlayPassword: Bool
    /// A spectate password is set.
    public var hasSpectatePassword: Bool
    /// Who may not join.
    public var bans: AdmissionBans = AdmissionBans()

    /// The lowest free slot, if any.
    public var firstFreeSlot: UInt32? { (1...max(1, maxPlayers)).first { !takenSlots.contains($0) } }
}

/// Who a host banned from a session. A ban binds to what a player cannot change by renaming: the
/// network address they joined from (when known) and their participant id, plus the name.
@PublicMemberwiseInit
public struct AdmissionBans: Sendable, Equatable {
    /// Banned display names.
    public var names: Set<String> = []
    /// Banned source addresses (`Request.source`).
    public var sources: Set<String> = []
    /// Banned participant ids (their tokens and tickets are revoked).
    public var participantIds: Set<String> = []

    /// Bans a participant: their name, their source address (unless unknown, "") and their id.
    public mutating func ban(name: String, source: String, participantId: String) {
        names.insert(name)
        if !source.isEmpty { sources.insert(source) }
        participantIds.insert(participantId)
    }

    /// True when a join under `name` from `source` is refused.
    public func refuses(name: String, source: String) -> Bool {
        names.contains(name) || (!source.isEmpty && sources.contains(source))
    }

    /// True when nothing is banned.
    public var isEmpty: Bool { names.isEmpty && sources.isEmpty && participantIds.isEmpty }
}

extension JoinSessionRequest {
    /// The role a join asks for as admission reads it: spectator, or player for anything else.
    public var admittedRole: Role { role == .spectator ? .spectator : .player }
}

/// What admission decided for a join before its password is verified.
public struct AdmissionPlan: Sendable, Equatable {
    /// Player or spectator.
    public let role: Role
    /// The room's passwords the given one is tried against, in order (empty: none needed).
    public let candidates: [PasswordMatch]
    /// The session whose password attempt was reserved.
    public let sessionId: String
    /// Whether one attempt of the session's password budget was reserved for this join.
    public let reserved: Bool
    /// The join's idempotency key and a keyed hash of its guess, for a keyed join that reserved
    /// a password attempt: what a copy is recognised by if this guess is refused.
    let guess: AdmissionPolicy.Guess?

    /// True when no password is needed.
    public var open: Bool { candidates.isEmpty }
}

/// The admission rules of a session, in one place for the coordinator and for a LAN host's
/// in-process relay: bans, content and core match, places, which password a role needs, and the
/// password attempt budget. The caller looks the session up, verifies the password (the
/// coordinator against Argon2id hashes, a LAN host against its plaintext) and assigns the place.
///
/// The budget is spent *before* a password is verified: ``admit(_:source:room:now:replay:reserve:)``
/// reserves an attempt, so no number of concurrent guesses gets more than the budget verified,
/// and once it is out every join needing a password, the right one included, answers
/// RATE_LIMITED. ``settle(_:match:now:)`` gives a correct password's attempt back.
///
/// A client on a lossy path sends a join again when its answer did not come, under the same
/// idempotency key. A copy of a keyed join refused for its password, arriving within
/// ``Limits/copyWindowSeconds`` of the refusal, gets the same refusal without spending another
/// attempt: the same guess is wrong again, and one mistyped password must not cost a player's
/// room several attempts. Only a keyed hash of a refused guess is kept, and only
/// ``copiesPerRefusal`` copies of it are answered so.
///
/// Not thread-safe (a value type): the coordinator keeps it on its reactor thread, a LAN host
/// under a lock.
public struct AdmissionPolicy: Sendable {
    /// Tunables.
    @PublicMemberwiseInit
    public struct Limits: Sendable, Equatable {
        /// Password attempts per session per minute (and as a burst); correct ones are given back.
        public var passwordAttemptsPerMinute: Double = 10
        /// A place handed out to a joiner that never attaches is freed after this long (LAN host;
        /// its ticket expires at the same time).
        public var pendingJoinTimeoutMs: UInt64 = 60_000
        /// How long a refused guess is remembered for its copies (a lobby resends a join after
        /// each of its timeouts, 3 × 2 s by default).
        public var copyWindowSeconds: Double = 10
    }

    /// A keyed join's idempotency key and the keyed hash of what it guessed.
    struct Guess: Sendable, Equatable {
        let key: String
        let hash: [UInt8]
    }

    /// A guess refused for its password, when, and how many of its copies may still be
    /// refused for nothing.
    struct Refusal: Sendable {
        let hash: [UInt8]
        let denial: AdmissionDenial
        let at: Double
        var copiesLeft = AdmissionPolicy.copiesPerRefusal
    }

    /// Copies of one refused guess answered for nothing (a lobby sends at most 3 tries a call, and
    /// a player retries a few times); beyond them a copy is a new guess again.
    public static let copiesPerRefusal = 8

    /// The limits in force.
    public let limits: Limits
    private var budget: RateLimiter<String>
    /// Refused guesses by session, then idempotency key; each session's are pruned when it
    /// refuses another, and dropped by ``forget(_:)``.
    private var refusals: [String: [String: Refusal]] = [:]
    /// Keys the hash of guesses, so none is kept in a readable form.
    private let guessKey = Sodium.randomBytes(32)

    /// Creates a policy.
    public init(limits: Limits = Limits()) {
        self.limits = limits
        let attempts = max(1, limits.passwordAttemptsPerMinute)
        budget = RateLimiter(ratePerSecond: attempts / 60, burst: attempts)
    }

    /// Checks a join up to its password, in this order: BANNED; a copy of a guess refused within
    /// ``Limits/copyWindowSeconds`` gets that refusal again (WRONG_PASSWORD), reserving nothing
    /// (``copiesPerRefusal`` copies at most);
    /// content (CONTENT_MISMATCH, CORE_MISMATCH, CORE_VERSION_MISMATCH; for spectators when they
    /// name any content); places (SPECTATORS_NOT_ALLOWED, SPECTATORS_FULL, BAD_REQUEST for a slot
    /// that does not exist, ROOM_FULL, SLOT_TAKEN); then,
    /// when a password is needed and `reserve` is set, reserves one attempt of the session's
    /// budget (RATE_LIMITED when it is out). A `replay` (a retried join of someone already in)
    /// skips content and places. `now` is monotonic seconds.
    public mutating func admit(_ request: JoinSessionRequest, source: String, room: AdmissionRoom, now: Double,
                               replay: Bool = false, reserve: Bool = true) throws(AdmissionDenial) -> AdmissionPlan {
        if room.bans.refuses(name: request.name, source: source) {
            throw AdmissionDenial(.banned, "You were banned from this session by the host.", field: "JoinSessionRequest.name")
        }
        if let refusal = refusal(copiedBy: request, sessionId: room.sessionId, now: now) {
            refusals[room.sessionId]?[request.idempotencyKey]?.copiesLeft -= 1
            throw refusal
        }
        let role = request.admittedRole
        if !replay {
            // A spectator's emulation affects nobody else: it is checked when it names content.
            if role == .player || request.content != ContentInfo() {
                try Self.checkContent(room: room.content, joiner: request.content)
            }
            try Self.checkPlace(room, role: role, preferredSlot: request.preferredSlot)
        }
        let candidates = Self.passwordCandidates(role: role, room: room)
        var reserved = false
        if !candidates.isEmpty, reserve {
            if case .limited(let retry) = budget.take(room.sessionId, now: now) {
                throw AdmissionDenial(.rateLimited, "Too many password attempts for this session; retry in \(retry) ms.",
                                      retryAfterMs: retry)
            }
            reserved = true
        }
        return AdmissionPlan(role: role, candidates: candidates, sessionId: room.sessionId, reserved: reserved,
                             guess: reserved ? guess(request) : nil)
    }

    /// Whether `request` is a copy of a guess refused within ``Limits/copyWindowSeconds`` (it
    /// would be refused again for nothing): a caller with its own per-request limits spends none
    /// of them on it.
    public func isCopyOfRefusedGuess(_ request: JoinSessionRequest, now: Double) -> Bool {
        refusal(copiedBy: request, sessionId: request.sessionId, now: now) != nil
    }

    /// A keyed join's key and the hash of its guess (name, role, password); nil without a key:
    /// only a keyed join can be a copy.
    private func guess(_ request: JoinSessionRequest) -> Guess? {
        guard !request.idempotencyKey.isEmpty else { return nil }
        let role = request.admittedRole
        return Guess(key: request.idempotencyKey,
                     hash: Sodium.hmacSHA256(key: guessKey, Array(request.name.utf8), [0], Array(request.password.utf8),
                                             [0, UInt8(truncatingIfNeeded: role.rawValue)]))
    }

    /// The refusal `request` copies, if any (its guess is hashed only when its key was refused).
    private func refusal(copiedBy request: JoinSessionRequest, sessionId: String, now: Double) -> AdmissionDenial? {
        guard !request.idempotencyKey.isEmpty, let refusal = refusals[sessionId]?[request.idempotencyKey],
              now - refusal.at < limits.copyWindowSeconds, refusal.copiesLeft > 0, let guess = guess(request),
              Sodium.constantTimeEquals(refusal.hash, guess.hash) else { return nil }
        return refusal.denial
    }

    /// Settles a plan once the password was verified: `match` is what it matched (`.none`: no
    /// candidate). A wrong password keeps its attempt spent and answers WRONG_PASSWORD (and a
    /// keyed one is remembered for its copies); a right
    /// one gives the attempt back and returns the match.
    @discardableResult
    public mutating func settle(_ plan: AdmissionPlan, match: PasswordMatch, now: Double) throws(AdmissionDenial) -> PasswordMatch {
        if plan.open { return .notNeeded }
        guard match != .none, plan.candidates.contains(match) else {
            let what = plan.role == .spectator ? "spectate" : "play"
            let denial = AdmissionDenial(.wrongPassword, "Wrong password to \(what) in this session.", field: "JoinSessionRequest.password")
            if let guess = plan.guess {
                var session = refusals[plan.sessionId, default: [:]]
                session = session.filter { now - $0.value.at < limits.copyWindowSeconds }
                session[guess.key] = Refusal(hash: guess.hash, denial: denial, at: now)
                refusals[plan.sessionId] = session
            }
            throw denial
        }
        if plan.reserved { budget.refund(plan.sessionId, now: now) }
        return match
    }

    /// Gives back a reserved attempt whose password was never verified (the join was refused
    /// for another reason first).
    public mutating func release(_ plan: AdmissionPlan, now: Double) {
        if plan.reserved { budget.refund(plan.sessionId, now: now) }
    }

    /// Refused guesses remembered now, over all sessions.
    var refusalsKept: Int { refusals.values.reduce(0) { $0 + $1.count } }

    /// Forgets a session's budget and refused guesses (the session is gone).
    public mutating func forget(_ sessionId: String) {
        budget.remove(sessionId)
        refusals[sessionId] = nil
    }

    // MARK: The rules

    /// Players need the play password; spectators the spectate password or the play password,
    /// or the play password when only that is set. Empty: no password needed.
    public static func passwordCandidates(role: Role, room: AdmissionRoom) -> [PasswordMatch] {
        if role != .spectator { return room.hasPlayPassword ? [.play] : [] }
        if room.hasSpectatePassword { return room.hasPlayPassword ? [.spectate, .play] : [.spectate] }
        return room.hasPlayPassword ? [.play] : []
    }

    /// Whether someone admitted with `match` may take a controller slot later.
    public static func mayPlay(room: AdmissionRoom, match: PasswordMatch) -> Bool {
        !room.hasPlayPassword || match == .play
    }

    /// The joiner's content must be the host's: every part the host names (CRC32 when not 0, MD5,
    /// core id, core version) must be equal. A joiner sending nothing does not skip the check.
    public static func checkContent(room host: ContentInfo, joiner content: ContentInfo) throws(AdmissionDenial) {
        let game = host.gameName.isEmpty ? "this room's game" : host.gameName
        if host.crc32 != 0, content.crc32 != host.crc32 {
            throw AdmissionDenial(.contentMismatch,
                                  "Same ROM required: \(game) has CRC32 \(hex32(host.crc32)), yours is \(hex32(content.crc32)).",
                                  field: "ContentInfo.crc32")
        }
        if !host.md5.isEmpty, content.md5 != host.md5 {
            throw AdmissionDenial(.contentMismatch, "Same ROM required: \(game) has a different MD5 than yours.", field: "ContentInfo.md5")
        }
        if !host.coreId.isEmpty, content.coreId != host.coreId {
            throw AdmissionDenial(.coreMismatch, "This room runs core '\(host.coreId)', you run '\(content.coreId)'.",
                                  field: "ContentInfo.core_id")
        }
        if !host.coreVersion.isEmpty, content.coreVersion != host.coreVersion {
            throw AdmissionDenial(.coreVersionMismatch,
                                  "This room runs \(host.coreId) version '\(host.coreVersion)', you run '\(content.coreVersion)'.",
                                  field: "ContentInfo.core_version")
        }
    }

    /// A free place for `role` (and `preferredSlot`, 0 = any).
    public static func checkPlace(_ room: AdmissionRoom, role: Role, preferredSlot: UInt32) throws(AdmissionDenial) {
        if role == .spectator {
            guard room.spectatorsAllowed else {
                throw AdmissionDenial(.spectatorsNotAllowed, "This session does not allow spectators.", field: "JoinSessionRequest.role")
            }
            guard room.spectators < Int(room.maxSpectators) else {
                throw AdmissionDenial(.spectatorsFull, "All \(room.maxSpectators) spectator places are taken.")
            }
            return
        }
        if preferredSlot > room.maxPlayers {
            throw AdmissionDenial(.badRequest, "Slot \(preferredSlot) does not exist in a \(room.maxPlayers)-player session.",
                                  field: "JoinSessionRequest.preferred_slot")
        }
        guard room.firstFreeSlot != nil else {
            throw AdmissionDenial(.roomFull, "All \(room.maxPlayers) player slots are taken.")
        }
        if preferredSlot != 0, room.takenSlots.contains(preferredSlot) {
            throw AdmissionDenial(.slotTaken, "Slot \(preferredSlot) is taken.", field: "JoinSessionRequest.preferred_slot")
        }
    }

    /// A CRC32 as eight uppercase hex digits.
    public static func hex32(_ value: UInt32) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, 8 - digits.count)) + digits
    }
}

/// Places handed to joiners that have not attached yet, so a join that never attaches does not
/// hold its place forever: ``expire(nowMs:)`` names the ones older than the timeout.
@PublicMemberwiseInit
public struct PendingJoins: Sendable, Equatable {
    /// How long a place waits for its holder to attach.
    public let timeoutMs: UInt64
    private var since: [String: UInt64] = [:]

    /// Participants waiting to attach.
    public var waiting: Set<String> { Set(since.keys) }

    /// `participantId` was handed a place at `nowMs`.
    public mutating func issued(_ participantId: String, nowMs: UInt64) {
        since[participantId] = nowMs
    }

    /// `participantId` attached (or left): no longer pending.
    public mutating func settled(_ participantId: String) {
        since[participantId] = nil
    }

    /// Removes and returns the participants whose wait ran out at `nowMs`.
    public mutating func expire(nowMs: UInt64) -> [String] {
        let late = since.filter { nowMs >= $0.value &+ timeoutMs }.map(\.key).sorted()
        for id in late { since[id] = nil }
        return late
    }
}
