import NetplayService
import NetplayWire

/// A state transfer in flight: a reference player's saved state, kept once and relayed chunk
/// by chunk to the targets (diverged players, late joiners, returning peers), each at its own
/// pace.
final class ActiveTransfer {
    let id: UInt32
    let reason: StateTransferReason
    let reference: RelayPeer
    /// Everyone it serves: begun for, not removed since (``deliveries`` says how far each got).
    var targets: [RelayPeer]
    let deliveries: [TransferDelivery]
    var frame: Int?
    var totalSize: UInt64 = 0
    var nextOffset: UInt64 = 0
    /// When the reference last sent a chunk (or the transfer began).
    var lastProgressMs: UInt64
    /// When it began: the reference has until ``stateDeadlineMs(timeoutMs:minRate:)`` to send
    /// the whole state.
    let beganMs: UInt64
    /// When the state became whole: the targets have until
    /// ``deliveryDeadlineMs(timeoutMs:minRate:)`` to take it.
    var completedMs: UInt64?
    /// The chunks received so far, in order; the last one ends the state.
    var chunks: [StateChunk] = []
    var complete: Bool { chunks.last?.last == true }
    /// The host's start state, kept for the replay header (a start transfer before frame 0).
    var collected: [UInt8] = []
    /// What it reserved of the relay's ``TransferBudget`` (its state's size, from its first chunk).
    var reservedBytes = 0

    init(id: UInt32, reason: StateTransferReason, reference: RelayPeer, targets: [RelayPeer], now: UInt64) {
        self.id = id
        self.reason = reason
        self.reference = reference
        self.targets = targets
        deliveries = targets.map { TransferDelivery(peer: $0, now: now) }
        lastProgressMs = now
        beganMs = now
    }

    /// When the reference must have sent the whole state: `timeoutMs` after the transfer began,
    /// plus the state's size at `minRate` bytes per second. Nil before the first chunk names
    /// the size.
    func stateDeadlineMs(timeoutMs: Int, minRate: Int) -> UInt64? {
        guard frame != nil else { return nil }
        return Self.allowance(from: beganMs, timeoutMs: timeoutMs, bytes: totalSize, minRate: minRate)
    }

    /// When every target must have been sent the whole state: as long again from when it
    /// became whole (a slow reference costs its targets nothing). Nil until then.
    func deliveryDeadlineMs(timeoutMs: Int, minRate: Int) -> UInt64? {
        guard let completedMs else { return nil }
        return Self.allowance(from: completedMs, timeoutMs: timeoutMs, bytes: totalSize, minRate: minRate)
    }

    /// `start` plus `timeoutMs` plus `bytes` at `minRate` bytes per second, saturating.
    static func allowance(from start: UInt64, timeoutMs: Int, bytes: UInt64, minRate: Int) -> UInt64 {
        let (scaled, overflow) = bytes.multipliedReportingOverflow(by: 1000)
        let sending = overflow ? UInt64.max : scaled / UInt64(max(minRate, 1))
        return start.addingSaturating(UInt64(max(timeoutMs, 0))).addingSaturating(sending)
    }

    /// Whether `peer` is a target still waiting for chunks of it (not sent the last one, not
    /// left): its checksums are no evidence until it has the state.
    func awaits(_ peer: RelayPeer) -> Bool {
        deliveries.contains { $0.peer === peer && !$0.finished } && targets.contains { $0 === peer }
    }
}

/// How far one target of a transfer got: the chunks sent to it (on the connection it had when
/// the transfer began) and the bytes it acknowledged.
final class TransferDelivery {
    let peer: RelayPeer
    let address: PeerAddress?
    /// Sent at most a window beyond what it acknowledged (see ``RelayPeer/pacesTransfers``).
    let paced: Bool
    var nextChunk = 0
    var sentBytes: UInt64 = 0
    var acknowledgedBytes: UInt64 = 0
    /// When it last acknowledged progress (or the transfer began).
    var lastProgressMs: UInt64
    /// It was sent the last chunk, or left the transfer (gone, attached again, stalled).
    var finished = false
    /// It was sent the last chunk.
    var delivered = false

    init(peer: RelayPeer, now: UInt64) {
        self.peer = peer
        address = peer.address
        paced = peer.pacesTransfers
        lastProgressMs = now
    }

    /// Whether its peer left the transfer: gone, removed from it, or attached again on another
    /// connection (the chunks went to the old one; a later transfer serves it).
    func left(_ transfer: ActiveTransfer) -> Bool {
        !peer.isConnected || peer.address != address || !transfer.targets.contains { $0 === peer }
    }

    /// Whether it owes an acknowledgement of chunks sent to it.
    var owesAcknowledgement: Bool { !finished && paced && sentBytes > acknowledgedBytes }
}

extension UInt64 {
    /// The sum, or `UInt64.max` where it would overflow.
    func addingSaturating(_ other: UInt64) -> UInt64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? .max : sum
    }
}
