import NetplayWire
import Rollback
import Testing
import NetplayTestSupport

/// Feeds the decoder random and mutated frames: it must never crash, and whatever it accepts must
/// re-encode and decode to the same frame.
@Suite("Fuzz", .ownThread)
struct FuzzTests {
    static let iterations = 120_000

    /// Valid encodings of every body sample, with a few request ids.
    static func seeds() throws -> [[UInt8]] {
        var seeds: [[UInt8]] = []
        for (i, body) in allBodySamples.enumerated() {
            for requestId: UInt64 in [0, UInt64(i + 1), .max] {
                seeds.append(try Envelope(requestId: requestId, body: body).encoded())
            }
        }
        return seeds
    }

    @Test("120,000 random and mutated frames never crash the decoder")
    func fuzz() throws {
        var rng = SeededRandom(seed: 0x6E65_7470_6C61_7921)
        let seeds = try Self.seeds()
        let trees = seeds.map { PBTree.parse($0[...], depth: 0) ?? [] }
        var accepted = 0
        var errors: [String: Int] = [:]
        for iteration in 0..<Self.iterations {
            let frame: [UInt8]
            switch iteration % 10 {
            case 0:
                // Pure noise.
                frame = Self.randomBytes(count: Int.random(in: 0...300, using: &rng), using: &rng)
            case 1, 2, 3, 4:
                // Byte-level mutations of a valid frame.
                var f = seeds[Int.random(in: 0..<seeds.count, using: &rng)]
                for _ in 0..<Int.random(in: 1...3, using: &rng) {
                    Self.mutate(&f, seeds: seeds, using: &rng)
                }
                frame = f
            default:
                // Structure-aware mutations: well-formed protobuf with wrong values, counts,
                // lengths, field numbers and wire types.
                var tree = trees[Int.random(in: 0..<trees.count, using: &rng)]
                for _ in 0..<Int.random(in: 1...2, using: &rng) {
                    PBTree.mutate(&tree, using: &rng)
                }
                frame = PBTree.serialize(tree)
            }
            do {
                let envelope = try Envelope(decoding: frame)
                accepted += 1
                // Whatever decodes is valid, so it re-encodes, and the re-encoding is stable.
                let again = try envelope.encoded()
                let reparsed = try Envelope(decoding: again)
                #expect(try reparsed.encoded() == again)
            } catch {
                errors[Self.kind(error), default: 0] += 1
            }
        }
        print("fuzz: \(Self.iterations) frames, \(accepted) accepted, rejected: \(errors.sorted { $0.key < $1.key })")
        #expect(accepted > 1000, "mutations should often stay valid")
        for kind in ["notProtobuf", "missingBody", "unknownBody", "missingField", "outOfRange", "tooLong"] {
            #expect(errors[kind, default: 0] > 0, "the fuzzer should reach \(kind)")
        }
        #expect(errors["encodingFailed"] == nil)
    }

    static func kind(_ error: WireError) -> String {
        switch error {
        case .notProtobuf: "notProtobuf"
        case .missingBody: "missingBody"
        case .unknownBody: "unknownBody"
        case .missingField: "missingField"
        case .outOfRange: "outOfRange"
        case .tooLong: "tooLong"
        case .oversized: "oversized"
        case .encodingFailed: "encodingFailed"
        }
    }

