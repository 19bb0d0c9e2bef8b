import CNetplayProto

/// The send side of the per-frame hot path: builds an `Envelope` holding an `InputBroadcast` in
/// reusable protobuf-c structs, from inputs the caller writes straight into the packer's buffer,
/// and packs the `InputBroadcast` with `protobuf_c_message_pack` into a reusable output buffer
/// sized by an upper bound (so protobuf-c's own sizing of the sub-messages is the only size pass),
/// behind an ``EnvelopeHeader`` (the Envelope's two fields, written directly: packing the Envelope
/// through protobuf-c would walk its 79-field descriptor for every message). Once its buffers have
/// grown to the largest message, packing allocates nothing.
///
/// The bytes are exactly what `Envelope(requestId:body: .inputBroadcast(...)).encoded()` produces
/// for the same message, and the same validation applies (the schema's annotations on
/// `InputBroadcast` and `PlayerInputs`, with the same ``WireError``s). A run's buffers start zeroed.
/// Confined to one thread.
///
/// ```swift
/// packer.begin(authoritative: true, inputSize: 2, confirmedFrames: 10, awaitedInputFrame: 9)
/// packer.addRun(.players, slot: 1, startFrame: 8, inputBytes: 4, statusCount: 0) { inputs, _ in ... }
/// let frame = try packer.pack()   // valid until the next begin()
/// ```
public final class InputBroadcastPacker {
    /// The repeated `PlayerInputs` field a run goes to.
    public enum Field: Sendable {
        /// `InputBroadcast.players`.
        case players
        /// `InputBroadcast.forwarded`.
        case forwarded
    }

    /// Where a run's statuses are written (`InputStatus` per frame, aligned with its inputs).
    public struct StatusWriter {
        @usableFromInline let base: UnsafeMutablePointer<Netplay__V1__InputStatus>
        /// Statuses in the run.
        public let count: Int

        init(base: UnsafeMutablePointer<Netplay__V1__InputStatus>, count: Int) {
            self.base = base
            self.count = count
        }

        /// Sets the status of the run's frame `index`.
        @inlinable public subscript(index: Int) -> InputStatus {
            get { InputStatus(rawValue: Int32(truncatingIfNeeded: base[index].rawValue)) ?? .received }
            nonmutating set {
                precondition(index >= 0 && index < count)
                base[index] = .init(rawValue: .init(truncatingIfNeeded: newValue.rawValue))
            }
        }
    }

    /// Bytes kept free before the packed body for the Envelope header (request_id and the body's tag and length).
    private static let headerSpace = EnvelopeHeader.maxBytes
    private static let maxRuns = 9  // 8 allowed per field; a ninth is reported by pack()
    private static let statusStride = MemoryLayout<Netplay__V1__InputStatus>.stride

    private let limits: WireLimits
    private var requestId: UInt64 = 0
    private let broadcast: UnsafeMutablePointer<Netplay__V1__InputBroadcast>
    private let runs: UnsafeMutablePointer<Netplay__V1__PlayerInputs>
    private let runPointers: UnsafeMutablePointer<UnsafeMutablePointer<Netplay__V1__PlayerInputs>?>
    /// Per run: offset of its inputs and of its statuses in `data`.
    private let offsets: UnsafeMutablePointer<Int>
    private var playerCount = 0
    private var forwardedCount = 0
    private var data: UnsafeMutableRawPointer
    private var dataCapacity: Int
    private var dataUsed = 0
    private var output: UnsafeMutableRawPointer
    private var outputCapacity: Int

    /// A packer whose buffers start at `initialBytes` each (they grow to the largest message).
    public init(limits: WireLimits = .default, initialBytes: Int = 1024) {
        self.limits = limits
        let runCount = 2 * Self.maxRuns
        broadcast = .allocate(capacity: 1)
        runs = .allocate(capacity: runCount)
        runPointers = .allocate(capacity: runCount)
        runPointers.initialize(repeating: nil, count: runCount)
        offsets = .allocate(capacity: 2 * runCount)
        offsets.initialize(repeating: 0, count: 2 * runCount)
        dataCapacity = max(initialBytes, 64)
        data = .allocate(byteCount: dataCapacity, alignment: 16)
        outputCapacity = max(initialBytes, 64)
        output = .allocate(byteCount: outputCapacity, alignment: 16)
        netplay__v1__input_broadcast__init(broadcast)
        for index in 0 ..< runCount { netplay__v1__player_inputs__init(runs + index) }
    }

