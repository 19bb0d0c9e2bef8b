import CZeroMQ

/// A ZeroMQ context: the I/O threads and the registry that sockets belong to.
///
/// A context is thread-safe and may be shared freely. Every ``Socket`` keeps a strong
/// reference to its context, so the context is terminated only after its last socket is closed;
/// termination therefore never blocks on a forgotten socket.
public final class Context: @unchecked Sendable {
    /// The raw `void *` handle; valid for the lifetime of this object.
    let handle: UnsafeMutableRawPointer

    /// The process-wide default context with one I/O thread.
    public static let shared = Context()

    /// Creates a context with `ioThreads` background I/O threads.
    public init(ioThreads: Int32 = 1) {
        guard let raw = zmq_ctx_new() else {
            fatalError("zmq_ctx_new failed: \(ZMQError.last)")  // only on out-of-memory
        }
        handle = raw
        if ioThreads != 1 {
            zmq_ctx_set(handle, ZMQ_IO_THREADS, ioThreads)
        }
    }

    deinit {
        while zmq_ctx_term(handle) == -1 && zmq_errno() == EINTR {}
    }

    /// A number identifying this context for as long as it lives (its handle's address).
    public var identifier: UInt { UInt(bitPattern: handle) }

    /// Creates a socket of `type` in this context. The socket belongs to the calling thread.
    public func socket(_ type: SocketType) throws(ZMQError) -> Socket {
        try Socket(context: self, type: type)
    }

    /// The linked libzmq version as (major, minor, patch).
    public static var version: (major: Int32, minor: Int32, patch: Int32) {
        var major: Int32 = 0, minor: Int32 = 0, patch: Int32 = 0
        zmq_version(&major, &minor, &patch)
        return (major, minor, patch)
    }

    /// True when libzmq was built with `capability` ("curve", "ipc", "tipc", ...).
    public static func has(_ capability: String) -> Bool {
        zmq_has(capability) == 1
    }
}
