import Foundation
import Logging
import Testing
@testable import NetplayService
import NetplayTestSupport

@Suite("Log lines: one event is one line, whatever a peer sends", .ownThread)
struct LogHandlerTests {
    /// What `body` logs through a ``NetplayLogHandler`` writing into a pipe.
    func captured(_ body: (Logger) -> Void) throws -> String {
        var fds: [Int32] = [0, 0]
        try #require(pipe(&fds) == 0)
        defer { close(fds[0]) }
        let logger = Logger(label: "test") { _ in
            NetplayLogHandler(service: "discovery", instance: "discovery-1", level: .debug, fileDescriptor: fds[1])
        }
        body(logger)
        close(fds[1])
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(fds[0], &buffer, buffer.count)
            if count <= 0 { break }
            bytes += buffer[0..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The supervisor's own lines never wait for a console that does not read (its loop keeps
    /// every child running): lines that do not fit are dropped, and a long one is cut to what a
    /// pipe takes whole.
    @Test func aHandlerThatNeverBlocksDropsWhatAStuckConsoleCannotTake() throws {
        var fds: [Int32] = [0, 0]
        try #require(pipe(&fds) == 0)
        defer { close(fds[0]); close(fds[1]) }
        let logger = Logger(label: "test") { _ in
            NetplayLogHandler(service: "supervisor", instance: "supervisor", level: .info, fileDescriptor: fds[1], neverBlocks: true)
        }
        logger.info("long", metadata: ["text": "\(String(repeating: "x", count: 10_000))"])
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        let first = read(fds[0], &buffer, buffer.count)
        #expect(first > 0 && first <= Int(PIPE_BUF) && buffer[first - 1] == 10, "\(first) bytes")
        // 100,000 lines into a 64 KiB pipe nobody reads: this returns (a blocking write would not).
        let started = ContinuousClock.now
        for index in 0 ..< 100_000 { logger.info("line \(index)") }
        #expect(ContinuousClock.now - started < .seconds(20))
    }

    @Test func controlCharactersInTheMessageAreEscaped() throws {
        let forged = "room added\r\n2026-11-21T23:59:00.123Z critical coordinator/coordinator-1: key leaked\u{1b}[2J\u{7}\u{0}\u{85}\u{2028}\tend"
        let text = try captured { $0.info("\(forged)") }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 2 && lines[1].isEmpty, "one event, one line: \(text.debugDescription)")
        #expect(!text.dropLast().contains(where: { $0.unicodeScalars.contains(where: ControlCharacters.contains) }))
        #expect(text.contains(#"room added\r\n2026-11-21T23:59:00.123Z critical coordinator/coordinator-1: key leaked\u{1b}[2J\u{7}\u{0}\u{85}\u{2028}\tend"#),
                "\(text.debugDescription)")
    }

    @Test func controlCharactersInMetadataAreEscaped() throws {
        let text = try captured { logger in
            logger.warning("refused", metadata: ["name": "eve\nfake line", "peer": "10.0.0.1\r", "bell\u{7}key": "x\u{1b}y"])
        }
        #expect(text.split(separator: "\n").count == 1 && text.hasSuffix("\n"), "\(text.debugDescription)")
        #expect(text.contains(#"name="eve\nfake line""#), "\(text.debugDescription)")
        #expect(text.contains(#"peer=10.0.0.1\r"#), "\(text.debugDescription)")
        #expect(text.contains(#"bell\u{7}key=x\u{1b}y"#), "\(text.debugDescription)")
    }

    @Test func ordinaryTextIsUnchanged() throws {
        let text = try captured { $0.info("room 'Zelda – ゼルダ' added", metadata: ["room": "abc", "path": #"C:\games"#]) }
        #expect(text.hasSuffix(#"info discovery/discovery-1: room 'Zelda – ゼルダ' added path=C:\games room=abc"# + "\n"), "\(text)")
    }
}

extension LogHandlerTests {
    @Test func timestampsAreISO8601InUTCWithMilliseconds() {
        #expect(Timestamp.iso8601(unixMs: 1_795_996_740_123) == "2026-11-29T23:59:00.123Z")
        #expect(Timestamp.iso8601(unixMs: 7) == "1970-01-01T00:00:00.007Z")
        #expect(Timestamp.now().count == "2026-11-29T23:59:00.123Z".count)
    }

    @Test func aQuotedValueCannotEndItsQuotesEarly() {
        #expect(NetplayLogHandler.quoted(#"abc\" forged=1 x=\""#) == #""abc\\\" forged=1 x=\\\"""#)
        #expect(NetplayLogHandler.quoted(#"a\b"#) == #"a\b"#, "no quotes needed: as it is")
        #expect(NetplayLogHandler.quoted("two words") == #""two words""#)
    }

    @Test func quotedTextEscapesItsQuotesAndBackslashesToo() {
        #expect(ControlCharacters.escaped(#"say "hi"\now"#) == #"say "hi"\now"#)
        #expect(ControlCharacters.escaped(#"say "hi"\now"#, quotes: true) == #"say \"hi\"\\now"#)
        // Fitted to a wire string's byte limit: escaped first, then cut on a character boundary.
        #expect(ControlCharacters.fitted("a\u{0}b", maxBytes: 16) == "a\\u{0}b")
        #expect(ControlCharacters.fitted("ééé", maxBytes: 5) == "éé")
        #expect(ControlCharacters.fitted("a\nb", maxBytes: 2) == "a\\")
        #expect(ControlCharacters.fitted("🇫🇷x", maxBytes: 7) == "")
        #expect(ControlCharacters.escaped("a\u{1B}[2Jb\u{9F}") == #"a\u{1b}[2Jb\u{9f}"#)
    }
}
