#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// TCP ports the kernel picks, for binding a service, a LAN relay or a test cluster where any
/// free port will do.
public enum FreePort {
    /// A TCP port free on the IPv4 `address` right now (it may be taken again before it is
    /// bound); nil when `address` is not an IPv4 address of this machine.
    public static func tcp(on address: String = "127.0.0.1") -> Int? {
        #if os(Linux)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var sin = sockaddr_in()
        #if !os(Linux)
        sin.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
        #endif
        sin.sin_family = sa_family_t(AF_INET)
        guard inet_pton(AF_INET, address, &sin.sin_addr) == 1 else { return nil }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &sin) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        guard bound == 0 else { return nil }
        _ = withUnsafeMutablePointer(to: &sin) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return Int(UInt16(bigEndian: sin.sin_port))
    }

    /// `tcp://127.0.0.1:PORT` on a free loopback port.
    public static func loopbackEndpoint() -> String { "tcp://127.0.0.1:\(tcp() ?? 0)" }
}