    deinit {
        broadcast.deallocate()
        runs.deallocate()
        runPointers.deallocate()
        offsets.deallocate()
        data.deallocate()
        output.deallocate()
    }

    /// Starts a message (the previous one's bytes are no longer valid).
    public func begin(requestId: UInt64 = 0, authoritative: Bool, inputSize: UInt32, confirmedFrames: UInt32,
                      awaitedInputFrame: UInt32) {
        netplay__v1__input_broadcast__init(broadcast)
        self.requestId = requestId
        broadcast.pointee.authoritative = authoritative ? 1 : 0
        broadcast.pointee.input_size = inputSize
        broadcast.pointee.confirmed_frames = confirmedFrames
        broadcast.pointee.awaited_input_frame = awaitedInputFrame
        playerCount = 0
        forwardedCount = 0
        dataUsed = 0
    }

    private func reserve(_ bytes: Int) -> Int {
        let start = (dataUsed + 15) & ~15
        if start + bytes > dataCapacity {
            var grown = dataCapacity * 2
            while grown < start + bytes { grown *= 2 }
            let moved = UnsafeMutableRawPointer.allocate(byteCount: grown, alignment: 16)
            moved.copyMemory(from: data, byteCount: dataUsed)
            data.deallocate()
            data = moved
            dataCapacity = grown
        }
        dataUsed = start + bytes
        return start
    }

    /// Adds a `PlayerInputs` to `field`: `fill` writes its `inputBytes` input bytes and, when
    /// `statusCount` > 0, its statuses (0: the field stays empty, meaning all `received`).
    @inline(__always)
    public func addRun(_ field: Field, slot: UInt32, startFrame: UInt32, inputBytes: Int, statusCount: Int,
                       fill: (UnsafeMutableRawBufferPointer, StatusWriter) -> Void) {
        let run = addRun(field, slot: slot, startFrame: startFrame, inputBytes: inputBytes, statusCount: statusCount)
        fill(run.inputs, run.statuses)
    }

    /// Where a run added by ``addRun(_:slot:startFrame:inputBytes:statusCount:)`` is written.
    public struct RunBuffers {
        /// The run's `inputBytes` input bytes.
        public let inputs: UnsafeMutableRawBufferPointer
        /// The run's statuses (empty when `statusCount` was 0).
        public let statuses: StatusWriter
    }

    /// Adds a `PlayerInputs` to `field` and returns where to write its inputs and statuses;
    /// write them before the next `addRun` (which may move the buffer).
    public func addRun(_ field: Field, slot: UInt32, startFrame: UInt32, inputBytes: Int, statusCount: Int) -> RunBuffers {
        let base = field == .players ? 0 : Self.maxRuns
        var index = -1
        switch field {
        case .players:
            if playerCount < Self.maxRuns { index = base + playerCount }
            playerCount = min(playerCount + 1, Self.maxRuns + 1)
        case .forwarded:
            if forwardedCount < Self.maxRuns { index = base + forwardedCount }
            forwardedCount = min(forwardedCount + 1, Self.maxRuns + 1)
        }
        let inputCount = max(inputBytes, 0), statuses = max(statusCount, 0)
        let inputOffset = reserve(inputCount)
        let statusOffset = reserve(statuses * Self.statusStride)
        // Zeroed: a byte or status the caller leaves unwritten goes out as 0 (`received`), not as
        // whatever an earlier message (another session's inputs) left in the reused buffer.
        (data + inputOffset).initializeMemory(as: UInt8.self, repeating: 0, count: inputCount)
        (data + statusOffset).initializeMemory(as: UInt8.self, repeating: 0, count: statuses * Self.statusStride)
        let statusBase = (data + statusOffset).bindMemory(to: Netplay__V1__InputStatus.self, capacity: statuses)
        let buffers = RunBuffers(inputs: UnsafeMutableRawBufferPointer(start: data + inputOffset, count: inputCount),
                                 statuses: StatusWriter(base: statusBase, count: statuses))
        guard index >= 0 else { return buffers }  // a ninth run: pack() reports the count
        offsets[2 * index] = inputOffset
        offsets[2 * index + 1] = statusOffset
        let run = runs + index
        netplay__v1__player_inputs__init(run)
        run.pointee.slot = slot
        run.pointee.start_frame = startFrame
        run.pointee.inputs.len = inputCount
        run.pointee.n_status = statuses
        return buffers
    }

