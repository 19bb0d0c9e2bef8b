import Foundation

/// The revocation book's entries on disk, so a relay restarted on its data directory still
/// refuses whom the dead one refused (a kicked player must not come back through the rebuild of
/// its match). One JSON object a line, appended as revocations are made; rewritten with the live
/// entries only when it is read, and once it holds twice the book's capacity in lines. A file it
/// cannot read or write costs the restart its memory, not the relay its work: ``problem`` says why.
final class RevocationJournal {
    /// One revocation: session, participant, until when (wall clock, ms), whether a kick.
    struct Line: Codable, Equatable {
        let session: String
        let participant: String
        let until: UInt64
        let kicked: Bool
    }

    let url: URL
    private var handle: FileHandle?
    private var lines = 0
    private let compactAt: Int
    private let encoder = JSONEncoder()
    /// Why the file could not be read or written in full (nil: no trouble).
    private(set) var problem: String?
    /// A write failed (a full disk): the file is rewritten again, every 10 s at most, until it
    /// works (one failure used to stop the journal until the next restart).
    private var writeFailed = false
    private var lastRetryUnixMs: UInt64?

    /// A journal in `url`, rewritten once it reaches `compactAt` lines.
    init(url: URL, compactAt: Int) {
        self.url = url
        self.compactAt = max(1, compactAt)
    }

    /// Whether it has grown enough to be rewritten.
    var wantsCompaction: Bool { lines >= compactAt }

    /// Whether a write failed and it is time to try the file again (a rewrite): at once after
    /// the failure, then every 10 s. Never for a file that could not be read (it is left as it
    /// is: what it holds may be readable again later).
    func wantsRetry(nowUnixMs: UInt64) -> Bool {
        guard writeFailed else { return false }
        if let last = lastRetryUnixMs, nowUnixMs < last &+ 10_000 { return false }
        lastRetryUnixMs = nowUnixMs
        return true
    }

    /// The revocations in the file (none when there is no file), or nil when it cannot be read
    /// (then it is left as it is, and not written to: what it holds may be readable again
    /// later). Lines that do not decode are skipped and counted in ``problem``.
    func load() -> [Line]? {
        guard FileManager.default.fileExists(atPath: url.path) else { return [] }
        let data: Data
        do { data = try Data(contentsOf: url) } catch {
            problem = "cannot read \(url.path): \(error.localizedDescription)"
            return nil
        }
        let decoder = JSONDecoder()
        var loaded: [Line] = []
        var unreadable = 0
        for line in data.split(separator: UInt8(ascii: "\n")) where !line.isEmpty {
            if let entry = try? decoder.decode(Line.self, from: Data(line)) { loaded.append(entry) } else { unreadable += 1 }
        }
        if unreadable > 0 { problem = "\(url.path): \(unreadable) unreadable lines skipped" }
        return loaded
    }

    /// Replaces the file with `entries` (atomically) and appends to it from then on. When that
    /// fails (a full disk), the old file and its handle stay, and the next try waits for as many
    /// lines again.
    func rewrite(_ entries: [Line]) {
        do {
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            var bytes: [UInt8] = []
            for entry in entries { bytes += Self.encode(entry, with: encoder) }
            try Data(bytes).write(to: url, options: .atomic)
            let fresh = try FileHandle(forWritingTo: url)
            try fresh.seekToEnd()
            try? handle?.close()
            handle = fresh
            lines = entries.count
            if writeFailed { problem = nil }
            writeFailed = false
            lastRetryUnixMs = nil
        } catch {
            problem = "cannot write \(url.path): \(error.localizedDescription)"
            lines = 0
            writeFailed = true
        }
    }

    /// Appends one revocation.
    func append(_ entry: Line) {
        guard let handle else { return }
        do {
            try handle.write(contentsOf: Self.encode(entry, with: encoder))
            lines += 1
        } catch {
            problem = "cannot write \(url.path): \(error.localizedDescription)"
            try? handle.close()
            self.handle = nil
            writeFailed = true
        }
    }

    private static func encode(_ entry: Line, with encoder: JSONEncoder) -> [UInt8] {
        ((try? encoder.encode(entry)).map { [UInt8]($0) } ?? []) + [UInt8(ascii: "\n")]
    }
}
