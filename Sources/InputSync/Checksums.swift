import NetplayService
import NetplayWire

/// The checksums players reported, per frame, until each frame is judged.
struct ChecksumBook {
    /// frame -> slot (0-based) -> checksum.
    var pending: [Int: [Int: UInt64]] = [:]
    /// When a frame's first report arrived.
    var firstReportMs: [Int: UInt64] = [:]
    /// Checksums everyone (or the majority) agreed on, by frame; recent ones only.
    var agreed: [Int: UInt64] = [:]
    /// The newest agreed frame.
    var lastAgreedFrame = -1

    mutating func remember(frame: Int, checksum: UInt64) {
        agreed[frame] = checksum
        lastAgreedFrame = max(lastAgreedFrame, frame)
        if agreed.count > 64, let oldest = agreed.keys.min() { agreed.removeValue(forKey: oldest) }
    }
}

extension RelaySession {
    /// A player's checksums of confirmed frames.
    func receive(_ report: NetplayWire.ChecksumReport, from participant: RelayPeer, now: UInt64) throws(ServiceError) {
        guard participant.isPlayer else {
            throw ServiceError(.permissionDenied, "Spectators report no checksums.")
        }
        guard Int(report.slot) == participant.slot else {
            throw ServiceError(.permissionDenied, "Slot \(report.slot) is not yours; you play slot \(participant.slot).",
                               field: "ChecksumReport.slot")
        }
        guard checksumInterval > 0 else {
            throw ServiceError(.invalidState, "This session compares no checksums (checksum interval 0).")
        }
        let slot = participant.slot - 1
        for entry in report.checksums {
            let frame = Int(entry.frame)
            guard frame % checksumInterval == 0 else {
                throw ServiceError(.badRequest, "Frame \(frame) is not a checksum frame (every \(checksumInterval)).",
                                   field: "ChecksumReport.checksums.frame")
            }
            guard frame <= timeline.newest + configuration.maxFramesAhead else {
                throw ServiceError(.badRequest, "Frame \(frame) is too far ahead for a checksum.",
                                   field: "ChecksumReport.checksums.frame")
            }
            // A checksum is of a confirmed frame's state: a report far past the confirmed frames
            // (a liar's) is not kept, so it cannot take the places honest reports need.
            guard frame >= resyncedAt[slot], frame > checksums.lastAgreedFrame - 600,
                  frame <= timeline.confirmed + checksumInterval else { continue }
            if checksums.pending[frame] == nil {
                guard checksums.pending.count < configuration.maxPendingChecksums else { continue }
                checksums.firstReportMs[frame] = now
            }
            checksums.pending[frame, default: [:]][slot] = entry.checksum
        }
        judgeChecksums(now: now)
    }

    /// Slots whose checksums count now: active, attached players not waiting for a state.
    private var judgingSlots: [Int] {
        players.indices.filter { index in
            guard let player = players[index], slotModes[index] == .active, player.isConnected,
                  player.awaitingTransfer == nil else { return false }
            return !(transfer?.awaits(player) ?? false)
        }
    }

    /// Judges every frame whose reports are all in (or timed out): agreement is remembered for
    /// the replay; a disagreement is a desync: notice, event, and a state transfer from a slot of
    /// the winning group (see ``winner(of:hostSlot:)``) to the others; with no winner, no transfer.
    func judgeChecksums(now: UInt64) {
        guard !checksums.pending.isEmpty else { return }
        let expected = Set(judgingSlots)
        for frame in checksums.pending.keys.sorted() {
            guard let reports = checksums.pending[frame] else { continue }
            let counted = reports.filter { expected.contains($0.key) && frame >= resyncedAt[$0.key] }
            let complete = !expected.isEmpty && expected.isSubset(of: Set(counted.keys))
            let timedOut = frame < timeline.confirmed
                && now &- (checksums.firstReportMs[frame] ?? now) >= UInt64(configuration.checksumTimeoutMs)
            guard complete || timedOut else { continue }
            checksums.pending.removeValue(forKey: frame)
            checksums.firstReportMs.removeValue(forKey: frame)
            guard !counted.isEmpty else { continue }
            judge(frame: frame, reports: counted, now: now)
        }
    }

