#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import NetplayWire

/// Times as people read them in logs, the supervisor's child logs and netplayctl: ISO 8601 in
/// UTC with milliseconds, `2026-11-21T23:59:00.123Z`.
public enum Timestamp {
    /// The moment `unixMs` (milliseconds since the Unix epoch).
    public static func iso8601(unixMs: UInt64) -> String {
        var seconds = time_t(unixMs / 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
                      parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                      parts.tm_hour, parts.tm_min, parts.tm_sec, Int(unixMs % 1000))
    }

    /// Now.
    public static func now() -> String { iso8601(unixMs: UnixTime.nowMs()) }
}
