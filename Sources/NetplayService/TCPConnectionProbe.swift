#if os(Linux)
import CEpoll
#endif
import Foundation

/// A peer's TCP connection, to ask the kernel about: its descriptor and its socket's inode, so
/// a descriptor reused by a new connection is never taken for it. The kernel queries on a bare
/// descriptor are here too (the outbound guard keeps its own account of inodes).
public struct TCPConnectionProbe: Sendable, Hashable {
    /// The connection's descriptor (libzmq's, read-only use).
    public let fd: Int32
    private let inode: UInt64

    /// The connection on descriptor `fd` now; nil for -1 or a descriptor that is no socket.
    public init?(fd: Int32) {
        guard fd >= 0, let inode = Self.socketInode(of: fd) else { return nil }
        self.fd = fd
        self.inode = inode
    }

    /// Bytes written to the connection that the peer's kernel has not acknowledged yet (the
    /// kernel's send queue); nil when the descriptor is no longer this connection (or off Linux).
    public func unacknowledgedBytes() -> Int? {
        guard Self.socketInode(of: fd) == inode else { return nil }
        return Self.unacknowledgedBytes(of: fd).map(Int.init)
    }

    /// Bytes the peer's kernel acknowledged on the connection so far (tcp_info's
    /// `tcpi_bytes_acked`); nil when the descriptor is no longer this connection (or off Linux).
    public func acknowledgedBytes() -> Int64? {
        guard Self.socketInode(of: fd) == inode else { return nil }
        return Self.acknowledgedBytes(of: fd)
    }

    /// The inode of `fd`'s socket, which a new socket on a reused descriptor does not share.
    static func socketInode(of fd: Int32) -> UInt64? {
        var info = stat()
        return fstat(fd, &info) == 0 ? UInt64(info.st_ino) : nil
    }

    #if os(Linux)
    /// tcp_info's acknowledged bytes of `fd`; nil when it is no TCP socket.
    static func acknowledgedBytes(of fd: Int32) -> Int64? { kernelCount(cepoll_tcp_bytes_acked(fd)) }
    /// `fd`'s send queue (SIOCOUTQ); nil when it is no TCP socket.
    static func unacknowledgedBytes(of fd: Int32) -> Int64? { kernelCount(cepoll_tcp_unacknowledged_bytes(fd)) }
    #else
    /// Nothing to ask off Linux.
    static func acknowledgedBytes(of fd: Int32) -> Int64? { nil }
    /// Nothing to ask off Linux.
    static func unacknowledgedBytes(of fd: Int32) -> Int64? { nil }
    #endif

    /// A count the C helpers return, -1 meaning none.
    private static func kernelCount(_ value: Int64) -> Int64? { value >= 0 ? value : nil }
}
