#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Wall-clock time the way messages carry it (`*_unix_ms` fields): whole milliseconds since the
/// Unix epoch. Every service, the relay and the client read the clock through here.
public enum UnixTime {
    /// Now, truncated to the millisecond.
    @Sendable public static func nowMs() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return UInt64(spec.tv_sec) * 1000 + UInt64(spec.tv_nsec) / 1_000_000
    }
}
