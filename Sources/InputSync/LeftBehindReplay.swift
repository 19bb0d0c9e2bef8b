import Foundation
import NetplayWire

/// The replay a relay that died left behind for a session: the newest of the session's files,
/// without a footer. A session rebuilt after the restart continues it, and, while it is fresh,
/// takes the frames it holds as the relay's own record of what was confirmed before.
struct LeftBehindReplay {
    /// A file written to this recently (seconds) was written until the relay died, give or take
    /// a record: its writer had not failed, and the match had not stalled since.
    static let freshSeconds: TimeInterval = 30

    /// The file.
    let url: URL
    /// What it holds.
    let file: ReplayFile
    /// Bytes of complete frames (a relay killed while writing leaves a partial one after them).
    let validBytes: Int
    /// When it was last written.
    let modifiedAt: Date

    /// The first frame it lacks.
    var end: Int { file.startFrame + file.frameCount }

    /// Records are written as frames are confirmed, a record once it is full: the dead relay had
    /// confirmed fewer frames than this, so no peer holds more.
    var confirmedBound: Int { end + ReplayWriter.framesPerRecord }

    /// Whether its frames can stand for what the dead relay confirmed, for a session of
    /// `params`, at `date`: written within ``freshSeconds`` (an older one may be from a
    /// writer that failed, or lag behind the match), with the session's slots and input size.
    func vouches(for params: SyncParams, at date: Date) -> Bool {
        abs(date.timeIntervalSince(modifiedAt)) <= Self.freshSeconds
            && file.header.params.maxPlayers == params.maxPlayers && file.header.params.inputSize == params.inputSize
    }

    /// The replay `sessionId` left in `directory`, or nil when there is none to continue (none,
    /// or the newest has a footer: it ended).
    static func find(_ sessionId: String, in directory: URL) throws -> LeftBehindReplay? {
        let safe = ReplayWriter.stem(of: sessionId)
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).filter {
            $0 == "\(safe).replay" || ($0.hasPrefix("\(safe)-") && $0.hasSuffix(".replay")
                                        && Int($0.dropFirst(safe.count + 1).dropLast(7)) != nil)
        }
        func suffix(_ name: String) -> Int { name == "\(safe).replay" ? 1 : Int(name.dropFirst(safe.count + 1).dropLast(7)) ?? 0 }
        guard let newest = names.max(by: { suffix($0) < suffix($1) }) else { return nil }
        let url = directory.appendingPathComponent(newest)
        let (file, validBytes) = try ReplayFile.read(url)
        guard file.footer == nil, file.header.sessionId == sessionId else { return nil }
        let modifiedAt = (try? FileManager.default.attributesOfItem(atPath: url.path)[.modificationDate] as? Date) ?? .distantPast
        return LeftBehindReplay(url: url, file: file, validBytes: validBytes, modifiedAt: modifiedAt)
    }
}
