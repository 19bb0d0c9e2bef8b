import Foundation
import NetplayWire

/// The opaque paging token of room lists: the last room id of the previous page, so a page
/// continues after it in room-id order however the registry changed in between (a room added
/// behind the cursor is not listed again, one removed ahead is simply not there).
///
/// Form: `r2.` followed by the room id's UTF-8 bytes in unpadded base64url (at most 89
/// characters for the 64-byte room id limit, within the wire's 128). The first form, `r1.` and
/// hexadecimal, is still read, but a 64-byte id made 131 characters: the page ending at such a
/// room failed to encode, and every listing and watch reaching it got INTERNAL.
public enum PageToken {
    /// The token continuing after `roomId`.
    public static func after(_ roomId: String) -> String {
        let base64 = Data(roomId.utf8).base64EncodedString()
        return "r2." + String(base64.compactMap { character -> Character? in
            switch character {
            case "+": "-"
            case "/": "_"
            case "=": nil
            default: character
            }
        })
    }

    /// The room id a token continues after; "" for the first page. Throws BAD_REQUEST naming
    /// `field` when the token was not made by ``after(_:)``.
    public static func decode(_ token: String, field: String) throws(ServiceError) -> String {
        if token.isEmpty { return "" }
        let bad = ServiceError(.badRequest, "The page token is not one this service issued; start again with an empty token.",
                               field: field)
        let bytes: [UInt8]?
        if token.hasPrefix("r2.") {
            var base64 = String(token.dropFirst(3).map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 })
            guard !base64.contains("=") else { throw bad }
            base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
            bytes = Data(base64Encoded: base64).map(Array.init)
        } else if token.hasPrefix("r1.") {
            bytes = Hex.decode(token.dropFirst(3))
        } else {
            throw bad
        }
        guard let bytes, !bytes.isEmpty, let id = String(validating: bytes, as: UTF8.self) else { throw bad }
        return id
    }
}
