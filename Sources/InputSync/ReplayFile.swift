import Foundation
import NetplayWire

/// Writes a session's replay: a sequence of frames, each a 4-byte big-endian length and an
/// Envelope — `ReplayHeader`, then `ReplayRecord`s of confirmed inputs (64 frames each) with
/// the checksums agreed meanwhile, then `ReplayFooter`. Records are appended as frames are
/// confirmed; the file is synced to disk when the session ends.
final class ReplayWriter {
    /// Frames per record.
    static let framesPerRecord = 64

    let url: URL
    private let handle: FileHandle
    private var recordedFrames: Int
    private let startFrame: Int
    private var pendingChecksums: [FrameChecksum] = []
    /// Why writing failed (nil: it has not); nothing more is written after a failure.
    private(set) var failure: String?

    init(directory: URL, sessionId: String, header: ReplayHeader, startFrame: Int) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let safe = Self.stem(of: sessionId)
        var candidate = directory.appendingPathComponent("\(safe).replay")
        var suffix = 1
        while FileManager.default.fileExists(atPath: candidate.path) {
            suffix += 1
            candidate = directory.appendingPathComponent("\(safe)-\(suffix).replay")
        }
        guard FileManager.default.createFile(atPath: candidate.path, contents: nil) else {
            throw ReplayError("cannot create \(candidate.path)")
        }
        url = candidate
        handle = try FileHandle(forWritingTo: candidate)
        self.startFrame = startFrame
        recordedFrames = startFrame
        write(.replayHeader(header))
    }

    /// Continues the replay a relay that died left behind (``LeftBehindReplay``): cut back to
    /// its last complete frame, with records appended from the first frame it lacks.
    init(continuing left: LeftBehindReplay) throws {
        url = left.url
        handle = try FileHandle(forUpdating: left.url)
        try handle.truncate(atOffset: UInt64(left.validBytes))
        try handle.seekToEnd()
        startFrame = Int(left.file.header.startFrame)
        recordedFrames = left.end
    }

    /// The file name stem of `sessionId`'s replays (characters outside letters, digits and
    /// `-_.` become `_`).
    static func stem(of sessionId: String) -> String {
        String(sessionId.map { $0.isLetter || $0.isNumber || "-_.".contains($0) ? $0 : "_" })
    }

    /// The first frame not recorded yet.
    var nextFrame: Int { recordedFrames }

    private func write(_ body: Envelope.Body) {
        guard failure == nil else { return }
        do {
            let bytes = try Envelope(body: body).encoded()
            var frame = [UInt8]()
            frame.reserveCapacity(bytes.count + 4)
            let length = UInt32(bytes.count)
            frame.append(UInt8(length >> 24))
            frame.append(UInt8((length >> 16) & 0xFF))
            frame.append(UInt8((length >> 8) & 0xFF))
            frame.append(UInt8(length & 0xFF))
            frame.append(contentsOf: bytes)
            try handle.write(contentsOf: frame)
        } catch {
            failure = "\(error)"
            markFailed()
        }
    }

    /// Renames the file `….replay.failed`: it lacks frames from here on, so no restarted relay
    /// may take it for the match's record (``LeftBehindReplay``), nor continue it.
    func markFailed() {
        var target = url.appendingPathExtension("failed")
        var suffix = 1
        while FileManager.default.fileExists(atPath: target.path) {
            suffix += 1
            target = url.appendingPathExtension("\(suffix).failed")
        }
        do {
            try FileManager.default.moveItem(at: url, to: target)
            failure = (failure ?? "") + " (kept as \(target.lastPathComponent))"
        } catch {
            // It stays under its name, without a footer: truncated to its header, it vouches for nothing.
            try? handle.truncate(atOffset: 0)
            failure = (failure ?? "") + " (cannot rename it: \(error.localizedDescription); emptied)"
        }
    }

    /// A checksum agreed at `frame`; written with the next record.
    func agreed(frame: Int, checksum: UInt64) {
        if pendingChecksums.count < 64 { pendingChecksums.append(FrameChecksum(frame: UInt32(frame), checksum: checksum)) }
    }

    /// Writes every complete record up to `confirmed` (frames `0 ..< confirmed` are final).
    func framesConfirmed(through confirmed: Int, timeline: InputTimeline, flushPartial: Bool = false) {
        while confirmed - recordedFrames >= Self.framesPerRecord
            || (flushPartial && confirmed > recordedFrames) || pendingChecksums.count >= 64 {
            let end = min(confirmed, recordedFrames + Self.framesPerRecord)
            let from = max(recordedFrames, timeline.oldest)
            let rows: (inputs: [UInt8], statuses: [NetplayWire.InputStatus]) = from < end ? timeline.rows(from: from, to: end) : ([], [])
            write(.replayRecord(ReplayRecord(startFrame: UInt32(from), frameCount: UInt32(max(end - from, 0)),
                                             inputs: rows.inputs, status: rows.statuses,
                                             checksums: pendingChecksums)))
            pendingChecksums.removeAll()
            recordedFrames = max(end, recordedFrames)
            if end <= from { break }
        }
    }

    /// Writes the footer and syncs the file to disk.
    func finish(footerReason: String, finalChecksum: UInt64, timeline: InputTimeline? = nil) {
        if let timeline { framesConfirmed(through: timeline.confirmed, timeline: timeline, flushPartial: true) }
        if !pendingChecksums.isEmpty {
            write(.replayRecord(ReplayRecord(startFrame: UInt32(recordedFrames), frameCount: 0,
                                             checksums: pendingChecksums)))
            pendingChecksums.removeAll()
        }
        write(.replayFooter(ReplayFooter(frameCount: UInt32(recordedFrames - startFrame),
                                         finalFrame: UInt32(max(recordedFrames - 1, 0)), finalChecksum: finalChecksum,
                                         endedAtUnixMs: UnixTime.nowMs(), reason: String(footerReason.prefix(256)))))
        try? handle.synchronize()
        try? handle.close()
    }
}

