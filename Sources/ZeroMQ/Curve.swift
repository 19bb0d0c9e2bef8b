import CZeroMQ

/// Z85, ZeroMQ's printable encoding for keys (RFC 32): 4 bytes become 5 characters.
public enum Z85 {
    /// Encodes `bytes` (length a multiple of 4). Returns `nil` for other lengths.
    public static func encode(_ bytes: [UInt8]) -> String? {
        guard bytes.count % 4 == 0 else { return nil }
        var output = [CChar](repeating: 0, count: bytes.count * 5 / 4 + 1)
        let ok = output.withUnsafeMutableBufferPointer { out in
            bytes.withUnsafeBufferPointer { zmq_z85_encode(out.baseAddress, $0.baseAddress, $0.count) != nil }
        }
        guard ok else { return nil }
        return String(decoding: output.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Decodes Z85 `text` (length a multiple of 5, alphabet checked). Returns `nil` when invalid.
    public static func decode(_ text: String) -> [UInt8]? {
        let characters = Array(text.utf8)
        guard characters.count % 5 == 0, characters.allSatisfy(isAlphabet) else { return nil }
        var output = [UInt8](repeating: 0, count: characters.count * 4 / 5)
        let ok = output.withUnsafeMutableBufferPointer { out in
            text.withCString { zmq_z85_decode(out.baseAddress, $0) != nil }
        }
        return ok ? output : nil
    }

    private static let alphabet = Set(
        "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#".utf8)

    private static func isAlphabet(_ byte: UInt8) -> Bool { alphabet.contains(byte) }
}

/// A CurveZMQ long-term key pair, held as 32 raw bytes each.
public struct CurveKeyPair: Sendable, Equatable {
    /// The public key (32 bytes); share it with clients.
    public let publicKey: [UInt8]
    /// The secret key (32 bytes); keep it private.
    public let secretKey: [UInt8]

    /// Builds a pair from raw keys; both must be 32 bytes.
    public init(publicKey: [UInt8], secretKey: [UInt8]) throws(ZMQError) {
        guard publicKey.count == 32, secretKey.count == 32 else { throw ZMQError.invalidArgument }
        self.publicKey = publicKey
        self.secretKey = secretKey
    }

    /// Builds a pair from Z85 text (40 characters each).
    public init(publicZ85: String, secretZ85: String) throws(ZMQError) {
        guard let publicKey = Z85.decode(publicZ85), let secretKey = Z85.decode(secretZ85) else {
            throw ZMQError.invalidArgument
        }
        try self.init(publicKey: publicKey, secretKey: secretKey)
    }

    /// Derives the pair for a secret key given in Z85.
    public init(secretZ85: String) throws(ZMQError) {
        var publicText = [CChar](repeating: 0, count: 41)
        guard Z85.decode(secretZ85)?.count == 32,
              zmq_curve_public(&publicText, secretZ85) == 0 else { throw ZMQError.invalidArgument }
        let publicZ85 = String(decoding: publicText.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        try self.init(publicZ85: publicZ85, secretZ85: secretZ85)
    }

    /// Generates a fresh random pair. Throws ``ZMQError/notSupported`` when libzmq lacks CURVE.
    public static func generate() throws(ZMQError) -> CurveKeyPair {
        var publicText = [CChar](repeating: 0, count: 41)
        var secretText = [CChar](repeating: 0, count: 41)
        try check(zmq_curve_keypair(&publicText, &secretText))
        func text(_ chars: [CChar]) -> String {
            String(decoding: chars.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        return try CurveKeyPair(publicZ85: text(publicText), secretZ85: text(secretText))
    }

    /// The public key as Z85 text.
    public var publicZ85: String { Z85.encode(publicKey)! }
    /// The secret key as Z85 text.
    public var secretZ85: String { Z85.encode(secretKey)! }
}

extension Socket {
    /// Makes this socket a CurveZMQ server with `keys`: every peer must be a CURVE client that
    /// knows our public key. Call before bind.
    public func makeCurveServer(_ keys: CurveKeyPair) throws(ZMQError) {
        try set([.curveServer(true), .curveSecretKey(keys.secretKey), .curvePublicKey(keys.publicKey)])
    }

    /// Makes this socket a CurveZMQ client of the server whose public key is `serverKey`,
    /// authenticating with `keys` (generated per client if you have none). Call before connect.
    public func makeCurveClient(serverKey: [UInt8], keys: CurveKeyPair) throws(ZMQError) {
        try set([.curveServerKey(serverKey), .curvePublicKey(keys.publicKey), .curveSecretKey(keys.secretKey)])
    }
}
