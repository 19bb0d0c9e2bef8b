import NetplayWire

/// The opaque paging token of room lists: the last room id of the previous page, so a page
/// continues after it in room-id order however the registry changed in between (a room added
/// behind the cursor is not listed again, one removed ahead is simply not there).
///
/// Form: `r1.` followed by the room id's UTF-8 bytes in hexadecimal (≤ 128 characters, which
/// fits the 64-byte room id limit).
public enum PageToken {
    /// The token continuing after `roomId`.
    public static func after(_ roomId: String) -> String {
        "r1." + Hex.encode(roomId.utf8)
    }

    /// The room id a token continues after; "" for the first page. Throws BAD_REQUEST naming
    /// `field` when the token was not made by ``after(_:)``.
    public static func decode(_ token: String, field: String) throws(ServiceError) -> String {
        if token.isEmpty { return "" }
        let bad = ServiceError(.badRequest, "The page token is not one this service issued; start again with an empty token.",
                               field: field)
        guard token.hasPrefix("r1.") else { throw bad }
        guard let bytes = Hex.decode(token.dropFirst(3)), !bytes.isEmpty else { throw bad }
        guard let id = String(validating: bytes, as: UTF8.self) else { throw bad }
        return id
    }
}
