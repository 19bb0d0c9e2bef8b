/// A tiny protobuf writer for hand-crafting frames the Swift API refuses to produce
/// (unknown fields, out-of-range enums, invalid UTF-8, absent required messages).
struct ProtobufWriter {
    var bytes: [UInt8] = []

    mutating func varint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(v & 0x7F) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    mutating func tag(_ field: Int, wireType: Int) {
        varint(UInt64(field << 3 | wireType))
    }

    mutating func varintField(_ field: Int, _ value: UInt64) {
        tag(field, wireType: 0)
        varint(value)
    }

    mutating func bytesField(_ field: Int, _ value: [UInt8]) {
        tag(field, wireType: 2)
        varint(UInt64(value.count))
        bytes += value
    }

    mutating func stringField(_ field: Int, _ value: String) {
        bytesField(field, Array(value.utf8))
    }

    mutating func messageField(_ field: Int, _ build: (inout ProtobufWriter) -> Void) {
        var inner = ProtobufWriter()
        build(&inner)
        bytesField(field, inner.bytes)
    }
}

/// SplitMix64: a small seeded PRNG, so fuzz runs are reproducible.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

import Testing
import NetplayWire

extension WireViolation: CustomTestStringConvertible {
    var testDescription: String { label }
}
