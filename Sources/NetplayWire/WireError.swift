/// Everything that can go wrong while encoding or decoding a netplay.v1 frame.
///
/// Decoding never crashes: any input is either a valid message or one of these errors. A service
/// answers a request that fails to decode with an `ErrorReply` built from the error
/// (`ErrorReply(error)`), whose code comes from ``errorCode``.
public enum WireError: Error, Sendable, Equatable, Hashable, CustomStringConvertible {
    /// The bytes are not a protobuf encoding of the expected message (corrupt or truncated).
    case notProtobuf
    /// The envelope decoded but carries no body at all.
    case missingBody
    /// The envelope carries no body this build knows; `fieldNumber` is the unknown body's field
    /// number (typically a newer peer's message).
    case unknownBody(fieldNumber: Int)
    /// A required field (message path, e.g. `"AttachRequest.ticket"`) is absent or empty.
    case missingField(String)
    /// A field holds a value outside its declared range, an unknown enum value, invalid UTF-8,
    /// or an embedded NUL character.
    case outOfRange(field: String, detail: String)
    /// A string or bytes field is longer than `limit` bytes, or a repeated field has more than
    /// `limit` elements.
    case tooLong(field: String, limit: Int)
    /// The whole frame is `size` bytes, above the `limit` of ``WireLimits/maxFrameBytes``.
    case oversized(size: Int, limit: Int)
    /// protobuf-c failed to pack a message (should not happen; reported rather than trapped).
    case encodingFailed(String)

    /// One clear human sentence describing the failure.
    public var description: String {
        switch self {
        case .notProtobuf:
            "The frame is not a valid netplay.v1 protobuf message (corrupt or truncated)."
        case .missingBody:
            "The envelope has no body."
        case .unknownBody(let fieldNumber):
            "The envelope's body has field number \(fieldNumber), which this build does not know."
        case .missingField(let field):
            "Required field \(field) is missing or empty."
        case .outOfRange(let field, let detail):
            "Field \(field) is out of range: \(detail)."
        case .tooLong(let field, let limit):
            "Field \(field) exceeds its limit of \(limit) (bytes, or elements for a list)."
        case .oversized(let size, let limit):
            "The frame is \(size) bytes, over the limit of \(limit) bytes."
        case .encodingFailed(let detail):
            "Encoding failed: \(detail)."
        }
    }

    /// The error code a service sends back (in an `ErrorReply`) when a request fails this way.
    public var errorCode: ErrorCode {
        switch self {
        case .notProtobuf: .malformed
        case .missingBody: .malformed
        case .unknownBody: .unknownRequest
        case .missingField, .outOfRange, .tooLong: .badRequest
        case .oversized: .payloadTooLarge
        case .encodingFailed: .internal
        }
    }

    /// The offending field path, when the error is about one field.
    public var field: String? {
        switch self {
        case .missingField(let field), .outOfRange(let field, _), .tooLong(let field, _): field
        default: nil
        }
    }
}

extension ErrorReply {
    /// The reply a service sends for a request that failed to decode or validate.
    public init(_ error: WireError) {
        self.init(code: error.errorCode, message: error.description, field: error.field ?? "")
    }
}
