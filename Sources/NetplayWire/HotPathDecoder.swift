import CNetplayProto

/// A borrowed, validated view of an `Envelope` holding an `InputBatch`, read straight from the
/// structs protobuf-c unpacked into a ``HotPathDecoder``'s arena: nothing is converted to Swift
/// values and nothing is copied.
///
/// Valid only until the decoder that produced it decodes the next frame (or is released); do not
/// store it. Every field already satisfies the schema's annotations (`slot` 0...8, `input_size`
/// 1...64, `inputs` at most 8,192 bytes).
public struct InputBatchView {
    /// `Envelope.request_id`.
    public let requestId: UInt64
    @usableFromInline let batch: UnsafePointer<Netplay__V1__InputBatch>

    init(requestId: UInt64, batch: UnsafePointer<Netplay__V1__InputBatch>) {
        self.requestId = requestId
        self.batch = batch
    }

    /// `InputBatch.slot` (0...8).
    @inlinable public var slot: UInt32 { batch.pointee.slot }
    /// `InputBatch.start_frame`.
    @inlinable public var startFrame: UInt32 { batch.pointee.start_frame }
    /// `InputBatch.input_size` (1...64).
    @inlinable public var inputSize: UInt32 { batch.pointee.input_size }
    /// `InputBatch.awaited_frame`.
    @inlinable public var awaitedFrame: UInt32 { batch.pointee.awaited_frame }
    /// `InputBatch.current_frame`.
    @inlinable public var currentFrame: UInt32 { batch.pointee.current_frame }
    /// `InputBatch.inputs` (at most 8,192 bytes), borrowed from the decoder's arena.
    @inlinable public var inputs: UnsafeRawBufferPointer {
        let data = batch.pointee.inputs
        guard data.len > 0, let base = data.data else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        return UnsafeRawBufferPointer(start: base, count: data.len)
    }

    /// The same message as Swift values (tests, logging).
    public var value: Envelope {
        Envelope(requestId: requestId,
                 body: .inputBatch(InputBatch(slot: slot, startFrame: startFrame, inputSize: inputSize,
                                              inputs: Array(inputs), awaitedFrame: awaitedFrame,
                                              currentFrame: currentFrame)))
    }
}

/// The receive side of the per-frame hot path: finds the body behind the frame's
/// ``EnvelopeHeader``, unpacks it with protobuf-c (`protobuf_c_message_unpack` of the body
/// message alone: unpacking the Envelope would walk its 79-field descriptor) into a reusable bump
/// arena, so a frame costs no `malloc`, and hands out borrowed views of the hot messages instead
/// of Swift values.
///
/// It never decides a frame is bad: anything it does not serve (another body, a field outside the
/// schema's annotations, an undecodable frame, a frame above the limit) returns nil, and the
/// caller decodes the frame with the generic ``Envelope/init(decoding:limits:)-(UnsafeRawBufferPointer,_)``,
/// which reports exactly the error it always does. Confined to one thread.
public final class HotPathDecoder {
    private let arena: WireFrameArena
    /// The frame limit (frames above it are left to the generic path, which refuses them).
    public let limits: WireLimits

    /// A decoder whose arena starts at `arenaBytes` (it grows when a frame needs more).
    public init(limits: WireLimits = .default, arenaBytes: Int = 16 * 1024) {
        self.limits = limits
        arena = WireFrameArena(capacity: arenaBytes)
    }

    /// Bytes of the arena's reusable block (it grows only after a frame overflowed it).
    public var arenaCapacity: Int { arena.capacity }

    /// Unpacks `frame` and returns its `InputBatch` when the frame is an Envelope holding one
    /// whose fields pass the schema's validation; nil for anything else. The view (and any
    /// earlier one) is valid until the next call.
    public func inputBatch(_ frame: UnsafeRawBufferPointer) -> InputBatchView? {
        arena.reset()
        guard frame.count <= limits.maxFrameBytes, let base = frame.baseAddress, frame.count > 0 else { return nil }
        guard let located = EnvelopeHeader.read(UnsafeRawBufferPointer(start: base, count: frame.count),
                                                field: EnvelopeHeader.inputBatchField) else { return nil }
        let body = located.body
        // An empty body is a valid (all-default) InputBatch; protobuf-c needs a pointer anyway.
        let bytes = (body.baseAddress ?? base).assumingMemoryBound(to: UInt8.self)
        guard let batch = netplay__v1__input_batch__unpack(arena.cAllocator, body.count, bytes) else { return nil }
        // The schema's annotations on InputBatch (the generic decoder's checks, same order).
        let b = batch.pointee
        guard b.slot <= 8, (1 ... 64).contains(b.input_size), b.inputs.len <= 8192 else { return nil }
        return InputBatchView(requestId: located.requestId, batch: batch)
    }
}