    private func link(_ field: Field, count: Int) throws(WireError) {
        let base = field == .players ? 0 : Self.maxRuns
        try _wireCheckCount(count, 8, field == .players ? "InputBroadcast.players" : "InputBroadcast.forwarded")
        for i in 0 ..< count {
            let run = runs + base + i
            try _wireCheckRange(run.pointee.slot, 1...8, "PlayerInputs.slot")
            let inputBytes = run.pointee.inputs.len
            if inputBytes > 8192 { throw .tooLong(field: "PlayerInputs.inputs", limit: 8192) }
            run.pointee.inputs.data = inputBytes > 0 ? (data + offsets[2 * (base + i)]).assumingMemoryBound(to: UInt8.self) : nil
            try _wireCheckCount(run.pointee.n_status, 128, "PlayerInputs.status")
            run.pointee.status = run.pointee.n_status > 0
                ? (data + offsets[2 * (base + i) + 1]).assumingMemoryBound(to: Netplay__V1__InputStatus.self) : nil
            runPointers[base + i] = run
        }
    }

    /// Validates and packs the message; the bytes stay valid until the next ``begin(requestId:authoritative:inputSize:confirmedFrames:awaitedInputFrame:)``.
    public func pack() throws(WireError) -> UnsafeRawBufferPointer {
        try _wireCheckRange(broadcast.pointee.input_size, 1...64, "InputBroadcast.input_size")
        try link(.players, count: playerCount)
        try link(.forwarded, count: forwardedCount)
        broadcast.pointee.n_players = playerCount
        broadcast.pointee.players = playerCount > 0 ? runPointers : nil
        broadcast.pointee.n_forwarded = forwardedCount
        broadcast.pointee.forwarded = forwardedCount > 0 ? runPointers + Self.maxRuns : nil
        let message = UnsafeRawPointer(broadcast).assumingMemoryBound(to: ProtobufCMessage.self)
        // protobuf-c packs the InputBroadcast (sizing its sub-messages itself); the Envelope around
        // it is two fields, written here, because packing the Envelope itself walks all 79 fields
        // of its descriptor (~100 ns a message). The output buffer only has to hold an upper
        // bound: every varint at its 10-byte maximum, every status too, plus the header.
        var bound = 128 + Self.headerSpace
        for index in 0 ..< playerCount { bound += 64 + runs[index].inputs.len + 10 * runs[index].n_status }
        for index in 0 ..< forwardedCount {
            bound += 64 + runs[Self.maxRuns + index].inputs.len + 10 * runs[Self.maxRuns + index].n_status
        }
        if bound > outputCapacity {
            var grown = outputCapacity * 2
            while grown < bound { grown *= 2 }
            output.deallocate()
            output = .allocate(byteCount: grown, alignment: 16)
            outputCapacity = grown
        }
        let body = output + Self.headerSpace
        let bodySize = protobuf_c_message_pack(message, body.assumingMemoryBound(to: UInt8.self))
        guard bodySize + Self.headerSpace <= bound else {
            fatalError("protobuf-c packed \(bodySize) bytes, more than the bound of \(bound)")
        }
        let start = EnvelopeHeader.write(requestId: requestId, field: EnvelopeHeader.inputBroadcastField,
                                         bodySize: bodySize, before: body)
        let size = body + bodySize - start
        if size > limits.maxFrameBytes { throw .oversized(size: size, limit: limits.maxFrameBytes) }
        return UnsafeRawBufferPointer(start: start, count: size)
    }
}
