@_spi(WireTesting) import NetplayWire
import Rollback
import Testing
import NetplayTestSupport

/// The zero-allocation hot path (``HotPathDecoder``, ``InputBroadcastPacker``): protobuf-c does
/// the work, the results must be exactly the generic codec's.
@Suite("Hot path", .ownThread)
struct HotPathTests {
    static let batches: [InputBatch] = [
        InputBatch(slot: 1, startFrame: 0, inputSize: 1, inputs: [7], awaitedFrame: 0, currentFrame: 0),
        InputBatch(slot: 8, startFrame: 4_000_000_000, inputSize: 64, inputs: Array(repeating: 0xAB, count: 8192),
                   awaitedFrame: 123_456, currentFrame: 4_000_000_000),
        InputBatch(slot: 0, startFrame: 0, inputSize: 2, inputs: [], awaitedFrame: 300, currentFrame: 301),
    ]

    @Test func inputBatchViewsReadWhatTheGenericEncoderWrote() throws {
        let decoder = HotPathDecoder(arenaBytes: 256)
        for (index, sample) in Self.batches.enumerated() {
            let envelope = Envelope(requestId: UInt64(index * 1000), body: .inputBatch(sample))
            let bytes = try envelope.encoded()
            let value = bytes.withUnsafeBytes { raw in decoder.inputBatch(raw)?.value }
            #expect(value == envelope)
        }
        // The 8 KiB batch overflowed the 256-byte arena once; it grew so the next frames fit.
        #expect(decoder.arenaCapacity > 256)
    }

    /// An arena asked for no bytes never grew (its growth doubles what it has): the first frame
    /// that overflowed it looped for ever. It starts at 64 bytes at least.
    @Test func anArenaOfNoBytesStillDecodesAndGrows() throws {
        let decoder = HotPathDecoder(arenaBytes: 0)
        for (index, sample) in Self.batches.enumerated() {
            let envelope = Envelope(requestId: UInt64(index), body: .inputBatch(sample))
            let value = try envelope.encoded().withUnsafeBytes { raw in decoder.inputBatch(raw)?.value }
            #expect(value == envelope)
        }
        #expect(decoder.arenaCapacity >= 64)
    }

    @Test func anythingElseIsLeftToTheGenericPath() throws {
        let decoder = HotPathDecoder()
        let other = try Envelope(body: .ping(Ping(nonce: 1))).encoded()
        let zeroInputSize: [UInt8] = [0x2A, 0x04, 0x08, 0x01, 0x18, 0x00]
        let slotNine: [UInt8] = [0x2A, 0x04, 0x08, 0x09, 0x18, 0x01]
        let truncated: [UInt8] = [0x2A, 0x09, 0x08, 0x01]
        let tooManyInputs = try Envelope(body: .inputBatch(InputBatch(slot: 1, inputSize: 1,
                                                                      inputs: Array(repeating: 1, count: 8193))))
            .encoded(validating: false)
        for frame in [other, zeroInputSize, slotNine, truncated, tooManyInputs, [0xFF, 0xFF, 0xFF], []] {
            #expect(frame.withUnsafeBytes { decoder.inputBatch($0) } == nil, "\(frame.prefix(16))")
            if frame != other {
                #expect(throws: WireError.self) { try Envelope(decoding: frame) }
            }
        }
        let small = HotPathDecoder(limits: WireLimits(maxFrameBytes: 16))
        let valid = try Envelope(body: .inputBatch(InputBatch(slot: 1, inputSize: 1, inputs: Array(repeating: 1, count: 32)))).encoded()
        #expect(valid.withUnsafeBytes { small.inputBatch($0) } == nil, "frames above the limit are the generic path's")
    }

    static let broadcasts: [(UInt64, InputBroadcast)] = [
        (0, InputBroadcast(authoritative: true, inputSize: 2,
                           players: [PlayerInputs(slot: 1, startFrame: 10, inputs: [1, 2, 3, 4]),
                                     PlayerInputs(slot: 2, startFrame: 10, inputs: [5, 6, 7, 8], status: [.substituted, .received])],
                           confirmedFrames: 12, awaitedInputFrame: 11,
                           forwarded: [PlayerInputs(slot: 2, startFrame: 12, inputs: [9, 9])])),
        (7, InputBroadcast(authoritative: false, inputSize: 1, players: [PlayerInputs(slot: 3, startFrame: 0, inputs: [0])],
                           confirmedFrames: 0, awaitedInputFrame: 0)),
        (.max, InputBroadcast(authoritative: true, inputSize: 64, players: [], confirmedFrames: 4_000_000_000,
                              awaitedInputFrame: 1)),
        (1, InputBroadcast(authoritative: true, inputSize: 64,
                           players: (1 ... 8).map { PlayerInputs(slot: UInt32($0), startFrame: 1000, inputs: Array(repeating: UInt8($0), count: 8192),
                                                                status: Array(repeating: .disconnected, count: 128)) },
                           confirmedFrames: 1128, awaitedInputFrame: 1128,
                           forwarded: (1 ... 8).map { PlayerInputs(slot: UInt32($0), startFrame: 1128, inputs: []) })),
    ]

