import CNetplayProto

// Validation and conversion helpers called by the generated code. Field paths are
// "<Message>.<proto_field>", e.g. "Room.room_id".

@inline(__always)
func _wireCheckString(_ value: String, _ field: String, maxLen: Int, required: Bool) throws(WireError) {
    let utf8 = value.utf8
    let count = utf8.count
    if count > maxLen { throw .tooLong(field: field, limit: maxLen) }
    if required && count == 0 { throw .missingField(field) }
    if utf8.contains(0) { throw .outOfRange(field: field, detail: "contains a NUL character") }
}

@inline(__always)
func _wireCheckBytes(_ value: [UInt8], _ field: String, maxLen: Int, required: Bool) throws(WireError) {
    if value.count > maxLen { throw .tooLong(field: field, limit: maxLen) }
    if required && value.isEmpty { throw .missingField(field) }
}

@inline(__always)
func _wireCheckCount(_ count: Int, _ maxCount: Int, _ field: String) throws(WireError) {
    if count > maxCount { throw .tooLong(field: field, limit: maxCount) }
}

@inline(__always)
func _wireCheckRange<T: BinaryInteger>(_ value: T, _ range: ClosedRange<T>, _ field: String) throws(WireError) {
    if !range.contains(value) {
        throw .outOfRange(field: field, detail: "\(value) is outside \(range.lowerBound)...\(range.upperBound)")
    }
}

@inline(__always)
func _wireCheckedRange<T: BinaryInteger>(_ value: T, _ range: ClosedRange<T>, _ field: String) throws(WireError) -> T {
    try _wireCheckRange(value, range, field)
    return value
}

func _wireReadString(_ pointer: UnsafeMutablePointer<CChar>?, _ field: String, maxLen: Int, required: Bool) throws(WireError) -> String {
    guard let pointer else {
        if required { throw .missingField(field) }
        return ""
    }
    // protobuf-c NUL-terminates every string it unpacks; scan at most one byte past the limit.
    var count = 0
    while pointer[count] != 0 {
        count += 1
        if count > maxLen { throw .tooLong(field: field, limit: maxLen) }
    }
    if count == 0 {
        if required { throw .missingField(field) }
        return ""
    }
    let bytes = UnsafeRawBufferPointer(start: pointer, count: count)
    guard let string = String(validating: bytes, as: UTF8.self) else {
        throw .outOfRange(field: field, detail: "is not valid UTF-8")
    }
    return string
}

func _wireReadBytes(_ data: ProtobufCBinaryData, _ field: String, maxLen: Int, required: Bool) throws(WireError) -> [UInt8] {
    if data.len > maxLen { throw .tooLong(field: field, limit: maxLen) }
    guard data.len > 0, let base = data.data else {
        if required { throw .missingField(field) }
        return []
    }
    return Array(UnsafeBufferPointer(start: base, count: data.len))
}

@inline(__always)
func _wireReadEnum<E: RawRepresentable, R: BinaryInteger>(_ type: E.Type, _ raw: R, _ field: String) throws(WireError) -> E
where E.RawValue == Int32 {
    let value = Int32(truncatingIfNeeded: raw)
    guard let result = E(rawValue: value) else {
        throw .outOfRange(field: field, detail: "\(value) is not a value of enum \(E.self)")
    }
    return result
}

/// Writes one-line JSON for the generated `_json` methods.
struct _JSONWriter {
    private(set) var output = ""
    private var needsComma = false

    init() {
        output.reserveCapacity(256)
    }

    private mutating func separate() {
        if needsComma { output += "," }
    }

    /// An object or array starts: its first member needs no comma.
    private mutating func begin(_ bracket: String) {
        separate()
        output += bracket
        needsComma = false
    }

    /// An object or array ends: whatever follows it is its container's next member.
    private mutating func end(_ bracket: String) {
        output += bracket
        needsComma = true
    }

    mutating func open() { begin("{") }
    mutating func close() { end("}") }
    mutating func openArray() { begin("[") }
    mutating func closeArray() { end("]") }

    mutating func key(_ key: String) {
        separate()
        output += "\""
        output += key
        output += "\":"
        needsComma = false
    }

    mutating func string(_ value: String) {
        separate()
        JSONText.appendQuoted(value, to: &output)
        needsComma = true
    }

    mutating func bool(_ value: Bool) {
        separate()
        output += value ? "true" : "false"
        needsComma = true
    }

    mutating func integer<T: BinaryInteger>(_ value: T) {
        separate()
        output += String(value)
        needsComma = true
    }

    mutating func float(_ value: Double) {
        separate()
        output += value.isFinite ? String(value) : "\"\(value)\""
        needsComma = true
    }

    mutating func float(_ value: Float) {
        separate()
        output += value.isFinite ? String(value) : "\"\(value)\""
        needsComma = true
    }

    mutating func bytes(_ value: [UInt8]) {
        separate()
        output += "\""
        output += Hex.encode(value)
        output += "\""
        needsComma = true
    }
}

/// JSON string literals, written one way for the generated `_json` methods and every hand-written
/// JSON renderer that depends on this module.
public enum JSONText {
    private static let hexDigits = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "a", "b", "c", "d", "e", "f"]

    /// Appends `text` to `output` as a quoted JSON string: quote, backslash and control
    /// characters (and DEL) escaped, everything else as it is.
    public static func appendQuoted(_ text: String, to output: inout String) {
        output += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                output += "\\u00"
                output += hexDigits[Int(scalar.value >> 4)]
                output += hexDigits[Int(scalar.value & 0xF)]
            default:
                output.unicodeScalars.append(scalar)
            }
        }
        output += "\""
    }
}