    /// The checksum that wins a disagreement, or nil when nobody can be trusted over the rest.
    /// A strict majority wins. A tie for the most reports goes to the group holding the session's
    /// host (known from its ticket, not from its slot: slots can be swapped); a tie without the
    /// host decides nothing. So a lone dissenter never outvotes the host, and in a two-player
    /// match a player reporting made-up checksums cannot have its own state loaded into the
    /// host's game as a "resync". `hostStateWins` (the match started, or restarted, from the
    /// host's state): the host's group wins whatever the count, so peers that booted fresh
    /// never outvote the state the match runs from.
    static func winner(of groups: [UInt64: [Int]], hostSlot: Int?, hostStateWins: Bool = false) -> UInt64? {
        if hostStateWins, let hostSlot, let hosts = groups.first(where: { $0.value.contains(hostSlot) }) {
            return hosts.key
        }
        guard let most = groups.values.map(\.count).max() else { return nil }
        let leading = groups.filter { $0.value.count == most }
        if leading.count == 1 { return leading.first!.key }
        guard let hostSlot else { return nil }
        return leading.first { $0.value.contains(hostSlot) }?.key
    }

    /// The 0-based slot of the session's host, if a player holds it with a host ticket.
    var hostSlot: Int? { players.firstIndex { $0?.isHost == true } }

    private func judge(frame: Int, reports: [Int: UInt64], now: UInt64) {
        var groups: [UInt64: [Int]] = [:]
        for (slot, checksum) in reports { groups[checksum, default: []].append(slot) }
        if groups.count == 1 {
            checksums.remember(frame: frame, checksum: reports.values.first!)
            replay?.agreed(frame: frame, checksum: reports.values.first!)
            return
        }
        desyncs += 1
        let host = hostSlot ?? startStateSlot
        let checksumsBySlot = reports.keys.sorted().map { SlotChecksum(slot: UInt32($0 + 1), checksum: reports[$0]!) }
        guard let winning = Self.winner(of: groups, hostSlot: host, hostStateWins: startStateSlot != nil) else {
            // No majority and no host among them: the relay cannot tell who is right, so no
            // state moves (the players stay diverged, and are told so).
            let slots = reports.keys.sorted()
            let notice = DesyncNotice(sessionId: sessionId, frame: UInt32(frame), checksums: checksumsBySlot,
                                      divergedSlots: slots.map { UInt32($0 + 1) }, referenceSlot: 0, resyncStarted: false)
            sendToAll(.desyncNotice(notice), now: now)
            transport.publish(topic: "sync.desync", .desyncNotice(notice), severity: .warning,
                              message: "desync at frame \(frame): slots \(slots.map { $0 + 1 }) disagree with no majority and no host among them; no resync",
                              sessionId: sessionId)
            return
        }
        let majority = groups[winning]!
        checksums.remember(frame: frame, checksum: winning)
        replay?.agreed(frame: frame, checksum: winning)
        let diverged = reports.keys.filter { reports[$0] != winning }.sorted()
        // The host serves the state when it is in the winning group; else the lowest slot there.
        let connected = majority.filter { players[$0]?.isConnected == true }
        let reference = connected.contains { $0 == host } ? host : connected.min()
        // Not those given up on (stalled too often, or refused a state too large for their
        // protocol): another transfer would only make the reference upload it again.
        let targets = diverged.compactMap { players[$0] }.filter { $0.stalledTransfers <= Self.loadRetries }
        var started = false
        if transfer == nil, !targets.isEmpty, let reference, let source = players[reference] {
            started = beginTransfer(reason: .desync, reference: source, targets: targets, now: now, atLeastFrame: frame)
        }
        let notice = DesyncNotice(sessionId: sessionId, frame: UInt32(frame), checksums: checksumsBySlot,
                                  divergedSlots: diverged.map { UInt32($0 + 1) },
                                  referenceSlot: reference.map { UInt32($0 + 1) } ?? 0, resyncStarted: started)
        sendToAll(.desyncNotice(notice), now: now)
        transport.publish(topic: "sync.desync", .desyncNotice(notice), severity: .warning,
                          message: "desync at frame \(frame): slots \(diverged.map { $0 + 1 }) differ from slot \((reference ?? -1) + 1)",
                          sessionId: sessionId)
    }
}
