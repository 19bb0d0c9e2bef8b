import CNetplayProto

/// A netplay.v1 message: a Swift value that converts to and from its protobuf-c encoding.
///
/// Every message of the schema conforms (the conformances are generated). Services exchange
/// ``Envelope``s; encoding another message alone is for the few places that need its bytes, such
/// as signing a `JoinTicket` or writing replay records.
public protocol WireMessage: Sendable, Hashable {
    /// The message's name in the schema, e.g. `"HealthRequest"` (`"Error"` for ``ErrorReply``).
    static var protoName: String { get }
    /// Validates and encodes the message.
    func encoded() throws(WireError) -> [UInt8]
    /// Decodes and validates a message; any bad input is a ``WireError``, never a crash.
    init(decoding bytes: [UInt8], limits: WireLimits) throws(WireError)
    /// Decodes and validates a message from borrowed memory (zero-copy receive paths).
    init(decoding bytes: UnsafeRawBufferPointer, limits: WireLimits) throws(WireError)
    /// The message as a one-line JSON object: lowerCamelCase field names, every field present
    /// (absent sub-messages omitted), enums by schema name, 64-bit integers as numbers, bytes as
    /// lowercase hex strings.
    func jsonLine() -> String
}

extension WireMessage {
    /// What keeps the message off the wire (a field past its limit, a required one missing), or
    /// nil when it encodes: for checking what a caller gave before anything is sent.
    public var wireProblem: WireError? {
        do {
            _ = try encoded()
            return nil
        } catch {
            return error
        }
    }
}

/// The generated bridge between a Swift message and its protobuf-c struct.
protocol _CMessage {
    associatedtype CStruct
    static func _cUnpack(_ count: Int, _ data: UnsafePointer<UInt8>) -> UnsafeMutablePointer<CStruct>?
    static func _cFree(_ p: UnsafeMutablePointer<CStruct>)
    static func _cPackedSize(_ p: UnsafePointer<CStruct>) -> Int
    static func _cPack(_ p: UnsafePointer<CStruct>, _ out: UnsafeMutablePointer<UInt8>) -> Int
    /// Initializes `c` and fills it from `self`, allocating everything it points to in `arena`.
    func _fill(_ c: UnsafeMutablePointer<CStruct>, _ arena: WireArena, _ validate: Bool) throws(WireError)
    /// Converts (and validates) an unpacked struct.
    init(_c c: UnsafePointer<CStruct>) throws(WireError)
    func _json(_ w: inout _JSONWriter)
}

/// Converts `message` into a C struct tree in an arena, packs it, and frees the tree.
func _wireEncode<M: _CMessage>(_ message: M, limits: WireLimits, validate: Bool) throws(WireError) -> [UInt8] {
    let arena = WireArena()
    return try withExtendedLifetime(arena) { () throws(WireError) -> [UInt8] in
        let c = arena.allocate(M.CStruct.self)
        try message._fill(c, arena, validate)
        let size = M._cPackedSize(c)
        if size > limits.maxFrameBytes {
            throw .oversized(size: size, limit: limits.maxFrameBytes)
        }
        if size == 0 { return [] }
        var written = 0
        let bytes = [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
            written = M._cPack(c, buffer.baseAddress!)
            count = min(written, size)
        }
        guard written == size else {
            throw .encodingFailed("protobuf-c packed \(written) of \(size) bytes")
        }
        return bytes
    }
}

/// Unpacks with protobuf-c, converts to Swift, and always frees the unpacked tree.
func _wireDecode<M: _CMessage>(_ bytes: UnsafeRawBufferPointer, _ limits: WireLimits) throws(WireError) -> M {
    if bytes.count > limits.maxFrameBytes {
        throw .oversized(size: bytes.count, limit: limits.maxFrameBytes)
    }
    let unpacked: UnsafeMutablePointer<M.CStruct>?
    if let base = bytes.baseAddress, bytes.count > 0 {
        unpacked = M._cUnpack(bytes.count, base.assumingMemoryBound(to: UInt8.self))
    } else {
        let empty: UInt8 = 0
        unpacked = withUnsafePointer(to: empty) { M._cUnpack(0, $0) }
    }
    guard let unpacked else { throw .notProtobuf }
    defer { M._cFree(unpacked) }
    return try M(_c: unpacked)
}

func _wireDecode<M: _CMessage>(_ bytes: [UInt8], _ limits: WireLimits) throws(WireError) -> M {
    let result = bytes.withUnsafeBytes { raw in
        Result { () throws(WireError) -> M in try _wireDecode(raw, limits) }
    }
    return try result.get()
}

extension Envelope {
    /// Encodes without validating the fields, so tests can produce frames that break the
    /// schema's rules and check that decoding rejects them. Never use it in a service.
    @_spi(WireTesting)
    public func encoded(validating: Bool) throws(WireError) -> [UInt8] {
        try _wireEncode(self, limits: .default, validate: validating)
    }

    /// Encodes the frame with a frame limit other than the default.
    public func encoded(limits: WireLimits) throws(WireError) -> [UInt8] {
        try _wireEncode(self, limits: limits, validate: true)
    }
}

extension Envelope {
    /// The reply to this request: `body` under the same request id.
    public func reply(_ body: Body) -> Envelope {
        Envelope(requestId: requestId, body: body)
    }
}
