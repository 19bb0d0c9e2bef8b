/// A tiny protobuf writer for hand-crafting frames the Swift API refuses to produce
/// (unknown fields, out-of-range enums, invalid UTF-8, oversized or absent fields): what a
/// client that lies puts on the wire.
public struct ProtobufWriter: Sendable {
    /// The bytes written so far.
    public var bytes: [UInt8] = []

    /// An empty writer.
    public init() {}

    /// An `Envelope` frame: `requestId` (field 1) and body field `body` holding the message `build` writes.
    public static func envelope(requestId: UInt64, body: Int, _ build: (inout ProtobufWriter) -> Void) -> [UInt8] {
        var writer = ProtobufWriter()
        writer.varintField(1, requestId)
        writer.messageField(body, build)
        return writer.bytes
    }

    /// A base-128 varint.
    public mutating func varint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(v & 0x7F) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    /// A field's key: its number and wire type.
    public mutating func tag(_ field: Int, wireType: Int) {
        varint(UInt64(field << 3 | wireType))
    }

    /// A varint field (wire type 0).
    public mutating func varintField(_ field: Int, _ value: UInt64) {
        tag(field, wireType: 0)
        varint(value)
    }

    /// A length-delimited field (wire type 2).
    public mutating func bytesField(_ field: Int, _ value: [UInt8]) {
        tag(field, wireType: 2)
        varint(UInt64(value.count))
        bytes += value
    }

    /// A string field: its UTF-8 bytes, length-delimited.
    public mutating func stringField(_ field: Int, _ value: String) {
        bytesField(field, Array(value.utf8))
    }

    /// A nested message field holding what `build` writes.
    public mutating func messageField(_ field: Int, _ build: (inout ProtobufWriter) -> Void) {
        var inner = ProtobufWriter()
        build(&inner)
        bytesField(field, inner.bytes)
    }
}
