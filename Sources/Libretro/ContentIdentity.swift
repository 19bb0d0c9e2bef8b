import Foundation
import MemberwiseInit

/// What identifies a game's content for netplay: what a room announces and what joiners must
/// match (the coordinator compares CRC32, MD5 and the core; RetroArch compares the CRC32).
@PublicMemberwiseInit
public struct ContentIdentity: Sendable, Hashable {
    /// The content's name (its file name without extension).
    public var gameName: String
    /// CRC-32 of the content (``ContentDigest/crc32(_:)``).
    public var crc32: UInt32
    /// MD5 of the content, 16 bytes.
    public var md5: [UInt8]
    /// The core: `libretro.<library name>` (``LoadedCore/coreId(libraryName:)``).
    public var coreId: String
    /// The core's version.
    public var coreVersion: String
    /// The system, from the content's extension (`nes`).
    public var system: String
    /// The content's size in bytes.
    public var size: UInt64

    /// The identity of `bytes`, content of file `path` (its name and extension give the game
    /// name and system), run by the core `coreId` at `coreVersion`.
    public init(contentOf bytes: [UInt8], path: String, coreId: String, coreVersion: String) {
        let url = URL(fileURLWithPath: path)
        self.init(gameName: url.deletingPathExtension().lastPathComponent, crc32: ContentDigest.crc32(bytes),
                  md5: ContentDigest.md5(bytes), coreId: coreId, coreVersion: coreVersion,
                  system: url.pathExtension.lowercased(), size: UInt64(bytes.count))
    }
}

/// Content digests in the form RetroArch and the coordinator compare.
public enum ContentDigest {
    private static let crcTable: [UInt32] = (0 ..< 256).map { index in
        var value = UInt32(index)
        for _ in 0 ..< 8 { value = value & 1 == 1 ? 0xEDB8_8320 ^ (value >> 1) : value >> 1 }
        return value
    }

    /// CRC-32 (IEEE 802.3, as zlib and RetroArch compute it).
    public static func crc32(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBytes { crc32($0) }
    }

    /// CRC-32 of the bytes in place (no copy: a frontend hashes disc images of gigabytes).
    public static func crc32(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes { crc = crcTable[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
        return crc ^ 0xFFFF_FFFF
    }

    private static let shifts: [UInt32] = [7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
                                           5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20,
                                           4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
                                           6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21]
    private static let constants: [UInt32] = (0 ..< 64).map { UInt32(truncatingIfNeeded: Int64(abs(sin(Double($0 + 1))) * 4_294_967_296)) }

    /// MD5 (RFC 1321), 16 bytes.
    public static func md5(_ bytes: [UInt8]) -> [UInt8] {
        bytes.withUnsafeBytes { md5($0) }
    }

    /// MD5 of the bytes in place: whole blocks are read where they lie and only the last one or
    /// two, with the padding and the length, are built aside (a copy of the message with its
    /// padding appended cost three times a disc image's size in memory).
    public static func md5(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        var a0: UInt32 = 0x6745_2301, b0: UInt32 = 0xEFCD_AB89, c0: UInt32 = 0x98BA_DCFE, d0: UInt32 = 0x1032_5476
        var words = [UInt32](repeating: 0, count: 16)
        func block(_ chunk: UnsafeRawBufferPointer) {
            for index in 0 ..< 16 {
                let base = index * 4
                words[index] = UInt32(chunk[base]) | UInt32(chunk[base + 1]) << 8
                    | UInt32(chunk[base + 2]) << 16 | UInt32(chunk[base + 3]) << 24
            }
            var a = a0, b = b0, c = c0, d = d0
            for round in 0 ..< 64 {
                var f: UInt32
                let g: Int
                switch round {
                case 0 ..< 16: f = (b & c) | (~b & d); g = round
                case 16 ..< 32: f = (d & b) | (~d & c); g = (5 * round + 1) % 16
                case 32 ..< 48: f = b ^ c ^ d; g = (3 * round + 5) % 16
                default: f = c ^ (b | ~d); g = (7 * round) % 16
                }
                f = f &+ a &+ constants[round] &+ words[g]
                a = d; d = c; c = b
                b = b &+ ((f << shifts[round]) | (f >> (32 - shifts[round])))
            }
            a0 = a0 &+ a; b0 = b0 &+ b; c0 = c0 &+ c; d0 = d0 &+ d
        }
        let whole = bytes.count / 64 * 64
        var offset = 0
        while offset < whole {
            block(UnsafeRawBufferPointer(rebasing: bytes[offset ..< offset + 64]))
            offset += 64
        }
        // The rest, 0x80, zeros to 56 bytes past a block boundary, the length in bits.
        var tail = Array(bytes[whole...])
        let bitLength = UInt64(bytes.count) &* 8
        tail.append(0x80)
        while tail.count % 64 != 56 { tail.append(0) }
        for index in 0 ..< 8 { tail.append(UInt8(truncatingIfNeeded: bitLength >> (8 * UInt64(index)))) }
        tail.withUnsafeBytes { rest in
            for start in stride(from: 0, to: rest.count, by: 64) { block(UnsafeRawBufferPointer(rebasing: rest[start ..< start + 64])) }
        }
        var digest: [UInt8] = []
        for word in [a0, b0, c0, d0] { for index in 0 ..< 4 { digest.append(UInt8(truncatingIfNeeded: word >> (8 * UInt32(index)))) } }
        return digest
    }
}
