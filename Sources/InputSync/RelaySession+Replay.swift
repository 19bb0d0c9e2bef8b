import Foundation
import NetplayService
import NetplayWire

// RelaySession: the replay file (continuing it after a restart, opening it) and ending the session.
extension RelaySession {
    // MARK: - Replay

    /// A session rebuilt after a restart continues the replay the dead relay left (`left`), when
    /// the rebuilt timeline still holds the first frame that file lacks; otherwise says why not.
    func continueReplay(_ left: Result<LeftBehindReplay?, any Error>) {
        guard configuration.replayDirectory != nil, replay == nil else { return }
        do {
            guard let left = try left.get() else { return }
            let writer = try ReplayWriter(continuing: left)
            guard writer.nextFrame >= timeline.origin else {
                transport.publish(topic: "sync.replay_failed", .eventRecord(EventRecord()), severity: .error,
                                  message: "cannot continue the replay of \(sessionId): frames \(writer.nextFrame) ..< \(timeline.origin) were lost with the relay",
                                  sessionId: sessionId)
                writer.finish(footerReason: "relay restarted; frames from \(writer.nextFrame) were lost", finalChecksum: 0)
                return
            }
            replay = writer
        } catch {
            transport.publish(topic: "sync.replay_failed", .eventRecord(EventRecord()), severity: .error,
                              message: "cannot continue the replay of \(sessionId): \(error)", sessionId: sessionId)
        }
    }

    /// Opens the session's next replay file: it starts at `frame`, from `state` (empty: the
    /// players' boot), and records every confirmed input from there.
    func openReplay(from frame: Int, state: [UInt8]) {
        guard let directory = configuration.replayDirectory, replay == nil else { return }
        guard replayFilesOpened < Self.maxReplayFilesPerSession else {
            if replayFilesOpened == Self.maxReplayFilesPerSession {
                replayFilesOpened += 1  // said once
                transport.publish(topic: "sync.replay_failed", .eventRecord(EventRecord()), severity: .error,
                                  message: "session \(sessionId) wrote its \(Self.maxReplayFilesPerSession) replay files (one per restart); the rest of it is not recorded",
                                  sessionId: sessionId)
            }
            return
        }
        let header = ReplayHeader(formatVersion: 1, sessionId: sessionId,
                                  content: content ?? ContentInfo(gameName: "unknown"), params: params,
                                  players: players.compactMap { $0?.info },
                                  startedAtUnixMs: UnixTime.nowMs(), startFrame: UInt32(frame),
                                  gameOptions: Array(gameOptions.prefix(4096)), startState: state)
        do {
            replay = try ReplayWriter(directory: directory, sessionId: sessionId, header: header, startFrame: frame)
            replayFilesOpened += 1
        } catch {
            transport.publish(topic: "sync.replay_failed", .eventRecord(EventRecord()), severity: .error,
                              message: "cannot write the replay of \(sessionId): \(error)", sessionId: sessionId)
        }
    }

    /// Replay files one session writes at most (the match's and one after each restart): a loop
    /// of restarts pipelined with their states filled the disk with files, each with its state,
    /// and each ended with an fsync on the relay's thread. Past it a restart costs neither.
    static let maxReplayFilesPerSession = 16

    /// Ends the session: everyone is told, the replay is finished and synced to disk.
    func end(reason: DetachReason, detail: String, now: UInt64) {
        guard !ended else { return }
        ended = true
        transfer = nil  // what it held goes back to the relay's budget
        for participant in participants {
            if let address = participant.address {
                transport.send(.detach(Detach(reason: reason, message: String(detail.prefix(256)))), to: address)
            }
            participant.address = nil
        }
        replay?.finish(footerReason: detail, finalChecksum: checksums.agreed[timeline.confirmed] ?? 0,
                       timeline: timeline)
        replay = nil
        transport.publish(topic: "sync.session_ended", .eventRecord(EventRecord()), severity: .info,
                          message: "session \(sessionId) ended after \(timeline.confirmed) frames: \(detail)",
                          sessionId: sessionId)
    }
}
