import Foundation

/// The supervisor's console (its standard output), written without ever blocking its loop.
///
/// Writes to a console that does not read (`netplay-supervisor | less` left unscrolled, Ctrl-S
/// in the terminal of `make up`) blocked the loop that reaps, restarts and answers: then no
/// child's output was read either, each child blocked on its next log line, and the relays
/// stalled. Text now goes out only as far as the console takes it without waiting (a `poll` for
/// room, then at most `PIPE_BUF` bytes, which a pipe takes whole once it polls writable); the
/// rest waits in a buffer of ``capacity`` bytes, and whole chunks that do not fit are dropped,
/// counted, and reported by one line once there is room again. The descriptor's flags are
/// left alone (non-blocking mode would reach the terminal the shell shares). Used on the
/// supervisor's loop only.
final class ConsoleWriter {
    /// Bytes that may wait for the console.
    let capacity: Int
    private let descriptor: Int32
    private var pending: [UInt8] = []
    private var head = 0
    /// Lines dropped since the console last took everything.
    private(set) var droppedLines = 0

    init(descriptor: Int32, capacity: Int = 1 << 20) {
        self.descriptor = descriptor
        self.capacity = capacity
    }

    /// Bytes waiting for the console.
    var waiting: Int { pending.count - head }

    /// Queues `text` (`lines` whole lines) and writes what the console takes now. Lines dropped
    /// before are reported by one line first, once there is room again.
    func write(_ text: [UInt8], lines: Int) {
        let note = droppedNote
        if waiting + note.count + text.count > capacity {
            droppedLines += lines
        } else {
            pending += note + text
            droppedLines = 0
        }
        flush()
    }

    /// The line reporting the lines dropped since the console last took everything ("" for none).
    private var droppedNote: [UInt8] {
        droppedLines > 0
            ? Array("supervisor   | \(droppedLines) console lines dropped while the console was not reading (the log files have them)\n".utf8)
            : []
    }

    /// Writes what waits, as far as the console takes it without blocking.
    func flush() {
        while waiting > 0 {
            var entry = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
            guard poll(&entry, 1, 0) == 1, entry.revents & Int16(POLLOUT) != 0 else { break }
            let chunk = min(waiting, Int(PIPE_BUF))
            let written = pending.withUnsafeBytes { Foundation.write(descriptor, $0.baseAddress! + head, chunk) }
            guard written > 0 else {
                // A console that is gone (EPIPE, EBADF) is not written again.
                if written < 0 && errno != EAGAIN && errno != EINTR { pending.removeAll(); head = 0 }
                break
            }
            head += written
        }
        if head > 0 && head >= pending.count / 2 {
            pending.removeFirst(head)
            head = 0
        }
        // Caught up with nothing new to write: the drops are reported now (on the next turn).
        if waiting == 0 && droppedLines > 0 {
            pending = droppedNote
            droppedLines = 0
        }
    }
}
