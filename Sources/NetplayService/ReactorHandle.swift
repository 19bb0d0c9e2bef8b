import Foundation
import Synchronization

/// The thread-safe way into a running service's reactor.
///
/// Sockets never leave the reactor thread; other threads and async code hand it work instead:
/// ``enqueue(_:)`` queues a closure that runs on the reactor thread with the ``ServiceRuntime``,
/// and a byte written to a wake-up pipe (polled beside the sockets) makes the reactor run it at
/// once. ``requestStop(reason:)`` starts a graceful shutdown from anywhere, including signal
/// handlers' dispatch sources.
public final class ReactorHandle: Sendable {
    private let queue = Mutex<[@Sendable (ServiceRuntime) -> Void]>([])
    private let stopReason = Mutex<String?>(nil)
    let wake: WakePipe

    init() throws {
        wake = try WakePipe()
    }

    /// Runs `work` on the reactor thread as soon as possible.
    public func enqueue(_ work: @escaping @Sendable (ServiceRuntime) -> Void) {
        queue.withLock { $0.append(work) }
        wake.signal()
    }

    /// Asks the service to stop gracefully (idempotent; the first reason wins).
    public func requestStop(reason: String) {
        stopReason.withLock { if $0 == nil { $0 = reason } }
        wake.signal()
    }

    /// The reason given to the first ``requestStop(reason:)``, if any.
    public var stopRequested: String? { stopReason.withLock { $0 } }

    func takeQueued() -> [@Sendable (ServiceRuntime) -> Void] {
        queue.withLock { work in
            defer { work.removeAll(keepingCapacity: true) }
            return work
        }
    }
}

/// A non-blocking self-pipe: any thread may ``signal()``; the reactor polls ``readDescriptor``.
final class WakePipe: Sendable {
    let readDescriptor: Int32
    let writeDescriptor: Int32

    init() throws {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        readDescriptor = fds[0]
        writeDescriptor = fds[1]
    }

    deinit {
        close(readDescriptor)
        close(writeDescriptor)
    }

    /// Wakes the reactor (a full pipe already means "wake up", so EAGAIN is fine).
    func signal() {
        var byte: UInt8 = 1
        _ = write(writeDescriptor, &byte, 1)
    }

    /// Empties the pipe.
    func drain() {
        var buffer = [UInt8](repeating: 0, count: 256)
        while read(readDescriptor, &buffer, buffer.count) > 0 {}
    }
}
