import Foundation

/// How a relay runs its sessions: identity, limits and timings. Every value has a default that
/// suits a 60 Hz game over the internet; `netplay-sync` exposes the important ones as flags.
public struct RelayConfiguration: Sendable {
    /// The relay's id; join tickets must name it (a LAN host's relay accepts tickets for "").
    public var relayId: String
    /// Where peers attach (reported to the coordinator), e.g. `tcp://203.0.113.5:7300`; empty:
    /// the endpoint the service bound.
    public var advertisedEndpoint: String
    /// The relay's PUB endpoint, reported to the coordinator ("" = none).
    public var eventsEndpoint: String = ""
    /// Region tag for the coordinator's relay choice.
    public var region: String = ""
    /// Sessions accepted at most (0 = no limit); beyond it attaches get `OVERLOADED`.
    public var maxSessions: Int = 0
    /// Frames of inputs kept per session for resends, spectators and late joiners (a power of two).
    public var historyFrames: Int = 4096
    /// How far beyond a slot's newest input a batch may start before it is refused as absurd,
    /// and how far past the confirmed frames (or, for a player back at a rebuilt relay, past
    /// the own inputs its history carries) a slot's inputs are taken: the history then holds
    /// every frame not confirmed yet. 64 ... history/2: an honest player runs a prediction
    /// window and an input delay (at most 48 frames) ahead.
    public var maxFramesAhead: Int = 600
    /// A late joiner whose first missing frame is more than this many frames behind the confirmed
    /// frame gets a state transfer instead of every input since.
    public var lateJoinReplayLimit: Int = 120
    /// A player silent this long is counted disconnected (its inputs are substituted meanwhile).
    public var silenceTimeoutMs: Int = 2_500
    /// A disconnected player is substituted this long, then its slot becomes `DISCONNECTED`.
    public var disconnectGraceMs: Int = 15_000
    /// Unacknowledged confirmed inputs are sent again after this long.
    public var resendIntervalMs: Int = 30
    /// A player on several paths (``NetplayWire/AttachRequest/additionalPath``) gets its
    /// partners' inputs of a frame in one message: a partner's input waits up to this long for
    /// the others' inputs of the same frame (0: each is forwarded as it comes). Every message is a
    /// segment on each connection, and each segment lost stalls its connection for a round trip;
    /// three partners forwarded apart kept each of a four-player peer's connections stalled
    /// almost half the time at 2 % loss, and all four at once often enough for 8-11-frame rollbacks.
    public var partnerHoldMs: Int = 8
    /// Time-sync hints go to each player this often.
    public var hintIntervalMs: Int = 200
    /// HUD statistics go to every peer (and telemetry) this often.
    public var statsIntervalMs: Int = 1_000
    /// A checksum frame is judged with the reports at hand this long after it was confirmed.
    public var checksumTimeoutMs: Int = 3_000
    /// A state transfer that makes no progress for this long is abandoned (and retried).
    public var transferTimeoutMs: Int = 5_000
    /// Largest state a transfer may carry.
    public var maxStateBytes: Int = 64 << 20
    /// Largest chunk accepted.
    public var maxChunkBytes: Int = 256 << 10
    /// A state transfer's target (of sync protocol 2) is sent at most this many bytes beyond the
    /// ones it acknowledged (at least one chunk): what a target that stops reading can leave
    /// queued at the relay. The relay keeps one copy of the state for all targets; 1 MiB moves
    /// about 9 MB/s over a 110 ms round trip. The reference is asked for chunks of at most a
    /// quarter of it, so that acknowledgements keep a window flowing.
    public var transferWindowBytes: Int = 1 << 20

    /// Bytes of states all transfers in flight may hold at once, across sessions (each keeps its
    /// state once; at least ``maxStateBytes``). A transfer whose state does not fit is refused
    /// (`OVERLOADED`) and its session tries again a second later.
    public var maxTransferBytes: Int = 256 << 20

    /// The slowest a state transfer may go, in bytes per second: a transfer of a state of `n`
    /// bytes has ``transferTimeoutMs`` plus `n` / this to reach every target, so a reference or
    /// a target sending or acknowledging a trickle cannot keep one open (and its state held,
    /// and the session's next transfers waiting) for hours. 256 KiB/s sends a 16 MiB state in
    /// a minute.
    public var transferMinRateBytes: Int = 256 << 10

