import Foundation
import NetplayAuth
import NetplayService

#if canImport(Glibc)
import Glibc
#endif

/// A secret kept in its own file, readable by the owner only (mode 0600): created 0600 from the
/// start (a temporary file opened with that mode, written, synced and renamed into place, so no
/// reader ever sees a partial or world-readable key), and refused when found looser
/// (``KeyFile/requirePrivate(_:)``, the rule every key file follows).
public enum SecretKeyFile {
    /// Why a key file could not be read or written; one line for the operator.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        /// The reason.
        public let description: String
    }

    /// The secret in `path`, or, when there is no such file, `migrate()`'s bytes (a key kept
    /// elsewhere until now) or `count` fresh random bytes, written to `path` first.
    public static func loadOrCreate(path: String, count: Int = 32, migrate: () throws -> [UInt8]? = { nil }) throws -> [UInt8] {
        if let existing = try read(path) { return existing }
        let key = try migrate() ?? Sodium.randomBytes(count)
        try write(key, to: path)
        return key
    }

    /// The bytes in `path` (nil when it does not exist); refuses one others may read.
    static func read(_ path: String) throws -> [UInt8]? {
        var info = stat()
        guard stat(path, &info) == 0 else {
            if errno == ENOENT { return nil }
            throw Failure(description: "cannot read \(path): \(String(cString: strerror(errno)))")
        }
        do { try KeyFile.requirePrivate(path) } catch { throw Failure(description: "\(error)") }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw Failure(description: "cannot read \(path)")
        }
        let bytes = [UInt8](data)
        guard bytes.count >= 16 else { throw Failure(description: "\(path) holds \(bytes.count) bytes; a key needs at least 16") }
        return bytes
    }

    /// Writes `bytes` to `path` atomically with mode 0600 (``KeyFile/atomicWrite(_:to:mode:replacing:)``).
    static func write(_ bytes: [UInt8], to path: String) throws {
        do { try KeyFile.atomicWrite(Data(bytes), to: URL(fileURLWithPath: path), mode: 0o600) } catch {
            throw Failure(description: "\(error)")
        }
    }
}
