import NetplayWire

/// The relay's per-frame wire work on NetplayWire's protobuf-c hot path: batches read through a
/// ``HotPathDecoder`` view and `InputBroadcast` envelopes packed by an ``InputBroadcastPacker``
/// straight from the input timeline. protobuf-c encodes and decodes everything; nothing here
/// knows the wire format.
enum RelayWire {
    /// An `InputBatch`'s fields; `inputs` borrows the decoded frame (or the Swift value's bytes).
    struct Batch {
        var requestId: UInt64 = 0
        var slot: UInt32 = 0
        var startFrame: UInt32 = 0
        var inputSize: UInt32 = 0
        var inputs = UnsafeRawBufferPointer(start: nil, count: 0)
        var awaitedFrame: UInt32 = 0
        var currentFrame: UInt32 = 0
    }

    /// A run of one slot's inputs `from ..< to` taken from the timeline.
    struct Run {
        var slot: Int  // 0-based
        var from: Int
        var to: Int
    }

    /// Packs an Envelope holding an InputBroadcast: `players`, every slot over the frames
    /// `players` (with statuses where any is not `received`); or `provisional`, other slots'
    /// forwarded inputs in the players field of a non-authoritative broadcast; `forwarded` beside
    /// authoritative ones (one run per slot in either); and the cursors. The bytes stay valid
    /// until the packer's next message; nil only if the message breaks the schema (a bug: runs
    /// never exceed 128 frames, nor 8 per field).
    static func inputBroadcast(_ packer: InputBroadcastPacker, authoritative: Bool, timeline: InputTimeline,
                               players: Range<Int>?, provisional: [Run], forwarded: [Run], confirmedFrames: Int,
                               awaitedInputFrame: Int) -> UnsafeRawBufferPointer? {
        let inputSize = timeline.inputSize
        packer.begin(authoritative: authoritative, inputSize: UInt32(inputSize),
                     confirmedFrames: UInt32(truncatingIfNeeded: confirmedFrames),
                     awaitedInputFrame: UInt32(truncatingIfNeeded: awaitedInputFrame))
        if let players {
            for slot in 0 ..< timeline.slotCount {
                let statusCount = timeline.hasStatus(slot: slot, from: players.lowerBound, to: players.upperBound) ? players.count : 0
                let run = packer.addRun(.players, slot: UInt32(slot + 1), startFrame: UInt32(truncatingIfNeeded: players.lowerBound),
                                        inputBytes: players.count * inputSize, statusCount: statusCount)
                timeline.copyInputs(slot: slot, from: players.lowerBound, to: players.upperBound, into: run.inputs)
                for index in 0 ..< run.statuses.count {
                    run.statuses[index] = timeline.status(slot: slot, frame: players.lowerBound + index)
                }
            }
        }
        for run in provisional { add(run, to: .players, packer, timeline) }
        for run in forwarded { add(run, to: .forwarded, packer, timeline) }
        do {
            return try packer.pack()
        } catch {
            assertionFailure("relay broadcast breaks the schema: \(error)")
            return nil
        }
    }

    private static func add(_ run: Run, to field: InputBroadcastPacker.Field, _ packer: InputBroadcastPacker,
                            _ timeline: InputTimeline) {
        let buffers = packer.addRun(field, slot: UInt32(run.slot + 1), startFrame: UInt32(truncatingIfNeeded: run.from),
                                    inputBytes: (run.to - run.from) * timeline.inputSize, statusCount: 0)
        timeline.copyInputs(slot: run.slot, from: run.from, to: run.to, into: buffers.inputs)
    }
}

extension RelayWire.Batch {
    /// The fields of a batch decoded on the hot path (kept in an extension so the memberwise
    /// initialiser stays).
    @inline(__always)
    init(_ view: InputBatchView) {
        self.init(requestId: view.requestId, slot: view.slot, startFrame: view.startFrame, inputSize: view.inputSize,
                  inputs: view.inputs, awaitedFrame: view.awaitedFrame, currentFrame: view.currentFrame)
    }
}
