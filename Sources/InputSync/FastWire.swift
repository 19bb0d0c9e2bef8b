import NetplayWire

/// The relay's hand-written protobuf for its per-frame traffic: reading an `InputBatch`
/// envelope in place and writing `InputBroadcast` envelopes straight from the input timeline.
/// Byte-for-byte the schema's encoding (tests decode every message with NetplayWire); anything
/// unusual (unknown fields, values out of the schema's ranges) is left to the generic, validating
/// path, which also answers malformed frames.
enum FastWire {
    /// An `InputBatch` envelope read in place; `inputs` borrows the frame's bytes.
    struct Batch {
        var requestId: UInt64 = 0
        var slot: UInt32 = 0
        var startFrame: UInt32 = 0
        var inputSize: UInt32 = 0
        var inputs = UnsafeRawBufferPointer(start: nil, count: 0)
        var awaitedFrame: UInt32 = 0
        var currentFrame: UInt32 = 0
    }

    @inline(__always)
    private static func varint(_ bytes: UnsafeRawBufferPointer, _ offset: inout Int) -> UInt64? {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while offset < bytes.count && shift < 64 {
            let byte = bytes[offset]
            offset += 1
            result |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return result }
            shift += 7
        }
        return nil
    }

    /// Reads `frame` when it is exactly an Envelope holding an InputBatch whose fields are all in
    /// the schema's ranges; nil otherwise (the generic path then decodes and validates it).
    static func inputBatch(_ frame: UnsafeRawBufferPointer) -> Batch? {
        var offset = 0
        var batch = Batch()
        var sawBatch = false
        while offset < frame.count {
            guard let key = varint(frame, &offset) else { return nil }
            switch key {
            case 0x08:  // request_id
                guard let value = varint(frame, &offset) else { return nil }
                batch.requestId = value
            case 0x2A:  // input_batch
                guard !sawBatch, let length = varint(frame, &offset), length <= UInt64(frame.count - offset) else { return nil }
                let end = offset + Int(length)
                guard parseBatch(frame, from: offset, to: end, into: &batch) else { return nil }
                offset = end
                sawBatch = true
            default:
                return nil
            }
        }
        guard sawBatch, batch.slot <= 8, (1 ... 64).contains(batch.inputSize), batch.inputs.count <= 8192 else { return nil }
        return batch
    }

    private static func parseBatch(_ frame: UnsafeRawBufferPointer, from start: Int, to end: Int, into batch: inout Batch) -> Bool {
        let bytes = UnsafeRawBufferPointer(rebasing: frame[start ..< end])
        var offset = 0
        while offset < bytes.count {
            guard let key = varint(bytes, &offset) else { return false }
            if key == 0x22 {  // inputs
                guard let length = varint(bytes, &offset), length <= UInt64(bytes.count - offset) else { return false }
                batch.inputs = UnsafeRawBufferPointer(rebasing: bytes[offset ..< offset + Int(length)])
                offset += Int(length)
                continue
            }
            guard let value = varint(bytes, &offset), value <= UInt64(UInt32.max) else { return false }
            switch key {
            case 0x08: batch.slot = UInt32(value)
            case 0x10: batch.startFrame = UInt32(value)
            case 0x18: batch.inputSize = UInt32(value)
            case 0x28: batch.awaitedFrame = UInt32(value)
            case 0x30: batch.currentFrame = UInt32(value)
            default: return false
            }
        }
        return true
    }

    // MARK: Writing

    @inline(__always)
    static func varintSize(_ value: UInt64) -> Int {
        var size = 1
        var rest = value >> 7
        while rest != 0 {
            size += 1
            rest >>= 7
        }
        return size
    }

    @inline(__always)
    static func putVarint(_ out: inout [UInt8], _ value: UInt64) {
        var rest = value
        while rest >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: rest) | 0x80)
            rest >>= 7
        }
        out.append(UInt8(rest))
    }

    /// A run of one slot's inputs `from ..< to` taken from the timeline.
    struct Run {
        var slot: Int  // 0-based
        var from: Int
        var to: Int
        var withStatus: Bool
    }

    /// The encoded size of a PlayerInputs message for `run`.
    private static func runSize(_ run: Run, timeline: InputTimeline, statusBytes: Int) -> Int {
        let count = (run.to - run.from) * timeline.inputSize
        var size = 1 + varintSize(UInt64(run.slot + 1))
        size += 1 + varintSize(UInt64(run.from))
        size += 1 + varintSize(UInt64(count)) + count
        if statusBytes > 0 { size += 1 + varintSize(UInt64(statusBytes)) + statusBytes }
        return size
    }

    private static func writeRun(_ out: inout [UInt8], _ run: Run, timeline: InputTimeline, statusBytes: Int) {
        putVarint(&out, UInt64(run.slot + 1))  // preceded by the caller's key and length
        out.append(0x10)
        putVarint(&out, UInt64(run.from))
        out.append(0x1A)
        putVarint(&out, UInt64((run.to - run.from) * timeline.inputSize))
        timeline.appendInputs(slot: run.slot, from: run.from, to: run.to, into: &out)
        if statusBytes > 0 {
            out.append(0x22)
            putVarint(&out, UInt64(statusBytes))
            for frame in run.from ..< run.to { out.append(UInt8(truncatingIfNeeded: timeline.status(slot: run.slot, frame: frame).rawValue)) }
        }
    }

    /// Writes an Envelope holding an InputBroadcast into `out` (cleared first): `players`, every
    /// slot over the same frames (with statuses); or `provisional`, one slot's forwarded inputs in
    /// the players field of a non-authoritative broadcast; `forwarded` beside authoritative ones;
    /// and the cursors.
    static func inputBroadcast(into out: inout [UInt8], authoritative: Bool, timeline: InputTimeline, players: Run?,
                               provisional: Run?, forwarded: Run?, confirmedFrames: Int, awaitedInputFrame: Int) {
        out.removeAll(keepingCapacity: true)
        // Slots with a status other than `received` in the run (a bit each), so nothing allocates.
        var statusMask: UInt16 = 0
        var body = 0
        if authoritative { body += 2 }
        body += 1 + varintSize(UInt64(timeline.inputSize))
        if let players {
            for slot in 0 ..< timeline.slotCount {
                let run = Run(slot: slot, from: players.from, to: players.to, withStatus: true)
                let withStatus = timeline.hasStatus(slot: slot, from: run.from, to: run.to)
                if withStatus { statusMask |= 1 << UInt16(slot) }
                let size = runSize(run, timeline: timeline, statusBytes: withStatus ? run.to - run.from : 0)
                body += 1 + varintSize(UInt64(size)) + size
            }
        }
        var provisionalSize = 0
        if let provisional {
            provisionalSize = runSize(provisional, timeline: timeline, statusBytes: 0)
            body += 1 + varintSize(UInt64(provisionalSize)) + provisionalSize
        }
        var forwardedSize = 0
        if let forwarded {
            forwardedSize = runSize(forwarded, timeline: timeline, statusBytes: 0)
            body += 1 + varintSize(UInt64(forwardedSize)) + forwardedSize
        }
        if confirmedFrames > 0 { body += 1 + varintSize(UInt64(confirmedFrames)) }
        if awaitedInputFrame > 0 { body += 1 + varintSize(UInt64(awaitedInputFrame)) }
        out.reserveCapacity(body + 8)
        out.append(0x32)  // Envelope.input_broadcast
        putVarint(&out, UInt64(body))
        if authoritative { out.append(0x08); out.append(0x01) }
        out.append(0x10)
        putVarint(&out, UInt64(timeline.inputSize))
        if let players {
            for slot in 0 ..< timeline.slotCount {
                let run = Run(slot: slot, from: players.from, to: players.to, withStatus: true)
                let statusBytes = statusMask & (1 << UInt16(slot)) != 0 ? run.to - run.from : 0
                out.append(0x1A)
                putVarint(&out, UInt64(runSize(run, timeline: timeline, statusBytes: statusBytes)))
                out.append(0x08)
                writeRun(&out, run, timeline: timeline, statusBytes: statusBytes)
            }
        }
        if let provisional {
            out.append(0x1A)
            putVarint(&out, UInt64(provisionalSize))
            out.append(0x08)
            writeRun(&out, provisional, timeline: timeline, statusBytes: 0)
        }
        if confirmedFrames > 0 { out.append(0x20); putVarint(&out, UInt64(confirmedFrames)) }
        if awaitedInputFrame > 0 { out.append(0x28); putVarint(&out, UInt64(awaitedInputFrame)) }
        if let forwarded {
            out.append(0x32)
            putVarint(&out, UInt64(forwardedSize))
            out.append(0x08)
            writeRun(&out, forwarded, timeline: timeline, statusBytes: 0)
        }
    }
}
