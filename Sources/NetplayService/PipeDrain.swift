import Foundation
import Synchronization

/// Reads a child process's output pipe to its end on a thread of its own, with blocking reads,
/// handing each chunk to a closure: how the toolkit's tools and tests collect what the processes
/// they start write.
///
/// Not `FileHandle.readabilityHandler`: that arms a libdispatch read source, and on Linux its
/// teardown can race the descriptor's close and leave a dangling epoll registration behind, which
/// crashes the whole process later in `_dispatch_event_loop_drain` (swift-corelibs-libdispatch
/// issue 949; the test suite met it). A blocking read never registers the descriptor with
/// libdispatch. The drain reads a close-on-exec duplicate of the pipe's read end, which it owns
/// and closes at the end, so the `Pipe` may go away at any time.
public final class PipeDrain: Sendable {
    private let ended = Mutex(false)
    private let endedSignal = DispatchSemaphore(value: 0)

    /// Starts draining `pipe`'s read end: `deliver` gets each chunk read, in order, on the
    /// drain's thread; `finished` runs there once, at end of file (every writer closed) or on a
    /// read error. Start it before or after the child runs; nothing written is lost either way.
    public init(_ pipe: Pipe, deliver: @escaping @Sendable (Data) -> Void, finished: @escaping @Sendable () -> Void = {}) {
        let fd = fcntl(pipe.fileHandleForReading.fileDescriptor, F_DUPFD_CLOEXEC, 0)
        Thread.detachNewThread { [self] in
            defer {
                if fd >= 0 { close(fd) }
                finished()
                ended.withLock { $0 = true }
                endedSignal.signal()
            }
            guard fd >= 0 else { return }
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if count > 0 {
                    deliver(Data(buffer[0 ..< count]))
                } else if count < 0 && errno == EINTR {
                    continue
                } else {
                    return
                }
            }
        }
    }

    /// Whether the end was read.
    public var hasEnded: Bool { ended.withLock { $0 } }

    /// Waits up to `seconds` for the end (a process that left a child holding the pipe open
    /// never ends it); true when it was read.
    @discardableResult
    public func waitForEnd(seconds: Double) -> Bool {
        if hasEnded { return true }
        guard endedSignal.wait(timeout: .now() + seconds) == .success else { return false }
        endedSignal.signal()
        return true
    }
}
