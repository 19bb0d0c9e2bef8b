import ArgumentParser
import Foundation
import NetplayService
import NetplayWire

/// The cluster secrets that sign join tickets, by key id (rotation: sign with the newest, accept
/// every listed one).
///
/// Text form (flag, environment variable or file): `HEX` (key id 1), or a comma-separated list of
/// `ID:HEX`, e.g. `1:9f...,2:c4...`. Every key is at least 16 bytes (32 recommended).
public struct TicketKeyRing: Sendable, Equatable {
    /// Secrets by key id.
    public let keys: [UInt32: [UInt8]]
    /// The key id new tickets are signed with (the highest).
    public let signingKeyId: UInt32

    /// The shortest key accepted, in bytes.
    public static let minimumKeyBytes = 16

    /// A ring holding `keys`; signs with the highest id. Throws when empty or a key is short.
    public init(keys: [UInt32: [UInt8]]) throws(KeyRingError) {
        guard let newest = keys.keys.max() else { throw KeyRingError("no ticket key given") }
        for (id, key) in keys where key.count < Self.minimumKeyBytes {
            throw KeyRingError("ticket key \(id) is \(key.count) bytes; at least \(Self.minimumKeyBytes) are required")
        }
        self.keys = keys
        signingKeyId = newest
    }

    /// A ring with one secret under key id 1.
    public init(secret: [UInt8]) throws(KeyRingError) {
        try self.init(keys: [1: secret])
    }

    /// A fresh random 32-byte secret under key id 1 (single-node development).
    public static func generate() -> TicketKeyRing {
        // 32 random bytes always satisfy the length rule.
        try! TicketKeyRing(secret: Sodium.randomBytes(32))
    }

    /// Parses the text form (see the type's documentation).
    public init(parsing text: String) throws(KeyRingError) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else { throw KeyRingError("the cluster secret is empty") }
        var keys: [UInt32: [UInt8]] = [:]
        let entries = trimmed.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        for entry in entries {
            let parts = entry.split(separator: ":", maxSplits: 1)
            let id: UInt32
            let hex: Substring
            if parts.count == 2 {
                guard let parsed = UInt32(parts[0]) else {
                    throw KeyRingError("cluster secret entry '\(parts[0]):...' has a bad key id (want ID:HEX)")
                }
                id = parsed
                hex = parts[1]
            } else if entries.count == 1 {
                id = 1
                hex = Substring(entry)
            } else {
                throw KeyRingError("a cluster secret list needs ID:HEX entries")
            }
            guard let key = Hex.decode(hex) else {
                throw KeyRingError("cluster secret key \(id) is not hexadecimal")
            }
            guard keys[id] == nil else { throw KeyRingError("cluster secret key id \(id) appears twice") }
            keys[id] = key
        }
        try self.init(keys: keys)
    }

    /// The cluster secret a service was given: `secret` (`--cluster-secret`, else
    /// NETPLAY_CLUSTER_SECRET), else the file `file` names (`--cluster-secret-file`, else
    /// NETPLAY_CLUSTER_SECRET_FILE), else the first of `fallbackFiles` it can read; nil when there
    /// is none. A malformed or unreadable one is a one-line `ValidationError` naming the flag.
    public static func configured(secret: String?, file: String?, setting: SettingResolver,
                                  fallbackFiles: [String] = []) throws -> TicketKeyRing? {
        do {
            if let text = setting.text(secret, "NETPLAY_CLUSTER_SECRET") { return try TicketKeyRing(parsing: text) }
            let named = setting.text(file, "NETPLAY_CLUSTER_SECRET_FILE")
            guard let path = named ?? fallbackFiles.first(where: { FileManager.default.isReadableFile(atPath: $0) }) else {
                return nil
            }
            return try TicketKeyRing(contentsOf: path)
        } catch {
            throw ValidationError("--cluster-secret: \(error)")
        }
    }

    /// Reads the text form from a file.
    public init(contentsOf path: String) throws(KeyRingError) {
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw KeyRingError("cannot read cluster secret file \(path): \(error.localizedDescription)")
        }
        try self.init(parsing: text)
    }

    /// The text form (for writing a generated secret to a file).
    public var text: String {
        keys.keys.sorted().map { "\($0):\(Hex.encode(keys[$0]!))" }.joined(separator: ",")
    }

    /// The secret that signs new tickets.
    var signingKey: [UInt8] { keys[signingKeyId]! }
}

/// Why a key ring could not be built; one line for the operator.
public struct KeyRingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The reason.
    public let description: String
    /// Creates an error.
    public init(_ description: String) { self.description = description }
}
