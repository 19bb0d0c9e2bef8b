import CZeroMQ

/// How many bytes of inbound frames a socket handed to the application, per connection (the
/// file descriptor libzmq read each frame from, `ZMQ_SRCFD`), each frame counted with
/// ``frameOverhead`` for its framing. Compared with what the kernel received on a connection, it
/// shows what libzmq holds that the application was never handed: libzmq keeps every frame of a
/// multipart message until its last one arrives, with no limit, so a peer that never ends one
/// fills the process's memory (`ZMQ_MAXMSGSIZE` caps a frame, not a message).
///
/// Set it as a socket's ``Socket/inboundLedger``; frames read with ``Socket/receive(into:flags:)``
/// (no message object) are not counted.
public final class InboundLedger {
    /// Bytes counted per frame beyond its payload: ZMTP's frame header (up to 9 bytes) and, with
    /// CurveZMQ, the MESSAGE command around it (nonce, MAC and flags: 33 more).
    public static let frameOverhead = 64

    /// Confined to the socket's thread, so unchecked (this runs once a frame).
    @exclusivity(unchecked) private var delivered: [Int] = []
    /// The connection the last frame counted came from (-1 before any, or when libzmq named none).
    @exclusivity(unchecked) public private(set) var lastFd: Int32 = -1

    /// An empty ledger.
    public init() {}

    /// Counts a frame of `bytes` read from connection `fd`.
    @inline(__always)
    func add(fd: Int32, bytes: Int) {
        lastFd = fd
        guard fd >= 0 else { return }
        let index = Int(fd)
        if index >= delivered.count {
            guard index < 1 << 20 else { return }
            delivered += [Int](repeating: 0, count: index + 1 - delivered.count)
        }
        delivered[index] &+= bytes &+ Self.frameOverhead
    }

    /// The bytes counted for connection `fd` since it was last ``reset(fd:)``.
    public func delivered(fd: Int32) -> Int {
        fd >= 0 && Int(fd) < delivered.count ? delivered[Int(fd)] : 0
    }

    /// Starts connection `fd` over at zero (a new connection on a reused descriptor).
    public func reset(fd: Int32) {
        if fd >= 0 && Int(fd) < delivered.count { delivered[Int(fd)] = 0 }
    }
}
