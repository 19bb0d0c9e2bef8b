/// The two fields of an `Envelope` around a hot-path body (`request_id` = 1 and one `body`
/// member), read and written directly so the per-frame path runs protobuf-c on the body message
/// alone: protobuf-c's Envelope pack and unpack walk all 79 fields of its descriptor, which cost
/// more than the InputBatch or InputBroadcast inside (~120 ns of ~165 ns to unpack, ~135 of
/// ~165 ns to pack, measured on this project's machine).
///
/// The bytes are protobuf's own encoding, identical to protobuf-c packing the Envelope (fields in
/// number order, a zero `request_id` omitted as proto3 does). Reading is strict: a frame that is
/// anything but an optional `request_id` followed or preceded by exactly one occurrence of the
/// expected body field gives nil, and the caller decodes it the generic way, so every unusual
/// frame (repeated fields, unknown fields, another body) keeps its exact generic behaviour.
public enum EnvelopeHeader {
    /// The most bytes a header takes: `request_id` (tag + 10-byte varint) and the body's tag and
    /// length (tag + 5-byte varint).
    public static let maxBytes = 17
    /// `Envelope.input_batch`.
    public static let inputBatchField: UInt32 = 5
    /// `Envelope.input_broadcast`.
    public static let inputBroadcastField: UInt32 = 6

    /// A body located by ``read(_:field:)``.
    public struct Located {
        /// `Envelope.request_id` (0 when absent).
        public let requestId: UInt64
        /// The body message's bytes, a slice of the frame.
        public let body: UnsafeRawBufferPointer

        @usableFromInline init(requestId: UInt64, body: UnsafeRawBufferPointer) {
            self.requestId = requestId
            self.body = body
        }
    }

    /// Writes the header of an Envelope whose body `field` (1...15, a one-byte tag) is the
    /// `bodySize` bytes at `body`, ending right before them, and returns where it starts (at most
    /// ``maxBytes`` before `body`; the caller keeps that room free).
    @inlinable
    public static func write(requestId: UInt64, field: UInt32, bodySize: Int, before body: UnsafeMutableRawPointer)
        -> UnsafeMutableRawPointer {
        precondition((1 ... 15).contains(field) && bodySize >= 0 && bodySize <= Int(UInt32.max))
        let length = (requestId == 0 ? 0 : 1 + varintSize(requestId)) + 1 + varintSize(UInt64(bodySize))
        let start = body - length
        var at = start
        if requestId != 0 {
            at.storeBytes(of: 0x08, as: UInt8.self)  // field 1, varint
            at = writeVarint(requestId, at: at + 1)
        }
        at.storeBytes(of: UInt8(truncatingIfNeeded: field << 3 | 2), as: UInt8.self)  // length-delimited
        at = writeVarint(UInt64(bodySize), at: at + 1)
        assert(at == body)
        return start
    }

    /// The `request_id` at the start of a frame that may not decode at all (0 when it does not
    /// start with one): an Error reply to a malformed request still carries the request's id
    /// when it can be recovered.
    public static func salvageRequestId(_ frame: [UInt8]) -> UInt64 {
        guard frame.first == 0x08 else { return 0 }
        return frame.withUnsafeBytes { raw in
            var at = 1
            return readVarint(raw.baseAddress!, &at, raw.count, maxBytes: 10) ?? 0
        }
    }

    /// Finds body `field` (1...15) in `frame` when the frame holds nothing but it and an optional
    /// `request_id`, each once; nil for anything else.
    @inlinable
    public static func read(_ frame: UnsafeRawBufferPointer, field: UInt32) -> Located? {
        guard let base = frame.baseAddress else { return nil }
        var at = 0
        let end = frame.count
        var requestId: UInt64?
        var body: UnsafeRawBufferPointer?
        while at < end {
            guard let tag = readVarint(base, &at, end, maxBytes: 5) else { return nil }
            if tag == 0x08, requestId == nil {
                guard let value = readVarint(base, &at, end, maxBytes: 10) else { return nil }
                requestId = value
            } else if tag == UInt64(field << 3 | 2), body == nil {
                guard let length = readVarint(base, &at, end, maxBytes: 5), length <= UInt64(end - at) else { return nil }
                body = UnsafeRawBufferPointer(start: base + at, count: Int(length))
                at += Int(length)
            } else {
                return nil
            }
        }
        guard let body else { return nil }
        return Located(requestId: requestId ?? 0, body: body)
    }

    @inlinable
    static func varintSize(_ value: UInt64) -> Int {
        value == 0 ? 1 : (64 - value.leadingZeroBitCount + 6) / 7
    }

    @inlinable
    static func writeVarint(_ value: UInt64, at pointer: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer {
        var value = value
        var at = pointer
        while value >= 0x80 {
            at.storeBytes(of: UInt8(truncatingIfNeeded: value) | 0x80, as: UInt8.self)
            value >>= 7
            at += 1
        }
        at.storeBytes(of: UInt8(truncatingIfNeeded: value), as: UInt8.self)
        return at + 1
    }

    /// A varint of at most `maxBytes` bytes (5 for tags and lengths, as protobuf-c reads them;
    /// 10 for a uint64, whose tenth byte may hold only the top bit); nil when it runs past `end`
    /// or is longer, and the caller falls back to protobuf-c, which decides.
    @inlinable
    static func readVarint(_ base: UnsafeRawPointer, _ at: inout Int, _ end: Int, maxBytes: Int) -> UInt64? {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        var count = 0
        while at < end && count < maxBytes {
            let byte = base.load(fromByteOffset: at, as: UInt8.self)
            at += 1
            count += 1
            if shift == 63 && byte > 1 { return nil }
            result |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return result }
            shift += 7
        }
        return nil
    }
}