    static func randomBytes(count: Int, using rng: inout SeededRandom) -> [UInt8] {
        (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
    }

    static func mutate(_ f: inout [UInt8], seeds: [[UInt8]], using rng: inout SeededRandom) {
        switch Int.random(in: 0..<8, using: &rng) {
        case 0 where !f.isEmpty:  // bit flip
            let i = Int.random(in: 0..<f.count, using: &rng)
            f[i] ^= 1 << UInt8.random(in: 0...7, using: &rng)
        case 1 where !f.isEmpty:  // random byte
            f[Int.random(in: 0..<f.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
        case 2 where !f.isEmpty:  // truncate
            f.removeLast(Int.random(in: 1...f.count, using: &rng))
        case 3:  // insert random bytes
            let at = Int.random(in: 0...f.count, using: &rng)
            f.insert(contentsOf: randomBytes(count: Int.random(in: 1...8, using: &rng), using: &rng), at: at)
        case 4 where f.count > 1:  // delete a range
            let a = Int.random(in: 0..<f.count, using: &rng)
            let b = Int.random(in: a...min(f.count, a + 16), using: &rng)
            f.removeSubrange(a..<b)
        case 5:  // splice another seed
            let other = seeds[Int.random(in: 0..<seeds.count, using: &rng)]
            let cut = Int.random(in: 0...f.count, using: &rng)
            let from = Int.random(in: 0...other.count, using: &rng)
            f = Array(f[..<cut]) + Array(other[from...])
        default:  // corrupt a length field somewhere in the tree
            let lengths = lengthFields(f)
            guard !lengths.isEmpty else {
                f.append(UInt8.random(in: 0...255, using: &rng))
                return
            }
            let (offset, size, value) = lengths[Int.random(in: 0..<lengths.count, using: &rng)]
            let candidates: [UInt64] = [0, value &+ 1, value &- 1, value &* 2, 0x7FFF_FFFF, 0xFFFF_FFFF, .max, UInt64.random(in: 0...300, using: &rng)]
            var w = ProtobufWriter()
            w.varint(candidates[Int.random(in: 0..<candidates.count, using: &rng)])
            f.replaceSubrange(offset..<(offset + size), with: w.bytes)
        }
    }

    /// (offset, byte size, value) of every length prefix of length-delimited fields, found by
    /// parsing the frame as protobuf and recursing into payloads that parse as messages.
    static func lengthFields(_ f: [UInt8]) -> [(Int, Int, UInt64)] {
        var out: [(Int, Int, UInt64)] = []
        _ = parse(f, 0, f.count, depth: 0, into: &out)
        return out
    }

    private static func readVarint(_ f: [UInt8], _ i: inout Int, _ end: Int) -> UInt64? {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while i < end, shift < 64 {
            let byte = f[i]
            i += 1
            value |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return value }
            shift += 7
        }
        return nil
    }

    private static func parse(_ f: [UInt8], _ start: Int, _ end: Int, depth: Int, into out: inout [(Int, Int, UInt64)]) -> Bool {
        var i = start
        var found: [(Int, Int, UInt64)] = []
        while i < end {
            guard let key = readVarint(f, &i, end), key >> 3 != 0 else { return false }
            switch key & 7 {
            case 0: guard readVarint(f, &i, end) != nil else { return false }
            case 1: i += 8
            case 5: i += 4
            case 2:
                let at = i
                guard let length = readVarint(f, &i, end), length <= UInt64(end - i) else { return false }
                found.append((at, i - at, length))
                if depth < 8 {
                    var nested: [(Int, Int, UInt64)] = []
                    if parse(f, i, i + Int(length), depth: depth + 1, into: &nested) { found += nested }
                }
                i += Int(length)
            default: return false
            }
            if i > end { return false }
        }
        out += found
        return true
    }
}

/// A decoded protobuf field tree (wire level, schema-agnostic) for structure-aware mutations.
enum PBTree {
    indirect enum Value {
        case varint(UInt64)
        case fixed64(UInt64)
        case fixed32(UInt32)
        case bytes([UInt8])
        case message([Field])
    }

    struct Field {
        var number: Int
        var value: Value
    }

    /// Parses `bytes` as a message; length-delimited payloads that parse as messages become
    /// nested trees. Nil when the bytes are not a well-formed message.
    static func parse(_ bytes: ArraySlice<UInt8>, depth: Int) -> [Field]? {
        var fields: [Field] = []
        var i = bytes.startIndex
        func varint() -> UInt64? {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while i < bytes.endIndex, shift < 64 {
                let byte = bytes[i]
                i += 1
                value |= UInt64(byte & 0x7F) << shift
                if byte & 0x80 == 0 { return value }
                shift += 7
            }
            return nil
        }
        while i < bytes.endIndex {
            guard let key = varint(), key >> 3 > 0, key >> 3 < 1 << 29 else { return nil }
            let number = Int(key >> 3)
            switch key & 7 {
            case 0:
                guard let v = varint() else { return nil }
                fields.append(Field(number: number, value: .varint(v)))
            case 1:
                guard bytes.endIndex - i >= 8 else { return nil }
                var v: UInt64 = 0
                for k in 0..<8 { v |= UInt64(bytes[i + k]) << (8 * UInt64(k)) }
                i += 8
                fields.append(Field(number: number, value: .fixed64(v)))
            case 5:
                guard bytes.endIndex - i >= 4 else { return nil }
                var v: UInt32 = 0
                for k in 0..<4 { v |= UInt32(bytes[i + k]) << (8 * UInt32(k)) }
                i += 4
                fields.append(Field(number: number, value: .fixed32(v)))
            case 2:
                guard let length = varint(), length <= UInt64(bytes.endIndex - i) else { return nil }
                let payload = bytes[i..<(i + Int(length))]
                i += Int(length)
                if depth < 8, !payload.isEmpty, let nested = parse(payload, depth: depth + 1) {
                    fields.append(Field(number: number, value: .message(nested)))
                } else {
                    fields.append(Field(number: number, value: .bytes(Array(payload))))
                }
            default:
                return nil
            }
        }
        return fields
    }

    static func serialize(_ fields: [Field]) -> [UInt8] {
        var w = ProtobufWriter()
        for field in fields {
            switch field.value {
            case .varint(let v):
                w.varintField(field.number, v)
            case .fixed64(let v):
                w.tag(field.number, wireType: 1)
                for k in 0..<8 { w.bytes.append(UInt8(truncatingIfNeeded: v >> (8 * UInt64(k)))) }
            case .fixed32(let v):
                w.tag(field.number, wireType: 5)
                for k in 0..<4 { w.bytes.append(UInt8(truncatingIfNeeded: v >> (8 * UInt32(k)))) }
            case .bytes(let b):
                w.bytesField(field.number, b)
            case .message(let nested):
                w.bytesField(field.number, serialize(nested))
            }
        }
        return w.bytes
    }

    /// Every path (indices from the root) to a field.
    static func paths(_ fields: [Field], prefix: [Int] = []) -> [[Int]] {
        var out: [[Int]] = []
        for (i, field) in fields.enumerated() {
            out.append(prefix + [i])
            if case .message(let nested) = field.value {
                out += paths(nested, prefix: prefix + [i])
            }
        }
        return out
    }

    static let interesting: [UInt64] = [
        0, 1, 2, 3, 7, 8, 9, 15, 16, 63, 64, 65, 127, 128, 255, 256, 600, 601, 3600, 3601, 60000,
        0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF, 1 << 32, 1 << 63, .max, .max - 1,
    ]

    static func mutate(_ fields: inout [Field], using rng: inout SeededRandom) {
        let all = paths(fields)
        guard !all.isEmpty else {
            fields.append(Field(number: Int.random(in: 1...200, using: &rng), value: .varint(1)))
            return
        }
        let path = all[Int.random(in: 0..<all.count, using: &rng)]
        mutate(&fields, at: path[...], using: &rng)
    }

    private static func mutate(_ fields: inout [Field], at path: ArraySlice<Int>, using rng: inout SeededRandom) {
        let index = path.first!
        if path.count > 1, case .message(var nested) = fields[index].value {
            mutate(&nested, at: path.dropFirst(), using: &rng)
            fields[index].value = .message(nested)
            return
        }
        switch Int.random(in: 0..<10, using: &rng) {
        case 0:  // interesting varint
            fields[index].value = .varint(interesting[Int.random(in: 0..<interesting.count, using: &rng)])
        case 1:  // random varint
            fields[index].value = .varint(UInt64.random(in: 0...UInt64.max, using: &rng) >> UInt64.random(in: 0...63, using: &rng))
        case 2:  // grow or replace a payload
            let sizes = [1, 8, 17, 33, 65, 129, 257, 513, 1025, 4097, 8193, 70_000]
            let size = sizes[Int.random(in: 0..<sizes.count, using: &rng)]
            var payload = [UInt8](repeating: UInt8(ascii: "a"), count: size)
            if Bool.random(using: &rng) { payload[Int.random(in: 0..<size, using: &rng)] = [0x00, 0xC3, 0xFF, 0x80][Int.random(in: 0..<4, using: &rng)] }
            fields[index].value = .bytes(payload)
        case 3:  // empty payload
            fields[index].value = .bytes([])
        case 4:  // remove the field
            fields.remove(at: index)
        case 5:  // repeat the field (exceeds @max_count of repeated fields)
            let copies = [1, 2, 9, 17, 65, 129, 300][Int.random(in: 0..<7, using: &rng)]
            fields.insert(contentsOf: Array(repeating: fields[index], count: copies), at: index)
        case 6:  // another field number
            fields[index].number = Bool.random(using: &rng)
                ? max(1, fields[index].number + Int.random(in: -2...2, using: &rng))
                : Int.random(in: 1...250, using: &rng)
        case 7:  // another wire type
            switch fields[index].value {
            case .varint(let v): fields[index].value = .fixed64(v)
            case .fixed64(let v): fields[index].value = .fixed32(UInt32(truncatingIfNeeded: v))
            case .fixed32(let v): fields[index].value = .bytes([UInt8(truncatingIfNeeded: v)])
            case .bytes(let b): fields[index].value = .varint(UInt64(b.count))
            case .message: fields[index].value = .varint(1)
            }
        case 8:  // swap with a sibling
            let other = Int.random(in: 0..<fields.count, using: &rng)
            fields.swapAt(index, other)
        default:  // bit flip inside a payload or value
            switch fields[index].value {
            case .varint(let v): fields[index].value = .varint(v ^ (1 << UInt64.random(in: 0...63, using: &rng)))
            case .bytes(var b) where !b.isEmpty:
                b[Int.random(in: 0..<b.count, using: &rng)] ^= 1 << UInt8.random(in: 0...7, using: &rng)
                fields[index].value = .bytes(b)
            default: fields[index].value = .varint(0)
            }
        }
    }
}
