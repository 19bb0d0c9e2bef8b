#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import MemberwiseInit

/// This process's CPU use (user + system, every thread) as a percentage of one core, over the
/// time between two readings: what a service reports as its load.
public struct ProcessCPUMeter: Sendable {
    /// A reading: CPU time used so far and a monotonic wall clock, both in microseconds.
    @PublicMemberwiseInit
    public struct Reading: Sendable, Equatable {
        public var cpuMicroseconds: UInt64
        public var wallMicroseconds: UInt64

        /// The process's reading now (`getrusage` and `CLOCK_MONOTONIC`).
        public static func now() -> Reading {
            var usage = rusage()
            #if os(Linux)
            getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
            #else
            getrusage(RUSAGE_SELF, &usage)
            #endif
            let cpu = microseconds(usage.ru_utime) + microseconds(usage.ru_stime)
            var clock = timespec()
            clock_gettime(CLOCK_MONOTONIC, &clock)
            return Reading(cpuMicroseconds: cpu, wallMicroseconds: UInt64(clock.tv_sec) * 1_000_000 + UInt64(clock.tv_nsec) / 1_000)
        }

        private static func microseconds(_ time: timeval) -> UInt64 {
            UInt64(max(time.tv_sec, 0)) * 1_000_000 + UInt64(max(time.tv_usec, 0))
        }
    }

    private var last: Reading

    /// Starts measuring from `reading`.
    public init(from reading: Reading = .now()) {
        last = reading
    }

    /// The percentage of one core used since the previous reading (0 when no time passed; over
    /// 100 when several threads ran at once), and `reading` becomes the start of the next interval.
    public mutating func percent(at reading: Reading = .now()) -> Double {
        defer { last = reading }
        guard reading.wallMicroseconds > last.wallMicroseconds, reading.cpuMicroseconds >= last.cpuMicroseconds else { return 0 }
        return Double(reading.cpuMicroseconds - last.cpuMicroseconds) * 100 / Double(reading.wallMicroseconds - last.wallMicroseconds)
    }
}
