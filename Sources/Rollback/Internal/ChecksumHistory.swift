/// Checksums of this peer's states at checksum frames, newest simulation wins.
///
/// A checksum frame is a session frame whose match frame (the frame plus the session's
/// ``SessionConfiguration/matchFrameOffset``) is a multiple of the interval; `phase` is that
/// offset modulo the interval, so every test below adds it before dividing.
@usableFromInline
struct ChecksumHistory {
    @usableFromInline var frames: [Frame]
    @usableFromInline var values: [UInt64]
    /// Frames between checksums; 0 records nothing.
    @usableFromInline let interval: Int
    /// The match frame offset modulo `interval` (0 when checksums are off).
    @usableFromInline let phase: Int
    /// The next checksum frame after the last one recorded or skipped (saves a division per frame).
    @usableFromInline var nextFrame: Frame

    init(interval: Int, matchFrameOffset: Int = 0, capacity: Int = 64) {
        self.interval = max(interval, 0)
        self.phase = Self.phase(interval: interval, matchFrameOffset: matchFrameOffset)
        self.frames = Array(repeating: nullFrame, count: capacity)
        self.values = Array(repeating: 0, count: capacity)
        self.nextFrame = .max
        if interval > 0 { nextFrame = firstChecksumFrame(atOrAfter: 0) }
    }

    /// `matchFrameOffset` modulo `interval`, in 0 ..< interval (0 when checksums are off).
    static func phase(interval: Int, matchFrameOffset: Int) -> Int {
        interval > 0 ? ((matchFrameOffset % interval) + interval) % interval : 0
    }

    @inlinable @inline(__always)
    func isChecksumFrame(_ frame: Frame) -> Bool { interval > 0 && (frame + phase) % interval == 0 }

    /// The first checksum frame at or after `frame` (checksums on).
    @inlinable @inline(__always)
    func firstChecksumFrame(atOrAfter frame: Frame) -> Frame {
        (frame + phase + interval - 1) / interval * interval - phase
    }

    /// Whether the simulation reaching `frame` must record a checksum. Cheap on the hot path:
    /// one comparison unless the simulation jumped (rollback) or reached a checksum frame.
    @inlinable @inline(__always)
    mutating func due(atReaching frame: Frame) -> Bool {
        if frame > nextFrame || frame <= nextFrame - interval {
            guard interval > 0 else { return false }
            realign(reaching: frame)
        }
        guard frame == nextFrame else { return false }
        nextFrame += interval
        return true
    }

    /// The first checksum frame after `frame` (`.max` when checksums are off): where a
    /// re-simulation starting at `frame` records its first checksum. A rollback goes back
    /// less than an interval or two, so this is ``nextFrame`` or a step or two before it.
    @inlinable @inline(__always)
    func nextChecksumFrame(after frame: Frame) -> Frame {
        guard interval > 0 else { return .max }
        var next = nextFrame
        if next > frame {
            if next - interval > frame { next -= interval }
            if next - interval <= frame { return next }
        }
        return firstChecksumFrame(atOrAfter: frame + 1)
    }

    /// A rollback or state load moved the simulation: the next checksum frame at or after
    /// `frame`. Rollbacks move back a few intervals at most, so stepping beats a division.
    @usableFromInline
    mutating func realign(reaching frame: Frame) {
        if frame > nextFrame {
            if frame - nextFrame > 4 * interval {
                nextFrame = firstChecksumFrame(atOrAfter: frame)
                return
            }
            while nextFrame < frame { nextFrame += interval }
        } else {
            if nextFrame - frame > 4 * interval {
                nextFrame = firstChecksumFrame(atOrAfter: frame)
                return
            }
            while nextFrame - interval >= frame { nextFrame -= interval }
        }
    }

    @inlinable
    mutating func record(frame: Frame, checksum: UInt64) {
        let index = ((frame + phase) / interval) % frames.count
        frames[index] = frame
        values[index] = checksum
    }

    func checksum(at frame: Frame) -> UInt64? {
        guard isChecksumFrame(frame), frame >= 0 else { return nil }
        let index = ((frame + phase) / interval) % frames.count
        return frames[index] == frame ? values[index] : nil
    }
}

/// Compares this peer's confirmed checksums with what remote endpoints report.
/// The checksums themselves live in the sync layer's ``ChecksumHistory``.
struct DesyncDetector {
    let interval: Int
    /// The next checksum frame to report once confirmed.
    private(set) var nextReportFrame: Frame
    private var pending: [(peer: PeerID, report: ChecksumReport)] = []

    /// Reports start at the first checksum frame after frame 0 (where the session starts).
    init(interval: Int, matchFrameOffset: Int = 0) {
        self.interval = interval
        guard interval > 0 else {
            nextReportFrame = .max
            return
        }
        let first = (interval - ChecksumHistory.phase(interval: interval, matchFrameOffset: matchFrameOffset)) % interval
        nextReportFrame = first > 0 ? first : interval
    }

    var enabled: Bool { nextReportFrame != .max }

    /// Called when `confirmedFrame` (inputs final up to it) moves; returns newly final local
    /// checksums and appends any mismatch with earlier remote reports. `validThrough` is the
    /// newest frame whose simulated state is up to date (the current frame, or the first
    /// frame a pending rollback will re-simulate).
    mutating func confirm(upTo confirmedFrame: Frame, validThrough: Frame, history: ChecksumHistory,
                          desyncs: inout [DesyncReport]) -> [ChecksumReport] {
        guard enabled else { return [] }
        var out: [ChecksumReport] = []
        while nextReportFrame - 1 <= confirmedFrame && nextReportFrame <= validThrough {
            let frame = nextReportFrame
            nextReportFrame += interval
            guard let local = history.checksum(at: frame) else { continue }
            let report = ChecksumReport(frame: frame, checksum: local)
            out.append(report)
            if !pending.isEmpty {
                pending.removeAll { entry in
                    guard entry.report.frame <= frame else { return false }
                    if entry.report.frame == frame && entry.report.checksum != local {
                        desyncs.append(DesyncReport(frame: frame, localChecksum: local,
                                                    remoteChecksum: entry.report.checksum, peer: entry.peer))
                    }
                    return true
                }
            }
        }
        return out
    }

    /// A remote report: compared now if the frame is final here, else kept until it is.
    mutating func receive(_ report: ChecksumReport, from peer: PeerID, history: ChecksumHistory,
                          desyncs: inout [DesyncReport]) {
        guard enabled, history.isChecksumFrame(report.frame) else { return }
        if report.frame < nextReportFrame {
            if let local = history.checksum(at: report.frame), local != report.checksum {
                desyncs.append(DesyncReport(frame: report.frame, localChecksum: local,
                                            remoteChecksum: report.checksum, peer: peer))
            }
            return
        }
        if pending.count >= 1024 { pending.removeFirst(pending.count - 1023) }
        pending.append((peer, report))
    }
}
