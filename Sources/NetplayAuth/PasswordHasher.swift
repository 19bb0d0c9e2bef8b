import CSodium
import MemberwiseInit

/// Salted password hashing for room passwords at rest: Argon2id through libsodium's
/// `crypto_pwhash_str`, whose output string carries the algorithm, cost, salt and hash; checking
/// compares in constant time.
///
/// Hashing is deliberately slow (tens of milliseconds at the default cost): run it off the
/// service's reactor thread, and rate-limit attempts.
@PublicMemberwiseInit
public struct PasswordHasher: Sendable {
    /// Argon2id passes.
    public let opsLimit: UInt64
    /// Argon2id memory in bytes.
    public let memLimit: Int

    /// libsodium's "interactive" cost (2 passes, 64 MiB): the recommended minimum for logins.
    public static let interactive = PasswordHasher(opsLimit: UInt64(crypto_pwhash_opslimit_interactive()),
                                                   memLimit: crypto_pwhash_memlimit_interactive())
    /// libsodium's "moderate" cost (3 passes, 256 MiB): stronger, about 0.7 s per hash.
    public static let moderate = PasswordHasher(opsLimit: UInt64(crypto_pwhash_opslimit_moderate()),
                                                memLimit: crypto_pwhash_memlimit_moderate())
    /// The cheapest cost libsodium accepts: for tests only.
    public static let testing = PasswordHasher(opsLimit: UInt64(crypto_pwhash_opslimit_min()), memLimit: 8192)

    /// The encoded hash of `password` (an ASCII string starting `$argon2id$`), with a fresh salt.
    /// Returns nil only when the system cannot allocate the memory the cost needs.
    public func hash(_ password: String) -> String? {
        Sodium.ensure()
        var out = [CChar](repeating: 0, count: crypto_pwhash_strbytes())
        let chars = Self.cString(password)
        let status = crypto_pwhash_str(&out, chars, UInt64(chars.count - 1), opsLimit, memLimit)
        guard status == 0 else { return nil }
        return String(decoding: out.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// True when `password` matches `encoded` (from ``hash(_:)``, any cost). Constant-time in the
    /// comparison; a malformed `encoded` never matches.
    public static func verify(_ password: String, against encoded: String) -> Bool {
        Sodium.ensure()
        var stored = [CChar](repeating: 0, count: crypto_pwhash_strbytes())
        let encodedBytes = Array(encoded.utf8)
        guard encodedBytes.count < stored.count else { return false }
        for (index, byte) in encodedBytes.enumerated() { stored[index] = CChar(bitPattern: byte) }
        let chars = cString(password)
        return crypto_pwhash_str_verify(&stored, chars, UInt64(chars.count - 1)) == 0
    }

    /// The password's UTF-8 bytes plus a terminating NUL (never empty, so never a nil pointer).
    private static func cString(_ text: String) -> [CChar] {
        var chars = text.utf8.map { CChar(bitPattern: $0) }
        chars.append(0)
        return chars
    }
}
