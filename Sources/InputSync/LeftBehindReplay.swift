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
    /// What it holds: the header, and its last frames (at least those ``find(_:in:lastFrames:)``
    /// was asked for, when it has them).
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
    /// `params`, at `date`: written within ``freshSeconds`` (an older one may lag behind the
    /// match), with the session's slots and input size, and frames a match can have (a damaged
    /// header must not carry the rebuilt timeline past the wire's last frame).
    func vouches(for params: SyncParams, at date: Date) -> Bool {
        file.startFrame <= end && confirmedBound <= RelaySession.frameLimit
            && abs(date.timeIntervalSince(modifiedAt)) <= Self.freshSeconds
            && file.header.params.maxPlayers == params.maxPlayers && file.header.params.inputSize == params.inputSize
    }

    /// The replay `sessionId` left in `directory`, or nil when there is none to continue: none,
    /// or the session's newest file (by when it was last written) has a footer (it ended).
    /// Files of another session whose id shares the name's stem are passed over; one renamed
    /// `.failed` (its writer failed) is not a candidate. Only its last `lastFrames` frames are
    /// read (all of them when nil): a rebuild seeds no more than its backlog, and a long match's
    /// file would otherwise be decoded whole on the relay's one thread.
    static func find(_ sessionId: String, in directory: URL, lastFrames: Int? = nil) throws -> LeftBehindReplay? {
        let stem = ReplayWriter.stem(of: sessionId)
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).filter {
            $0 == "\(stem).replay" || ($0.hasPrefix("\(stem)-") && $0.hasSuffix(".replay")
                                        && Int($0.dropFirst(stem.count + 1).dropLast(7)) != nil)
        }
        let candidates = names.map { name -> (url: URL, modifiedAt: Date) in
            let url = directory.appendingPathComponent(name)
            let modifiedAt = (try? FileManager.default.attributesOfItem(atPath: url.path)[.modificationDate] as? Date) ?? .distantPast
            return (url, modifiedAt)
        }
        for candidate in candidates.sorted(by: { $0.modifiedAt > $1.modifiedAt }) {
            let (file, validBytes) = try ReplayFile.read(candidate.url, lastFrames: lastFrames)
            guard file.header.sessionId == sessionId else { continue }
            guard file.footer == nil else { return nil }
            return LeftBehindReplay(url: candidate.url, file: file, validBytes: validBytes, modifiedAt: candidate.modifiedAt)
        }
        return nil
    }
}