    /// The chunk size a state request asks for.
    var transferChunkBytes: Int { max(64, min(maxChunkBytes, 65536, transferWindowBytes / 4)) }
    /// A session with nobody attached for this long ends.
    public var sessionIdleTimeoutMs: Int = 60_000
    /// An expired ticket still lets a participant the session knows resume within this long.
    public var resumeGraceMs: UInt64 = 600_000
    /// A session rebuilt after a restart waits this long for every slot's player to return
    /// before substituting for the missing ones, or taking their frames from the others' history.
    public var recoveryWaitMs: Int = 3_000
    /// A session rebuilt after a restart starts its timeline up to this many frames before the
    /// first returning peer's confirmed frame (as far as that peer can resend), so returning
    /// peers that had confirmed less catch up from inputs rather than from a state.
    public var recoveryBacklogFrames: Int = 600
    /// A session rebuilt after a restart takes resent history for this long (NetplayKit repeats
    /// it for 20 s on a lossy link); after that, only live inputs move it.
    public var recoveryHistoryMs: Int = 20_000
    /// A resumed attach's claim of confirmed frames counts, beyond the peer's own slot, up to
    /// the frames its progress proof certifies (``ProgressProof``, sent with every session
    /// statistics, every ``statsIntervalMs``) plus this much play at the session's frame rate:
    /// what a match can confirm between two proofs, with room for a lost one (``ResumeClaim``).
    public var progressAllowanceMs: Int = 3_000
    /// Where replay files go (nil: no replays).
    public var replayDirectory: URL?
    /// Checksums pending judgement kept per session at most.
    public var maxPendingChecksums: Int = 256
    /// A round trip the relay measures counts as at most this long (substitution deadlines wait
    /// half a player's round trip; the send-time estimates subtract it): a peer that answers
    /// slowly on purpose stretches nobody's deadline past the lag tolerance + half this.
    public var maxCountedRttMs: Int = 500
    /// The longest a join ticket lives (the coordinator issues 300 s, a LAN host 600 s): a
    /// participant the host removed stays refused at least this long, plus ``resumeGraceMs``,
    /// past the removal, so no ticket issued to it before can admit it again.
    public var maxTicketLifetimeMs: UInt64 = 600_000
    /// Removed participants remembered at most (the oldest-expiring are forgotten first).
    public var maxRevocations: Int = 10_000
    /// Where the revoked participants are kept across restarts (nil: in memory only), so a
    /// relay restarted on its data directory still refuses a kicked player's old tickets.
    public var revocationsFile: URL?
    /// Round trips the relay measures to every player (its own pings, answered by the peers)
    /// before a match starts, so deadlines, time sync and the start itself are right from the
    /// first frame (0: start at once, without measuring).
    public var startSyncSamples: Int = 3
    /// A start waits at most this long for those round trips (a peer that does not answer pings
    /// starts with no measurement).
    public var startSyncTimeoutMs: Int = 2_000
    /// A match from the host's state waits at most this long for every other participant to
    /// load it before frame 0; one that has not by then starts from a state transfer, as a
    /// late joiner does.
    public var startStateTimeoutMs: Int = 10_000
    /// Players waiting for the start are pinged this often (their round trip is known by then).
    public var lobbyPingIntervalMs: Int = 500
    /// With `SyncParams.frame_delay_auto`: a different input delay is adopted once the round
    /// trips have called for it this long without a break.
    public var frameDelayHoldMs: Int = 2_000
    /// Connections ("paths") one participant may hold at once, its primary included: further
    /// connections attached with `AttachRequest.additional_path` carry the same inputs, so one
    /// lost TCP segment holds back an input only when every path is blocked at once.
    public var maxPathsPerParticipant: Int = 4

    /// A configuration with defaults for everything but the identity.
    public init(relayId: String, advertisedEndpoint: String) {
        self.relayId = relayId
        self.advertisedEndpoint = advertisedEndpoint
    }

    /// Checks the values; returns the first problem as one line, or nil.
    public func validationError() -> String? {
        if relayId.utf8.count > 64 { return "the relay id must be at most 64 bytes" }
        if historyFrames < 256 || historyFrames > 1 << 20 { return "history frames must be 256 ... 1048576" }
        if maxFramesAhead < 64 || maxFramesAhead * 2 > historyFrames { return "max frames ahead must be 64 ... history/2" }
        if lateJoinReplayLimit < 0 { return "the late-join replay limit must be >= 0" }
        if recoveryBacklogFrames < 0 || recoveryBacklogFrames * 2 > historyFrames {
            return "the recovery backlog must be 0 ... history/2 frames"
        }
        if progressAllowanceMs < 2 * statsIntervalMs {
            return "the progress allowance must be at least twice the stats interval (\(2 * statsIntervalMs) ms): room for a lost proof"
        }
        if silenceTimeoutMs < 100 { return "the silence timeout must be >= 100 ms" }
        if resendIntervalMs < 1 || hintIntervalMs < 1 || statsIntervalMs < 1 { return "intervals must be >= 1 ms" }
        if partnerHoldMs < 0 || partnerHoldMs > 100 { return "the partner hold must be 0 ... 100 ms" }
        if maxCountedRttMs < 0 { return "the counted round trip cap must be >= 0 ms" }
        if maxRevocations < 1 { return "the revocation capacity must be >= 1" }
        if maxTicketLifetimeMs < 1_000 || maxTicketLifetimeMs > 86_400_000 { return "the longest ticket lifetime must be 1000 ... 86400000 ms" }
        if startSyncSamples < 0 || startSyncSamples > 16 { return "start sync samples must be 0 ... 16" }
        if startSyncTimeoutMs < 0 || startStateTimeoutMs < 0 || lobbyPingIntervalMs < 1 || frameDelayHoldMs < 0 { return "start sync timings must be >= 0 ms" }
        if maxPathsPerParticipant < 1 || maxPathsPerParticipant > 16 { return "the paths per participant must be 1 ... 16" }
        if transferWindowBytes < 256 || transferWindowBytes > 64 << 20 { return "the transfer window must be 256 ... 67108864 bytes" }
        if transferMinRateBytes < 1024 || transferMinRateBytes > 1 << 30 { return "the transfer minimum rate must be 1024 ... 1073741824 bytes per second" }
        if transferTimeoutMs < 1 { return "the transfer timeout must be >= 1 ms" }
        if maxStateBytes < 1 || maxStateBytes > 1 << 40 { return "the largest state must be 1 ... 1099511627776 bytes" }
        if maxTransferBytes < maxStateBytes { return "the transfer memory must hold the largest state (\(maxStateBytes) bytes)" }
        return nil
    }
}
