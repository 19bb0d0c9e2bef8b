import CNetplayAPI

// Strings across the C boundary: fixed-size char fields of the header's structs, and optional
// C strings passed in.

/// Copies `string` into a fixed-size C char array field (a tuple), NUL-terminated, truncated at
/// a UTF-8 character boundary when it does not fit.
func copyCString<Field>(_ string: String, into field: inout Field) {
    withUnsafeMutableBytes(of: &field) { buffer in
        guard buffer.count > 0 else { return }
        var bytes = Array(string.utf8.prefix(buffer.count - 1))
        if bytes.count < string.utf8.count, let last = bytes.indices.last {
            // Drop a character cut in the middle.
            var start = last
            while start > 0 && bytes[start] & 0xC0 == 0x80 { start -= 1 }
            let lead = bytes[start]
            let length = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2
            if bytes.count - start < length { bytes.removeSubrange(start...) }
        }
        buffer.initializeMemory(as: UInt8.self, repeating: 0)
        buffer.copyBytes(from: bytes)
    }
}

/// Copies `string` into a caller's buffer of `capacity` bytes (with the NUL).
func copyCString(_ string: String, to out: UnsafeMutablePointer<CChar>, capacity: Int) throws(CAPIFailure) {
    let bytes = Array(string.utf8)
    guard bytes.count < capacity else {
        throw CAPIFailure(NP_ERR_BUFFER_TOO_SMALL, "\(bytes.count + 1) bytes are needed, the buffer has \(capacity)")
    }
    bytes.withUnsafeBufferPointer { source in
        out.withMemoryRebound(to: UInt8.self, capacity: capacity) { target in
            if let base = source.baseAddress { target.update(from: base, count: source.count) }
            target[source.count] = 0
        }
    }
}

/// The text of a fixed-size C char array field (up to its first NUL or its end).
func string<Field>(fromCField field: Field) -> String {
    withUnsafeBytes(of: field) { buffer in
        let end = buffer.firstIndex(of: 0) ?? buffer.count
        return String(decoding: buffer[..<end], as: UTF8.self)
    }
}

/// A C string argument, nil for NULL.
func string(_ pointer: UnsafePointer<CChar>?) -> String? {
    pointer.map { String(cString: $0) }
}
