#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IPv4Sockets

/// Free ports on this machine, for binding a service, a LAN relay or a test cluster where any
/// free port will do, and for checking that a planned port is free before a cluster takes it.
public enum FreePort {
    /// A TCP port free on the IPv4 `address` right now (it may be taken again before it is
    /// bound); nil when `address` is not an IPv4 address of this machine.
    public static func tcp(on address: String = "127.0.0.1") -> Int? {
        boundPort(address: address, port: 0, udp: false).map { Int($0) }
    }

    /// Whether `port` can be bound on the IPv4 `address` right now, over TCP or UDP.
    public static func isFree(_ port: Int, on address: String = "127.0.0.1", udp: Bool = false) -> Bool {
        guard (1...65535).contains(port) else { return false }
        return boundPort(address: address, port: UInt16(port), udp: udp) != nil
    }

    /// `tcp://127.0.0.1:PORT` on a free loopback port.
    public static func loopbackEndpoint() -> String { "tcp://127.0.0.1:\(tcp() ?? 0)" }

    /// Binds a fresh socket to `address:port` and closes it again: the port it got, or nil when
    /// it could not be bound.
    private static func boundPort(address: String, port: UInt16, udp: Bool) -> UInt16? {
        guard let socket = try? IPv4Socket.bound(udp ? .datagram : .stream, host: address, port: port) else { return nil }
        close(socket.descriptor)
        return socket.port
    }
}
