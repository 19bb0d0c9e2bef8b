#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Makes uninitialised heap memory deterministic while a core loads.
///
/// A core may read memory it never wrote: nestopia leaves a byte of its triangle channel's
/// state uninitialised, so a fresh instance's state holds whatever the allocator handed out —
/// which depends on what the process did before (argument parsing, sockets, threads), and
/// differs between netplay-peer processes. With glibc's `M_PERTURB` set to 0xFF, every
/// allocation (other than `calloc`, which is zeroed anyway) is filled with 0x00 while the core
/// is loaded and its content started, so every process starts the core from the same bytes: the
/// state of a pristine process. Freed blocks are filled with 0xFF meanwhile; other threads'
/// allocations in that window are filled too (harmless). Reset to 0 (off) afterwards.
/// (`mallopt` is looked up at run time: the Glibc module does not export `malloc.h`; on other
/// C libraries this does nothing.)
public enum DeterministicHeap {
    private typealias Mallopt = @convention(c) (Int32, Int32) -> Int32
    /// glibc's `M_PERTURB` parameter number.
    private static let perturb: Int32 = -6

    /// Runs `body` (a core's load and content start) with freshly allocated memory filled with 0x00.
    public static func run<T>(_ body: () throws -> T) rethrows -> T {
        #if canImport(Glibc)
        if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallopt") {
            let mallopt = unsafeBitCast(symbol, to: Mallopt.self)
            _ = mallopt(perturb, 0xFF)
            defer { _ = mallopt(perturb, 0) }
            return try body()
        }
        #endif
        return try body()
    }
}
