import Foundation
import Logging
import Synchronization

/// A swift-log handler that writes one line per event to standard error:
/// `2026-11-21T23:59:00.123Z info discovery/discovery-1: room added room=abc`.
///
/// Lines are written with a single `write(2)` so concurrent threads never interleave, and the
/// supervisor can prefix and capture them per child. One event is always one line: control
/// characters in the message, metadata keys and values (which may carry what a peer sent) are
/// escaped (`\r`, `\n`, `\t`, `\u{1b}`), so nobody can forge a log line.
public struct NetplayLogHandler: LogHandler {
    /// The service kind shown on every line.
    public let service: String
    /// The instance shown on every line.
    public let instance: String
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    private let fileDescriptor: Int32
    private let neverBlocks: Bool

    /// Creates a handler writing to `fileDescriptor` (standard error by default). With
    /// `neverBlocks` (the supervisor, whose loop keeps every child running), a line is written
    /// only when the descriptor takes it without waiting, cut to `PIPE_BUF` bytes (which a pipe
    /// takes whole once it polls writable), and dropped otherwise: a console that does not read
    /// (Ctrl-S in the terminal) must not stop the loop.
    public init(service: String, instance: String, level: Logger.Level, fileDescriptor: Int32 = 2, neverBlocks: Bool = false) {
        self.service = service
        self.instance = instance
        self.logLevel = level
        self.fileDescriptor = fileDescriptor
        self.neverBlocks = neverBlocks
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { _, new in new } }
        var line = "\(Timestamp.now()) \(event.level) \(ControlCharacters.escaped(service))/\(ControlCharacters.escaped(instance)): \(ControlCharacters.escaped(event.message.description))"
        for key in merged.keys.sorted() {
            line += " \(ControlCharacters.escaped(key))=\(Self.quoted(merged[key]!.description))"
        }
        line += "\n"
        if neverBlocks {
            var entry = pollfd(fd: fileDescriptor, events: Int16(POLLOUT), revents: 0)
            guard poll(&entry, 1, 0) == 1, entry.revents & Int16(POLLOUT) != 0 else { return }
            if line.utf8.count > Int(PIPE_BUF) { line = ControlCharacters.fitted(line, maxBytes: Int(PIPE_BUF) - 1) + "\n" }
        }
        line.utf8CString.withUnsafeBufferPointer { buffer in
            _ = write(fileDescriptor, buffer.baseAddress, buffer.count - 1)
        }
    }

    /// `value` as one logfmt value, control characters escaped: in quotes, its backslashes and
    /// quotes escaped too, when it holds a space, a quote or `=` (or nothing). A backslash left
    /// alone let a value that a peer chose (`abc\" forged=1`) end its quotes early and forge a
    /// field.
    static func quoted(_ value: String) -> String {
        guard value.contains(where: { $0 == " " || $0 == "\"" || $0 == "=" }) || value.isEmpty else {
            return ControlCharacters.escaped(value)
        }
        return "\"" + ControlCharacters.escaped(value, quotes: true) + "\""
    }

}

/// Installs ``NetplayLogHandler`` as the process's logging backend (once per process).
public enum NetplayLogging {
    private static let bootstrapped = Mutex(false)

    /// Bootstraps swift-log for `service`/`instance` at `level` (`neverBlocks`: see
    /// ``NetplayLogHandler/init(service:instance:level:fileDescriptor:neverBlocks:)``). Later
    /// calls only return a logger.
    @discardableResult
    public static func bootstrap(service: String, instance: String, level: Logger.Level, neverBlocks: Bool = false) -> Logger {
        bootstrapped.withLock { done in
            if !done {
                LoggingSystem.bootstrap { _ in
                    NetplayLogHandler(service: service, instance: instance, level: level, neverBlocks: neverBlocks)
                }
                done = true
            }
        }
        var logger = Logger(label: "netplay.\(service)")
        logger.logLevel = level
        return logger
    }
}
