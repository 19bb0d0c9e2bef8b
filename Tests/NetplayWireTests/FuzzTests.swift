import NetplayWire
import Testing

/// Feeds the decoder random and mutated frames: it must never crash, and whatever it accepts must
/// re-encode and decode to the same frame.
@Suite("Fuzz")
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
        var rng = SplitMix64(seed: 0x6E65_7470_6C61_7921)
        let seeds = try Self.seeds()
        var accepted = 0
        var errors: [String: Int] = [:]
        for iteration in 0..<Self.iterations {
            let frame: [UInt8]
            if iteration % 10 == 0 {
                frame = Self.randomBytes(count: Int.random(in: 0...300, using: &rng), using: &rng)
            } else {
                var f = seeds[Int.random(in: 0..<seeds.count, using: &rng)]
                for _ in 0..<Int.random(in: 1...4, using: &rng) {
                    Self.mutate(&f, seeds: seeds, using: &rng)
                }
                frame = f
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
        #expect(errors["notProtobuf", default: 0] > 1000)
        #expect(errors.count >= 3, "mutations should reach several kinds of error")
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

    static func randomBytes(count: Int, using rng: inout SplitMix64) -> [UInt8] {
        (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
    }

    static func mutate(_ f: inout [UInt8], seeds: [[UInt8]], using rng: inout SplitMix64) {
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
