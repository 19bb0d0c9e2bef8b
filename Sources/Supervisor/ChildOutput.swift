import Foundation

/// One instance's log file, rotated by size: `name.log` grows to `maxBytes`, then becomes
/// `name.log.1` (older ones shift to `.2` ... `.keep`; the oldest is deleted).
final class RotatingLogFile {
    let path: String
    let maxBytes: Int
    let keep: Int
    private var descriptor: Int32 = -1
    private var size = 0

    init(path: String, maxBytes: Int, keep: Int) {
        self.path = path
        self.maxBytes = maxBytes
        self.keep = keep
        open()
    }

    deinit { if descriptor >= 0 { Foundation.close(descriptor) } }

    private func open() {
        descriptor = Foundation.open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        var info = stat()
        size = descriptor >= 0 && fstat(descriptor, &info) == 0 ? Int(info.st_size) : 0
    }

    /// Appends `bytes` (whole lines), rotating first when the file would pass the limit.
    func append(_ bytes: [UInt8]) {
        if size > 0 && size + bytes.count > maxBytes { rotate() }
        guard descriptor >= 0 else { return }
        writeAll(bytes, to: descriptor)
        size += bytes.count
    }

    func rotate() {
        if descriptor >= 0 { Foundation.close(descriptor) }
        if keep == 0 {
            unlink(path)
        } else {
            unlink("\(path).\(keep)")
            if keep > 1 {
                for index in stride(from: keep - 1, through: 1, by: -1) { rename("\(path).\(index)", "\(path).\(index + 1)") }
            }
            rename(path, "\(path).1")
        }
        open()
    }
}

/// Splits a child's output into lines, prefixes each with its instance for the supervisor's
/// console (`sync-1       | ...`), and appends it to the instance's log file. Keeps the last
/// few lines for failure messages.
final class ChildOutput {
    let prefix: [UInt8]
    let log: RotatingLogFile?
    let console: ConsoleWriter?
    private var partial: [UInt8] = []
    private(set) var recent: [String] = []

    init(instance: String, width: Int, log: RotatingLogFile?, console: ConsoleWriter?) {
        let padded = instance.padding(toLength: max(width, instance.count), withPad: " ", startingAt: 0)
        prefix = Array("\(padded) | ".utf8)
        self.log = log
        self.console = console
    }

    /// Reads what is available on `fd` (non-blocking), at most `maxReads` buffers of 64 KiB:
    /// a child that writes without pause would otherwise keep the pipe full and hold the
    /// supervisor's loop here for good (no ticks, no heartbeats checked, no stop). The watcher is
    /// level-triggered, so what is left is read on the next turn. Returns false at end of file.
    func drain(_ fd: Int32, maxReads: Int = 4) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 65536)
        for _ in 0 ..< maxReads {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count > 0 {
                consume(buffer[0..<count])
                continue
            }
            if count == 0 { flush(); return false }
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR
        }
        return true
    }

    func consume(_ bytes: ArraySlice<UInt8>) {
        var start = bytes.startIndex
        var lines: [UInt8] = []
        lines.reserveCapacity(partial.count + bytes.count + 1)
        var consoleText: [UInt8] = []
        // Where each line begins in `lines`: only the last few become remembered strings (a child
        // writing without pause sends tens of thousands a read, and each was made a String).
        var starts: [Int] = []
        func take(_ line: some Collection<UInt8>) {
            starts.append(lines.count)
            lines.append(contentsOf: line)
            lines.append(10)
            if console != nil {
                consoleText.append(contentsOf: prefix)
                consoleText.append(contentsOf: line)
                consoleText.append(10)
            }
        }
        while let newline = bytes[start...].firstIndex(of: 10) {
            if partial.isEmpty {
                take(bytes[start..<newline])
            } else {
                take(partial + bytes[start..<newline])
                partial.removeAll(keepingCapacity: true)
            }
            start = bytes.index(after: newline)
        }
        partial += bytes[start...]
        if partial.count > 65536 {  // a runaway line without newline: emit it anyway
            take(partial)
            partial.removeAll()
        }
        for (offset, begin) in starts.enumerated().suffix(8) {
            let end = offset + 1 < starts.count ? starts[offset + 1] : lines.count
            remember(lines[begin ..< end - 1])
        }
        emit(lines, consoleText, count: starts.count)
    }

    func flush() {
        guard !partial.isEmpty else { return }
        let line = partial
        partial.removeAll()
        remember(line)
        emit(line + [10], prefix + line + [10], count: 1)
    }

    /// Writes one supervisor-made line (e.g. "exited with status 2") to the log file.
    func note(_ text: String) {
        log?.append(Array("\(text)\n".utf8))
    }

    private func remember<C: Collection>(_ line: C) where C.Element == UInt8 {
        recent.append(String(decoding: line, as: UTF8.self))
        if recent.count > 8 { recent.removeFirst(recent.count - 8) }
    }

    private func emit(_ lines: [UInt8], _ consoleText: [UInt8], count: Int) {
        guard !lines.isEmpty else { return }
        log?.append(lines)
        console?.write(consoleText, lines: count)
    }
}

/// Writes all of `bytes` to `descriptor`, stopping early only when a write fails.
private func writeAll(_ bytes: [UInt8], to descriptor: Int32) {
    bytes.withUnsafeBytes { buffer in
        var offset = 0
        while offset < buffer.count {
            let written = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
            if written <= 0 { break }
            offset += written
        }
    }
}
