import CEpoll
import Foundation

/// Keeps what a public ROUTER holds for peers that ask and do not read within bounds.
///
/// libzmq queues a reply for its peer up to the high-water mark, counted in messages (10,000),
/// not bytes: a stranger that pipelined list requests (20 bytes each, a reply of up to 1 MiB)
/// and read nothing, or a byte now and then so TCP's timeouts never fired, had discovery hold
/// gigabytes. The guard counts, per connection, the reply bytes handed to libzmq against what
/// the peer's kernel acknowledged (`tcpi_bytes_acked`, read only when a connection nears its
/// limit and on the runtime's 100 ms check): a reply that would take a connection past
/// ``Limits/perConnection`` is dropped (counted as a dropped reply), and while all connections
/// together hold more than ``Limits/total`` the one holding most is shut down (libzmq frees its
/// queue). Each reply is counted with the least framing it takes on the wire, so the count
/// errs low (a connection's real queue exceeds its limit by framing only) and never drifts up:
/// counting more than the wire carried built a debt that, after days, refused every reply to a
/// long-lived client.
///
/// An account belongs to a connection, not to a routing id: a stranger reusing one identity on
/// many connections (the ROUTER hands it over) leaves each old connection counted, refreshed and
/// cuttable. A descriptor's socket is identified by its inode, so a reused descriptor is never
/// taken for the connection that had it.
///
/// A connection becomes known by its requests (the descriptor libzmq read the frame from); a
/// reply to a peer the guard never saw a request from is not counted. Used on the reactor thread
/// only.
final class OutboundGuard {
    /// How many unacknowledged reply bytes connections may hold.
    struct Limits {
        /// Per connection: a few whole replies of the largest size (a page of rooms, ~1 MiB).
        var perConnection = 8 << 20
        /// Over every connection of the socket.
        var total = 128 << 20
    }

    /// A connection's reply bytes, counted from the acknowledged bytes when it was first seen.
    private struct Account {
        let peer: PeerAddress
        /// The socket's identity when the account began (its inode).
        let socket: UInt64
        /// Acknowledged bytes when first seen plus every reply byte since (moved up to the
        /// acknowledged count when that passes it: framing and heartbeats, which are not counted,
        /// must not build up a credit).
        var sent: Int64
        /// Acknowledged bytes when last read.
        var acknowledged: Int64
        var outstanding: Int64 { sent - acknowledged }
    }

    /// A connection the guard shut down.
    struct Cut {
        let peer: String
        let held: Int
    }

    /// The least a reply adds to its payload on the wire: a ZMTP short frame header, and with
    /// CurveZMQ the MESSAGE command's name, nonce and box.
    static func frameOverhead(curve: Bool) -> Int64 { curve ? 2 + 33 : 2 }

    private let limits: Limits
    private let frameOverhead: Int64
    private var accounts: [Int32: Account] = [:]
    private var descriptors: [PeerAddress: Int32] = [:]
    /// The sum of every account's outstanding bytes.
    private var outstanding: Int64 = 0
    /// How the kernel's acknowledged count of a descriptor is read, and its socket identified
    /// (tests substitute their own).
    private let acknowledged: (Int32) -> Int64?
    private let identity: (Int32) -> UInt64?

    init(limits: Limits = Limits(), curve: Bool = false,
         acknowledged: @escaping (Int32) -> Int64? = TCPConnectionProbe.acknowledgedBytes(of:),
         identity: @escaping (Int32) -> UInt64? = TCPConnectionProbe.socketInode(of:)) {
        self.limits = limits
        self.frameOverhead = Self.frameOverhead(curve: curve)
        self.acknowledged = acknowledged
        self.identity = identity
    }

    /// Notes that `peer` sent a request over connection `fd` (a descriptor reused by a new
    /// connection starts a new account).
    func noteRequest(from peer: PeerAddress, fd: Int32) {
        guard fd >= 0 else { return }
        let key = peer.undelimited
        if let account = accounts[fd] {
            // The same peer on the descriptor: nothing to do on this path, once per request (a
            // new socket there under the same id is found by the inode check of the next refresh).
            if account.peer == key { return }
            forget(fd)  // a new connection on the descriptor
        }
        guard let base = acknowledged(fd), let socket = identity(fd) else { return }
        // The routing id moves to this connection; an older one that had it keeps its account.
        accounts[fd] = Account(peer: key, socket: socket, sent: base, acknowledged: base)
        descriptors[key] = fd
    }

    /// Whether a reply of `bytes` to `peer` may go out; counts it when it may.
    func admit(_ bytes: Int, to peer: PeerAddress) -> Bool {
        let key = peer.undelimited
        guard let fd = descriptors[key], var account = accounts[fd], account.peer == key else { return true }
        let cost = Int64(bytes) + frameOverhead
        if account.outstanding + cost > Int64(limits.perConnection) {
            guard refresh(fd, &account) else { return true }
            store(account, at: fd)
            guard account.outstanding + cost <= Int64(limits.perConnection) else { return false }
        }
        account.sent += cost
        store(account, at: fd)
        return true
    }

    /// Reads every connection's acknowledged bytes that has some outstanding, forgets closed
    /// ones, and shuts down the connections holding most while all hold over the total.
    func check() -> [Cut] {
        var held: [(fd: Int32, bytes: Int64)] = []
        for (fd, var account) in accounts where account.outstanding > 0 {
            guard refresh(fd, &account) else { continue }
            store(account, at: fd)
            if account.outstanding > 0 { held.append((fd, account.outstanding)) }
        }
        guard outstanding > Int64(limits.total) else { return [] }
        var cuts: [Cut] = []
        for connection in held.sorted(by: { $0.bytes > $1.bytes }) where outstanding > Int64(limits.total) {
            cuts.append(Cut(peer: InboundGuard.peerAddress(connection.fd), held: Int(connection.bytes)))
            forget(connection.fd)
            shutdown(connection.fd, Int32(SHUT_RDWR))  // libzmq sees the end, closes the pipe and drops its queue
        }
        return cuts
    }

    /// Connections counted now (tests, introspection).
    var connectionCount: Int { accounts.count }

    /// Reads `fd`'s acknowledged bytes into `account` (the caller stores it); false, and the
    /// account forgotten, when the descriptor is no TCP socket any more or its count went back
    /// (a new connection on a reused descriptor, forgotten until it asks something).
    private func refresh(_ fd: Int32, _ account: inout Account) -> Bool {
        guard identity(fd) == account.socket, let now = acknowledged(fd), now >= account.acknowledged else {
            forget(fd)
            return false
        }
        account.acknowledged = now
        account.sent = max(account.sent, now)
        return true
    }

    /// Stores `account` for `fd`, keeping the total of outstanding bytes.
    private func store(_ account: Account, at fd: Int32) {
        outstanding += account.outstanding - (accounts[fd]?.outstanding ?? 0)
        accounts[fd] = account
    }

    private func forget(_ fd: Int32) {
        guard let account = accounts.removeValue(forKey: fd) else { return }
        outstanding -= account.outstanding
        if descriptors[account.peer] == fd { descriptors[account.peer] = nil }
    }
}
