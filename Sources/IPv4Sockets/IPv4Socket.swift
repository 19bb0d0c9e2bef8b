#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why an IPv4 socket could not be made, bound or set listening, in words a caller puts after
/// its own context ("cannot bind HTTP 0.0.0.0:80: ...").
public struct IPv4SocketError: Error, Sendable, CustomStringConvertible {
    /// The step that failed.
    public enum Step: Sendable {
        /// The host is not a dotted-quad IPv4 address.
        case address
        /// `socket()` refused.
        case socket
        /// `bind()` refused (the port is taken, or the address is not this machine's).
        case bind
        /// `listen()` refused.
        case listen
    }

    /// The step that failed.
    public let step: Step
    /// The reason: the system's text for the error, or what is wrong with the address.
    public let reason: String

    public var description: String { reason }
}

/// IPv4 sockets bound to an address, made one way for every listener and probe of the toolkit
/// (the telemetry HTTP server, the RetroArch tunnel, the LAN protocols' UDP socket, free-port
/// probes, the WAN lab), and the `sockaddr_in` conversions around them. The descriptors are
/// close-on-exec, so a supervisor's children do not inherit them.
public enum IPv4Socket {
    /// The kind of socket.
    public enum Kind: Sendable {
        /// TCP.
        case stream
        /// UDP.
        case datagram
    }

    /// The socket address of `ip` (host byte order: 10.0.0.1 is 0x0A000001) and `port`.
    public static func address(ip: UInt32, port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        #if !os(Linux)
        address.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
        #endif
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = ip.bigEndian
        return address
    }

    /// The socket address of the dotted-quad `host` and `port`; nil when `host` is not one.
    public static func address(host: String, port: UInt16) -> sockaddr_in? {
        var address = address(ip: 0, port: port)
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else { return nil }
        return address
    }

    /// The address's IPv4 address (host byte order) and port.
    public static func parts(of address: sockaddr_in) -> (ip: UInt32, port: UInt16) {
        (UInt32(bigEndian: address.sin_addr.s_addr), UInt16(bigEndian: address.sin_port))
    }

    /// `body` with `address` as the `sockaddr` pointer and length the socket calls take.
    public static func withSocketAddress<T>(_ address: sockaddr_in, _ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
        withUnsafePointer(to: address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }

    /// The address a socket is bound to (its port resolved when 0 was asked); nil when the
    /// descriptor is no bound IPv4 socket.
    public static func localAddress(of descriptor: Int32) -> sockaddr_in? {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        return named == 0 && address.sin_family == sa_family_t(AF_INET) ? address : nil
    }

    /// A new socket of `kind` bound to `host:port` (port 0: any free port), listening with
    /// `listenBacklog` when given (TCP); returns it with the port it got. `reuseAddress` and
    /// `reusePort` set `SO_REUSEADDR` and `SO_REUSEPORT`, `broadcast` lets a UDP socket send to
    /// broadcast addresses, `nonBlocking` makes it non-blocking (for a reactor). The descriptor
    /// is the caller's to close; on an error nothing is left open.
    public static func bound(_ kind: Kind, host: String, port: UInt16, reuseAddress: Bool = false, reusePort: Bool = false,
                             broadcast: Bool = false, nonBlocking: Bool = false,
                             listenBacklog: Int32? = nil) throws(IPv4SocketError) -> (descriptor: Int32, port: UInt16) {
        guard let address = address(host: host, port: port) else {
            throw IPv4SocketError(step: .address, reason: "'\(host)' is not an IPv4 address")
        }
        return try bound(kind, to: address, reuseAddress: reuseAddress, reusePort: reusePort, broadcast: broadcast,
                         nonBlocking: nonBlocking, listenBacklog: listenBacklog)
    }

    /// ``bound(_:host:port:reuseAddress:reusePort:broadcast:nonBlocking:listenBacklog:)`` for an
    /// address already parsed.
    public static func bound(_ kind: Kind, to address: sockaddr_in, reuseAddress: Bool = false, reusePort: Bool = false,
                             broadcast: Bool = false, nonBlocking: Bool = false,
                             listenBacklog: Int32? = nil) throws(IPv4SocketError) -> (descriptor: Int32, port: UInt16) {
        #if os(Linux)
        // Close-on-exec from the start: a child started by another thread at this moment must not
        // inherit the socket (the supervisor's spawn closes nothing before exec).
        let flags = Int32(SOCK_CLOEXEC.rawValue) | (nonBlocking ? Int32(SOCK_NONBLOCK.rawValue) : 0)
        let descriptor = socket(AF_INET, kind.socketType | flags, 0)
        guard descriptor >= 0 else { throw IPv4SocketError(step: .socket, reason: lastErrorText()) }
        #else
        let descriptor = socket(AF_INET, kind.socketType, 0)
        guard descriptor >= 0 else { throw IPv4SocketError(step: .socket, reason: lastErrorText()) }
        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        if nonBlocking { _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK) }
        #endif
        for (wanted, option) in [(reuseAddress, SO_REUSEADDR), (reusePort, SO_REUSEPORT), (broadcast, SO_BROADCAST)] where wanted {
            var on: Int32 = 1
            _ = setsockopt(descriptor, SOL_SOCKET, option, &on, socklen_t(MemoryLayout<Int32>.size))
        }
        func fail(_ step: IPv4SocketError.Step) -> IPv4SocketError {
            let error = IPv4SocketError(step: step, reason: lastErrorText())
            _ = close(descriptor)
            return error
        }
        guard withSocketAddress(address, { bind(descriptor, $0, $1) }) == 0 else { throw fail(.bind) }
        if let listenBacklog, listen(descriptor, listenBacklog) != 0 { throw fail(.listen) }
        return (descriptor, localAddress(of: descriptor).map { parts(of: $0).port } ?? parts(of: address).port)
    }

    /// The text of the last system error (`errno`).
    public static func lastErrorText() -> String {
        String(cString: strerror(errno))
    }
}

private extension IPv4Socket.Kind {
    var socketType: Int32 {
        #if os(Linux)
        Int32(self == .stream ? SOCK_STREAM.rawValue : SOCK_DGRAM.rawValue)
        #else
        self == .stream ? SOCK_STREAM : SOCK_DGRAM
        #endif
    }
}
