import CSodium

/// libsodium, initialised once before first use: random bytes, HMAC-SHA256 and constant-time
/// comparison. Every entry point of NetplayAuth goes through here, so callers never call
/// `sodium_init` themselves.
public enum Sodium {
    private static let initialised: Bool = sodium_init() >= 0

    /// Traps if libsodium cannot initialise (no entropy source: the process cannot be secure).
    static func ensure() {
        precondition(initialised, "libsodium failed to initialise (no entropy source?)")
    }

    /// `count` bytes from the operating system's CSPRNG.
    public static func randomBytes(_ count: Int) -> [UInt8] {
        ensure()
        var bytes = [UInt8](repeating: 0, count: count)
        bytes.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, $0.count) }
        return bytes
    }

    /// Compares two byte strings in time that depends only on their length (never on where they
    /// differ). Different lengths compare unequal at once: lengths are not secret here.
    public static func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        ensure()
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return a.withUnsafeBytes { pa in b.withUnsafeBytes { pb in sodium_memcmp(pa.baseAddress!, pb.baseAddress!, a.count) == 0 } }
    }

    /// Whether two secrets of any length are equal, in time that tells nothing of either, their
    /// lengths included (``constantTimeEquals(_:_:)`` returns at once on a length mismatch): both
    /// are compared as HMACs under a key random to this process. For plain-text secrets such as a
    /// LAN room's passwords.
    public static func secretsEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        constantTimeEquals(hmacSHA256(key: comparisonKey, a), hmacSHA256(key: comparisonKey, b))
    }

    private static let comparisonKey = randomBytes(32)

    /// HMAC-SHA256 of `parts` (concatenated) under `key` (any length).
    public static func hmacSHA256(key: [UInt8], _ parts: [UInt8]...) -> [UInt8] {
        ensure()
        var state = crypto_auth_hmacsha256_state()
        var mac = [UInt8](repeating: 0, count: 32)
        var zero: UInt8 = 0
        key.withUnsafeBufferPointer { _ = crypto_auth_hmacsha256_init(&state, $0.baseAddress ?? withUnsafePointer(to: &zero) { $0 }, $0.count) }
        for part in parts where !part.isEmpty {
            part.withUnsafeBufferPointer { _ = crypto_auth_hmacsha256_update(&state, $0.baseAddress!, UInt64($0.count)) }
        }
        mac.withUnsafeMutableBufferPointer { _ = crypto_auth_hmacsha256_final(&state, $0.baseAddress!) }
        return mac
    }
}
