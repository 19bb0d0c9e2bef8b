import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IPv4Sockets
import MemberwiseInit

/// The spellings that differ between glibc and Darwin's libc, in one place.
enum SocketPlatform {
    /// Closes a file descriptor.
    static func close(_ descriptor: Int32) {
        #if canImport(Glibc)
        _ = Glibc.close(descriptor)
        #else
        _ = Darwin.close(descriptor)
        #endif
    }

    /// An interface's broadcast address (`ifa_broadaddr`: a union member on glibc).
    static func broadcastAddress(_ entry: ifaddrs) -> UnsafeMutablePointer<sockaddr>? {
        #if os(Linux)
        entry.ifa_ifu.ifu_broadaddr
        #else
        entry.ifa_dstaddr
        #endif
    }
}

/// An IPv4 address and port (host byte order), as UDP datagrams are sent to and come from.
@PublicMemberwiseInit
public struct UDPAddress: Hashable, Sendable, CustomStringConvertible {
    /// The IPv4 address, host byte order (10.0.0.1 is 0x0A000001).
    public var ip: UInt32
    /// The port.
    public var port: UInt16

    /// Parses `a.b.c.d:port` (or `a.b.c.d` with `defaultPort`).
    public init?(_ text: String, defaultPort: UInt16? = nil) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 1 || parts.count == 2 else { return nil }
        guard let ip = Self.parseIP(String(parts[0])) else { return nil }
        if parts.count == 2 {
            guard Self.isDecimal(parts[1]), let port = UInt16(parts[1]) else { return nil }
            self.init(ip: ip, port: port)
        } else {
            guard let defaultPort else { return nil }
            self.init(ip: ip, port: defaultPort)
        }
    }

    /// Parses dotted-quad IPv4: four octets of one to three ASCII digits (no sign: `UInt8("+12")`
    /// takes one, and a beacon endpoint `tcp://+10.+0.+0.+1:7300` passed as an address that
    /// libzmq then handed to the resolver).
    public static func parseIP(_ text: String) -> UInt32? {
        let octets = text.split(separator: ".", omittingEmptySubsequences: false)
        guard octets.count == 4 else { return nil }
        var value: UInt32 = 0
        for octet in octets {
            guard !octet.isEmpty, octet.count <= 3, isDecimal(octet), let byte = UInt8(octet) else { return nil }
            value = value << 8 | UInt32(byte)
        }
        return value
    }

    /// Whether `text` is ASCII digits only (`UInt8` and `UInt16` also take a sign).
    static func isDecimal(_ text: Substring) -> Bool {
        text.utf8.allSatisfy { (0x30 ... 0x39).contains($0) }
    }

    /// Dotted-quad form of the address.
    public var host: String {
        "\(ip >> 24).\(ip >> 16 & 0xFF).\(ip >> 8 & 0xFF).\(ip & 0xFF)"
    }

    public var description: String { "\(host):\(port)" }

    /// 10/8, 172.16/12 or 192.168/16: the ranges RetroArch treats as LAN.
    public var isPrivate: Bool {
        ip & 0xFF00_0000 == 0x0A00_0000 || ip & 0xFFF0_0000 == 0xAC10_0000 || ip & 0xFFFF_0000 == 0xC0A8_0000
    }

    /// 127/8.
    public var isLoopback: Bool { ip & 0xFF00_0000 == 0x7F00_0000 }

    /// The limited broadcast address 255.255.255.255.
    public static let broadcastIP: UInt32 = 0xFFFF_FFFF

    fileprivate var sockaddr: sockaddr_in { IPv4Socket.address(ip: ip, port: port) }

    fileprivate init(_ address: sockaddr_in) {
        let (ip, port) = IPv4Socket.parts(of: address)
        self.init(ip: ip, port: port)
    }
}

/// A non-blocking IPv4 UDP socket for the LAN protocols (our beacon, RetroArch's RANQ/RANS), to
/// be watched by the service reactor (``fileDescriptor``). Not thread-safe; closed on deinit.
public final class UDPSocket {
    /// The descriptor, for `ServiceRuntime.watch(fileDescriptor:)`.
    public let fileDescriptor: Int32
    /// The bound address (port resolved when 0 was asked).
    public let localAddress: UDPAddress
    private var closed = false

    /// Largest datagram read; longer ones are truncated (and then rejected by their decoders).
    public static let maxDatagram = 2048

    /// Binds `host:port` (port 0: any free port). With `broadcast`, the socket may send to
    /// broadcast addresses; with `shared`, other sockets may bind the same port too
    /// (`SO_REUSEADDR`, `SO_REUSEPORT`: several LAN browsers on one machine). Throws a one-line
    /// reason.
    public init(host: String = "0.0.0.0", port: UInt16, broadcast: Bool = false, shared: Bool = false) throws(UDPError) {
        guard let ip = UDPAddress.parseIP(host) else { throw UDPError("'\(host)' is not an IPv4 address") }
        let socket: (descriptor: Int32, port: UInt16)
        do {
            socket = try IPv4Socket.bound(.datagram, to: UDPAddress(ip: ip, port: port).sockaddr, reuseAddress: shared,
                                          reusePort: shared, broadcast: broadcast, nonBlocking: true)
        } catch {
            throw UDPError(error.step == .bind ? "cannot bind UDP \(host):\(port): \(error)" : "cannot create a UDP socket: \(error)")
        }
        fileDescriptor = socket.descriptor
        localAddress = UDPAddress(ip: ip, port: socket.port)
    }