    static func pack(_ packer: InputBroadcastPacker, _ requestId: UInt64, _ message: InputBroadcast) throws(WireError) -> [UInt8] {
        packer.begin(requestId: requestId, authoritative: message.authoritative, inputSize: message.inputSize,
                     confirmedFrames: message.confirmedFrames, awaitedInputFrame: message.awaitedInputFrame)
        for (field, runs) in [(InputBroadcastPacker.Field.players, message.players), (.forwarded, message.forwarded)] {
            for run in runs {
                packer.addRun(field, slot: run.slot, startFrame: run.startFrame, inputBytes: run.inputs.count,
                              statusCount: run.status.count) { inputs, statuses in
                    inputs.copyBytes(from: run.inputs)
                    for (index, status) in run.status.enumerated() { statuses[index] = status }
                }
            }
        }
        return Array(try packer.pack())
    }

    @Test func packedBroadcastsAreByteIdenticalToTheGenericEncoder() throws {
        let packer = InputBroadcastPacker(initialBytes: 64)
        for _ in 0 ..< 2 {  // the second round reuses grown buffers
            for (requestId, message) in Self.broadcasts {
                let generic = try Envelope(requestId: requestId, body: .inputBroadcast(message)).encoded()
                #expect(try Self.pack(packer, requestId, message) == generic)
            }
        }
    }

