#if os(Linux)
import CEpoll
#endif
import Foundation

/// A peer's TCP connection, to ask the kernel about: its descriptor and its socket's inode, so
/// a descriptor reused by a new connection is never taken for it.
public struct TCPConnectionProbe: Sendable, Hashable {
    /// The connection's descriptor (libzmq's, read-only use).
    public let fd: Int32
    private let inode: UInt64

    /// The connection on descriptor `fd` now; nil for -1 or a descriptor that is no socket.
    public init?(fd: Int32) {
        guard fd >= 0, let inode = Self.inode(of: fd) else { return nil }
        self.fd = fd
        self.inode = inode
    }

    /// Bytes written to the connection that the peer's kernel has not acknowledged yet (the
    /// kernel's send queue); nil when the descriptor is no longer this connection (or off Linux).
    public func unacknowledgedBytes() -> Int? {
        #if os(Linux)
        return ask(cepoll_tcp_unacknowledged_bytes).map(Int.init)
        #else
        return nil
        #endif
    }

    /// Bytes the peer's kernel acknowledged on the connection so far (tcp_info's
    /// `tcpi_bytes_acked`); nil when the descriptor is no longer this connection (or off Linux).
    public func acknowledgedBytes() -> Int64? {
        #if os(Linux)
        return ask(cepoll_tcp_bytes_acked)
        #else
        return nil
        #endif
    }

    /// What `query` says of the descriptor while it is still this connection (-1: nothing).
    private func ask(_ query: (Int32) -> Int64) -> Int64? {
        guard Self.inode(of: fd) == inode else { return nil }
        let value = query(fd)
        return value >= 0 ? value : nil
    }

    private static func inode(of fd: Int32) -> UInt64? {
        var info = stat()
        return fstat(fd, &info) == 0 ? UInt64(info.st_ino) : nil
    }
}