    deinit { close() }

    /// Closes the socket (idempotent).
    public func close() {
        guard !closed else { return }
        closed = true
        SocketPlatform.close(fileDescriptor)
    }

    /// Sends one datagram; false when the kernel refused it (no route, buffer full).
    @discardableResult
    public func send(_ bytes: [UInt8], to destination: UDPAddress) -> Bool {
        let sent = bytes.withUnsafeBytes { buffer in
            IPv4Socket.withSocketAddress(destination.sockaddr) { sendto(fileDescriptor, buffer.baseAddress, buffer.count, 0, $0, $1) }
        }
        return sent == bytes.count
    }

    /// Waits up to `milliseconds` for a datagram; true when one is waiting.
    public func waitReadable(milliseconds: Int32) -> Bool {
        var item = pollfd(fd: fileDescriptor, events: Int16(POLLIN), revents: 0)
        return poll(&item, 1, milliseconds) > 0
    }

    /// Reads one waiting datagram, or nil when none is waiting.
    public func receive() -> (bytes: [UInt8], from: UDPAddress)? {
        var buffer = [UInt8](repeating: 0, count: Self.maxDatagram)
        var source = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let count = buffer.withUnsafeMutableBytes { raw in
            withUnsafeMutablePointer(to: &source) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    recvfrom(fileDescriptor, raw.baseAddress, raw.count, 0, $0, &length)
                }
            }
        }
        guard count >= 0 else { return nil }
        buffer.removeSubrange(count...)
        return (buffer, UDPAddress(source))
    }

    /// The IPv4 addresses of this host's up interfaces (loopback included).
    public static func interfaceAddresses() -> Set<UInt32> {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return [] }
        defer { freeifaddrs(list) }
        var result: Set<UInt32> = []
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            defer { cursor = entry.pointee.ifa_next }
            guard Int32(entry.pointee.ifa_flags) & Int32(IFF_UP) != 0,
                  let address = entry.pointee.ifa_addr, address.pointee.sa_family == sa_family_t(AF_INET) else { continue }
            result.insert(address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UDPAddress($0.pointee) }.ip)
        }
        return result
    }

    /// The first up, non-loopback IPv4 address of this machine (dotted quad), or nil: the
    /// address a LAN host advertises by default.
    public static func lanAddress() -> String? {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return nil }
        defer { freeifaddrs(list) }
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            defer { cursor = entry.pointee.ifa_next }
            let flags = Int32(entry.pointee.ifa_flags)
            guard let address = entry.pointee.ifa_addr, address.pointee.sa_family == sa_family_t(AF_INET),
                  flags & Int32(IFF_UP) != 0, flags & Int32(IFF_LOOPBACK) == 0 else { continue }
            return address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UDPAddress($0.pointee) }.host
        }
        return nil
    }

    /// The host part of an endpoint such as `tcp://10.0.0.2:7300`, `udp://10.0.0.2` or
    /// `10.0.0.2:7300` (nil when there is none).
    public static func endpointHost(_ endpoint: String) -> String? {
        var rest = Substring(endpoint)
        if let scheme = rest.range(of: "://") { rest = rest[scheme.upperBound...] }
        if let slash = rest.firstIndex(of: "/") { rest = rest[..<slash] }
        if let colon = rest.lastIndex(of: ":") { rest = rest[..<colon] }
        return rest.isEmpty ? nil : String(rest)
    }

    /// The broadcast addresses of this host's up, broadcast-capable IPv4 interfaces (loopback
    /// excluded), with `port`.
    public static func interfaceBroadcastAddresses(port: UInt16) -> [UDPAddress] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return [] }
        defer { freeifaddrs(list) }
        var result: [UDPAddress] = []
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            defer { cursor = entry.pointee.ifa_next }
            let flags = Int32(entry.pointee.ifa_flags)
            guard flags & Int32(IFF_UP) != 0, flags & Int32(IFF_BROADCAST) != 0,
                  flags & Int32(IFF_LOOPBACK) == 0,
                  let address = entry.pointee.ifa_addr, address.pointee.sa_family == sa_family_t(AF_INET),
                  let broadcast = SocketPlatform.broadcastAddress(entry.pointee) else { continue }
            let value = broadcast.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UDPAddress($0.pointee) }
            let target = UDPAddress(ip: value.ip, port: port)
            if !result.contains(target) { result.append(target) }
        }
        return result
    }
}

/// A UDP socket failure, one line.
public struct UDPError: Error, Sendable, CustomStringConvertible {
    /// The reason.
    public let description: String
    /// Creates an error.
    public init(_ description: String) { self.description = description }
}