/// A replay file read back: the header, every confirmed input, the agreed checksums.
public struct ReplayFile: Sendable {
    /// The header (game, sync parameters, players).
    public var header: ReplayHeader
    /// The first frame recorded (read for its tail only: the first frame of that tail; the
    /// match's recording starts at the header's `start_frame`).
    public var startFrame: Int
    /// Frames recorded.
    public var frameCount: Int
    /// Frame-major inputs: for each frame, every slot's `inputSize` bytes.
    public var inputs: [UInt8]
    /// Per frame and slot, how the input came to be.
    public var statuses: [NetplayWire.InputStatus]
    /// Checksums agreed during the match, by frame (the state at the start of that frame).
    public var checksums: [Int: UInt64]
    /// The footer; nil when the relay stopped before writing it.
    public var footer: ReplayFooter?

    /// Slots per frame.
    public var slotCount: Int { Int(header.params.maxPlayers) }
    /// Bytes per input.
    public var inputSize: Int { Int(header.params.inputSize) }

    /// The input of `slot` (0-based) at `frame`.
    public func input(frame: Int, slot: Int) -> ArraySlice<UInt8> {
        let start = ((frame - startFrame) * slotCount + slot) * inputSize
        return inputs[start ..< start + inputSize]
    }

    /// The status of `slot` (0-based) at `frame`.
    public func status(frame: Int, slot: Int) -> NetplayWire.InputStatus {
        statuses[(frame - startFrame) * slotCount + slot]
    }

    /// Reads `url`. Throws ``ReplayError`` when it is not a replay file or is inconsistent; a
    /// file cut short after a complete record is accepted (no footer).
    public init(contentsOf url: URL) throws {
        self = try Self.read(url).file
    }

