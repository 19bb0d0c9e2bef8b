/// The opaque paging token of room lists: the last room id of the previous page, so a page
/// continues after it in room-id order however the registry changed in between (a room added
/// behind the cursor is not listed again, one removed ahead is simply not there).
///
/// Form: `r1.` followed by the room id's UTF-8 bytes in hexadecimal (≤ 128 characters, which
/// fits the 64-byte room id limit).
public enum PageToken {
    /// The token continuing after `roomId`.
    public static func after(_ roomId: String) -> String {
        "r1." + hex(Array(roomId.utf8))
    }

    /// The room id a token continues after; "" for the first page. Throws BAD_REQUEST naming
    /// `field` when the token was not made by ``after(_:)``.
    public static func decode(_ token: String, field: String) throws(ServiceError) -> String {
        if token.isEmpty { return "" }
        let bad = ServiceError(.badRequest, "The page token is not one this service issued; start again with an empty token.",
                               field: field)
        guard token.hasPrefix("r1.") else { throw bad }
        let digits = Array(token.utf8.dropFirst(3))
        guard digits.count % 2 == 0, !digits.isEmpty else { throw bad }
        var bytes: [UInt8] = []
        var index = 0
        while index < digits.count {
            guard let high = nibble(digits[index]), let low = nibble(digits[index + 1]) else { throw bad }
            bytes.append(high << 4 | low)
            index += 2
        }
        guard let id = String(validating: bytes, as: UTF8.self) else { throw bad }
        return id
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: c - 0x30
        case 0x61...0x66: c - 0x61 + 10
        default: nil
        }
    }

    private static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