    /// The packer's buffers are reused message after message (by a relay, across sessions): a
    /// run the caller writes only part of went out with the rest of an earlier message's inputs.
    @Test func aRunStartsZeroedWhateverTheMessageBeforeHeld() throws {
        let packer = InputBroadcastPacker(initialBytes: 64)
        let (_, secret) = Self.broadcasts[3]
        _ = try Self.pack(packer, 1, secret)
        packer.begin(authoritative: true, inputSize: 64, confirmedFrames: 1, awaitedInputFrame: 1)
        packer.addRun(.players, slot: 1, startFrame: 0, inputBytes: 8192, statusCount: 128) { inputs, _ in inputs[0] = 0xAB }
        let decoded = try Envelope(decoding: Array(try packer.pack()))
        guard case .inputBroadcast(let broadcast) = decoded.body, let run = broadcast.players.first else {
            Issue.record("\(decoded.body.name)")
            return
        }
        #expect(run.inputs.count == 8192 && run.inputs.first == 0xAB)
        #expect(run.inputs.dropFirst().allSatisfy { $0 == 0 }, "\(run.inputs.dropFirst().filter { $0 != 0 }.count) stale input bytes")
        #expect(run.status.count == 128 && run.status.allSatisfy { $0 == .received },
                "\(run.status.filter { $0 != .received }.count) stale statuses")
    }

    @Test func packingValidatesLikeTheGenericEncoder() throws {
        let packer = InputBroadcastPacker()
        let bad: [InputBroadcast] = [
            InputBroadcast(authoritative: true, inputSize: 0, players: [], confirmedFrames: 0, awaitedInputFrame: 0),
            InputBroadcast(authoritative: true, inputSize: 1, players: [PlayerInputs(slot: 9, startFrame: 0, inputs: [1])],
                           confirmedFrames: 0, awaitedInputFrame: 0),
            InputBroadcast(authoritative: true, inputSize: 1, players: [PlayerInputs(slot: 0, startFrame: 0, inputs: [1])],
                           confirmedFrames: 0, awaitedInputFrame: 0),
            InputBroadcast(authoritative: true, inputSize: 1,
                           players: [PlayerInputs(slot: 1, startFrame: 0, inputs: Array(repeating: 0, count: 8193))],
                           confirmedFrames: 0, awaitedInputFrame: 0),
            InputBroadcast(authoritative: true, inputSize: 1,
                           players: [PlayerInputs(slot: 1, startFrame: 0, inputs: [1], status: Array(repeating: .received, count: 129))],
                           confirmedFrames: 0, awaitedInputFrame: 0),
            InputBroadcast(authoritative: true, inputSize: 1,
                           players: Array(repeating: PlayerInputs(slot: 1, startFrame: 0, inputs: [1]), count: 9),
                           confirmedFrames: 0, awaitedInputFrame: 0),
            InputBroadcast(authoritative: true, inputSize: 1, players: [],
                           confirmedFrames: 0, awaitedInputFrame: 0,
                           forwarded: Array(repeating: PlayerInputs(slot: 1, startFrame: 0, inputs: [1]), count: 12)),
        ]
        for message in bad {
            var genericError: WireError?
            do { _ = try Envelope(body: .inputBroadcast(message)).encoded() } catch { genericError = error }
            var packedError: WireError?
            do { _ = try Self.pack(packer, 0, message) } catch { packedError = error }
            #expect(genericError != nil && packedError == genericError, "\(message)")
        }
        let tiny = InputBroadcastPacker(limits: WireLimits(maxFrameBytes: 8))
        let (_, big) = Self.broadcasts[0]
        #expect(throws: WireError.self) { try Self.pack(tiny, 0, big) }
    }

    @Test func envelopeHeaderFramesOnlyTheCanonicalShapeAndLeavesTheRestToTheGenericPath() throws {
        let batch = Self.batches[0]
        let body = try Envelope(body: .inputBatch(batch)).encoded().dropFirst(2)  // tag 0x2A, length
        let decoder = HotPathDecoder()
        // request_id after the body is still protobuf's Envelope; the hot path reads it too.
        let swapped: [UInt8] = [0x2A, UInt8(body.count)] + body + [0x08, 0x05]
        #expect(swapped.withUnsafeBytes { decoder.inputBatch($0)?.value } == Envelope(requestId: 5, body: .inputBatch(batch)))
        // Repeated fields, unknown fields and non-minimal lengths are declined (the generic
        // decoder merges or skips them; the hot path does not try).
        let declined: [[UInt8]] = [
            [0x08, 0x01, 0x08, 0x02, 0x2A, UInt8(body.count)] + body,
            [0x2A, UInt8(body.count)] + body + [0x2A, UInt8(body.count)] + body,
            [0x2A, UInt8(body.count)] + body + [0x78, 0x01],
            [0x2A, 0x80 | UInt8(body.count), 0x80, 0x80, 0x80, 0x80, 0x00] + body,
        ]
        for frame in declined {
            #expect(frame.withUnsafeBytes { decoder.inputBatch($0) } == nil, "\(frame.prefix(12))")
        }
        // Header sizes at the varint boundaries, written before a body and read back.
        for requestId: UInt64 in [0, 1, 127, 128, 16_383, 16_384, .max] {
            for bodySize in [0, 1, 127, 128, 300] {
                let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: EnvelopeHeader.maxBytes + bodySize, alignment: 1)
                defer { buffer.deallocate() }
                buffer.initializeMemory(as: UInt8.self, repeating: 0x01)
                let body = buffer.baseAddress! + EnvelopeHeader.maxBytes
                let start = EnvelopeHeader.write(requestId: requestId, field: EnvelopeHeader.inputBroadcastField,
                                                 bodySize: bodySize, before: body)
                let frame = UnsafeRawBufferPointer(start: start, count: body + bodySize - start)
                let located = try #require(EnvelopeHeader.read(frame, field: EnvelopeHeader.inputBroadcastField))
                #expect(located.requestId == requestId && located.body.count == bodySize
                        && located.body.baseAddress == UnsafeRawPointer(body))
                #expect(EnvelopeHeader.read(frame, field: EnvelopeHeader.inputBatchField) == nil)
            }
        }
    }

    @Test("20,000 fuzzed frames: the hot path never crashes, reads what it accepts exactly as the generic decoder does, and declines only unusual encodings")
    func fuzzAgreesWithTheGenericDecoder() throws {
        var rng = SeededRandom(seed: 0x686F_7470_6174_6821)
        let decoder = HotPathDecoder(arenaBytes: 512)
        var seeds = try FuzzTests.seeds()
        for (index, batch) in Self.batches.enumerated() {
            seeds.append(try Envelope(requestId: UInt64(index), body: .inputBatch(batch)).encoded())
            seeds.append(try Envelope(requestId: UInt64(index), body: .inputBatch(batch)).encoded())
        }
        var accepted = 0
        var declinedValid = 0
        for iteration in 0 ..< 20_000 {
            var frame: [UInt8]
            if iteration % 10 == 0 {
                frame = FuzzTests.randomBytes(count: Int.random(in: 0 ... 64, using: &rng), using: &rng)
            } else {
                // Batches mostly, so the interesting decisions (ranges, limits, truncation) are hit.
                let pick = iteration % 3 == 0 ? Int.random(in: 0 ..< seeds.count, using: &rng)
                    : seeds.count - 1 - Int.random(in: 0 ..< 2 * Self.batches.count, using: &rng)
                frame = seeds[pick]
                for _ in 0 ..< Int.random(in: 1 ... 3, using: &rng) { FuzzTests.mutate(&frame, seeds: seeds, using: &rng) }
            }
            let hot = frame.withUnsafeBytes { decoder.inputBatch($0)?.value }
            let generic = try? Envelope(decoding: frame)
            var genericBatch: Envelope?
            if let generic, case .inputBatch = generic.body { genericBatch = generic }
            // What the hot path accepts is exactly the generic reading; what it declines goes to
            // the generic path, so only unusual encodings of a batch may be declined.
            if let hot { #expect(hot == genericBatch, "frame \(frame.prefix(32))") }
            if let genericBatch, hot == nil {
                declinedValid += 1
                #expect(try genericBatch.encoded() != frame, "a canonical batch was declined: \(frame.prefix(32))")
            }
            if hot != nil { accepted += 1 }
        }
        #expect(accepted > 500, "the fuzzer should reach valid batches too (\(accepted))")
        #expect(declinedValid < accepted / 10, "unusual encodings only (\(declinedValid) declined, \(accepted) accepted)")
    }
}