    /// Reads `url`; also returns how many bytes hold complete frames (a relay killed while
    /// writing leaves a partial one after them). With `lastFrames`, only the header, the footer
    /// and the records holding the file's last `lastFrames` frames (or more, to a record's
    /// start) are decoded, and ``startFrame`` is the first of those: what a relay rebuilding a
    /// session needs of a long match's file, for the cost of its tail (the records before it are
    /// only stepped over by their lengths, not checked).
    static func read(_ url: URL, lastFrames: Int? = nil) throws -> (file: ReplayFile, validBytes: Int) {
        let data: Data
        do { data = try Data(contentsOf: url, options: .alwaysMapped) } catch {
            throw ReplayError("cannot read \(url.path): \(error.localizedDescription)")
        }
        return try data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws -> (file: ReplayFile, validBytes: Int) in
            // Where each complete record lies, from the length prefixes alone.
            var records: [Range<Int>] = []
            var offset = 0
            while offset + 4 <= bytes.count {
                let length = Int(bytes[offset]) << 24 | Int(bytes[offset + 1]) << 16 | Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
                guard length <= WireLimits.default.maxFrameBytes, offset + 4 + length <= bytes.count else { break }
                records.append(offset + 4 ..< offset + 4 + length)
                offset += 4 + length
            }
            func decode(_ index: Int) throws -> Envelope {
                do {
                    return try Envelope(decoding: UnsafeRawBufferPointer(rebasing: bytes[records[index]]))
                } catch {
                    throw ReplayError("record at byte \(records[index].lowerBound - 4) is not a valid envelope: \(error)")
                }
            }
            guard !records.isEmpty else { throw ReplayError("\(url.lastPathComponent) does not start with a ReplayHeader") }
            var envelopes = [try decode(0)]
            if let lastFrames {
                // From the end back to the record that reaches `lastFrames` before the end.
                var tail: [Envelope] = []
                var frames = 0
                var index = records.count - 1
                while index > 0, frames < lastFrames {
                    let envelope = try decode(index)
                    if case .replayRecord(let record) = envelope.body { frames += Int(record.frameCount) }
                    tail.append(envelope)
                    index -= 1
                }
                envelopes += tail.reversed()
            } else {
                for index in 1 ..< records.count { envelopes.append(try decode(index)) }
            }
            return (try ReplayFile(url: url, envelopes: envelopes, tail: lastFrames != nil), offset)
        }
    }

    private init(url: URL, envelopes: [Envelope], tail: Bool = false) throws {
        guard case .replayHeader(let header)? = envelopes.first?.body else {
            throw ReplayError("\(url.lastPathComponent) does not start with a ReplayHeader")
        }
        self.header = header
        startFrame = Int(header.startFrame)
        if tail {
            for envelope in envelopes.dropFirst() {
                if case .replayRecord(let record) = envelope.body, record.frameCount > 0 {
                    startFrame = Int(record.startFrame)
                    break
                }
            }
        }
        frameCount = 0
        inputs = []
        statuses = []
        checksums = [:]
        footer = nil
        let rowBytes = Int(header.params.maxPlayers) * Int(header.params.inputSize)
        let slots = Int(header.params.maxPlayers)
        guard rowBytes > 0 else { throw ReplayError("the header's sync parameters are empty") }
        for envelope in envelopes.dropFirst() {
            switch envelope.body {
            case .replayRecord(let record):
                for checksum in record.checksums { checksums[Int(checksum.frame)] = checksum.checksum }
                let count = Int(record.frameCount)
                guard count > 0 else { continue }
                guard Int(record.startFrame) == startFrame + frameCount else {
                    throw ReplayError("record at frame \(record.startFrame) does not follow frame \(startFrame + frameCount - 1)")
                }
                guard record.inputs.count == count * rowBytes,
                      record.status.isEmpty || record.status.count == count * slots else {
                    throw ReplayError("record at frame \(record.startFrame) has the wrong size")
                }
                inputs += record.inputs
                statuses += record.status.isEmpty ? Array(repeating: .received, count: count * slots) : record.status
                frameCount += count
            case .replayFooter(let footer):
                self.footer = footer
            default:
                throw ReplayError("unexpected \(envelope.body.name) in a replay file")
            }
        }
    }
}

/// A replay file problem, one line.
public struct ReplayError: Error, CustomStringConvertible, Sendable {
    /// The reason.
    public let description: String
    /// Creates an error.
    public init(_ description: String) { self.description = description }
}
