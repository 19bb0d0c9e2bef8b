#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Free ports on this machine, for binding a service, a LAN relay or a test cluster where any
/// free port will do, and for checking that a planned port is free before a cluster takes it.
public enum FreePort {
    /// A TCP port free on the IPv4 `address` right now (it may be taken again before it is
    /// bound); nil when `address` is not an IPv4 address of this machine.
    public static func tcp(on address: String = "127.0.0.1") -> Int? {
        withBoundSocket(address: address, port: 0, udp: false) { fd, sin in
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &sin) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
            return Int(UInt16(bigEndian: sin.sin_port))
        }
    }

    /// Whether `port` can be bound on the IPv4 `address` right now, over TCP or UDP.
    public static func isFree(_ port: Int, on address: String = "127.0.0.1", udp: Bool = false) -> Bool {
        guard (1...65535).contains(port) else { return false }
        return withBoundSocket(address: address, port: UInt16(port), udp: udp) { _, _ in true } ?? false
    }

    /// `tcp://127.0.0.1:PORT` on a free loopback port.
    public static func loopbackEndpoint() -> String { "tcp://127.0.0.1:\(tcp() ?? 0)" }

    /// Binds a fresh socket to `address:port` and hands it to `body`; nil when it cannot be bound.
    private static func withBoundSocket<T>(address: String, port: UInt16, udp: Bool,
                                           _ body: (Int32, inout sockaddr_in) -> T) -> T? {
        #if os(Linux)
        let fd = socket(AF_INET, Int32(udp ? SOCK_DGRAM.rawValue : SOCK_STREAM.rawValue), 0)
        #else
        let fd = socket(AF_INET, udp ? SOCK_DGRAM : SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var sin = sockaddr_in()
        #if !os(Linux)
        sin.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
        #endif
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_port = port.bigEndian
        guard inet_pton(AF_INET, address, &sin.sin_addr) == 1 else { return nil }
        let length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &sin) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        guard bound == 0 else { return nil }
        return body(fd, &sin)
    }
}
