import CNetplayAPI
import NetplayKit
import Rollback

// The game loop's calls on an np_match: tick, status, HUD, checksums, start, chat (send and read), leave, free.

@_cdecl("np_match_tick")
public func np_match_tick(_ match: OpaquePointer?, _ input: UnsafePointer<UInt8>?, _ inputSize: Int,
                          _ out: UnsafeMutablePointer<np_tick_result>?) -> np_result {
    withMatch(match) { handle in
        let expected = Int(handle.match.params.inputSize)
        guard inputSize == expected else {
            throw CAPIFailure.invalid("input_size is \(inputSize), the session's inputs are \(expected) bytes")
        }
        guard let input else { throw CAPIFailure.invalid("input is NULL") }
        handle.callbacks.inputSize = expected
        let result = try handle.tick(GameInput(bytes: UnsafeBufferPointer(start: input, count: inputSize)))
        out?.pointee = np_tick_result(frames_advanced: Int32(clamping: result.framesAdvanced), rolled_back_frames: Int32(clamping: result.rolledBackFrames),
                                      running: result.running ? 1 : 0, frame_interval_scale: handle.match.frameIntervalScale,
                                      first_frame_near: handle.match.firstFrameIsNear ? 1 : 0)
    }
}

extension np_match_status {
    /// The status of `handle`'s match.
    init(_ handle: MatchHandle) {
        self.init()
        let match = handle.match
        switch match.state {
        case .idle:
            state = NP_STATE_IDLE
        case .hosting(_, let players, let maxPlayers):
            state = NP_STATE_HOSTING
            self.players = Int32(clamping: players)
            max_players = Int32(clamping: maxPlayers)
        case .connecting(_, let attempt):
            state = NP_STATE_CONNECTING
            self.attempt = Int32(clamping: attempt)
        case .connected(_, let players):
            state = NP_STATE_CONNECTED
            self.players = Int32(clamping: players)
        case .disconnected(let why):
            state = NP_STATE_DISCONNECTED
            switch why {
            case .left: reason = NP_REASON_LEFT
            case .kicked: reason = NP_REASON_KICKED
            case .sessionEnded: reason = NP_REASON_SESSION_ENDED
            case .relayLost: reason = NP_REASON_RELAY_LOST
            case .refused(let code, _):
                reason = NP_REASON_REFUSED
                refusal_code = code.rawValue
            case .replaced: reason = NP_REASON_REPLACED
            case .failed: reason = NP_REASON_FAILED
            }
        }
        // Clamped: what a relay says of the session (a hostile one too) never traps the frontend.
        if max_players == 0 { max_players = Int32(clamping: match.params.maxPlayers) }
        slot = Int32(clamping: match.slot)
        is_host = handle.isHost ? 1 : 0
        is_spectator = match.role == .spectator ? 1 : 0
        running = match.isRunning ? 1 : 0
        current_frame = Int64(match.currentFrame)
        confirmed_frames = Int64(match.confirmedFrames)
        start_frame = Int64(match.startFrame)
        input_size = Int(match.params.inputSize)
        frame_rate_hz = match.params.framesPerSecond
        copyCString(match.admission.sessionId, into: &session_id)
        copyCString(match.state.description, into: &description)
    }
}

@_cdecl("np_match_get_status")
public func np_match_get_status(_ match: OpaquePointer?, _ out: UnsafeMutablePointer<np_match_status>?) -> np_result {
    withMatch(match) { handle in
        guard let out else { throw CAPIFailure.invalid("out is NULL") }
        out.pointee = np_match_status(handle)
    }
}

extension np_hud {
    /// The C form of `hud` (at most NP_HUD_MAX_PLAYERS rows).
    init(_ hud: HUDStats) {
        self.init()
        ping_ms = Int32(clamping: hud.pingMs)
        jitter_ms = Int32(clamping: hud.jitterMs)
        frame_delay = Int32(clamping: hud.frameDelay)
        rollbacks = Int32(clamping: hud.rollbacks)
        rollback_frames = Int32(clamping: hud.rollbackFrames)
        max_rollback_frames = Int32(clamping: hud.maxRollbackFrames)
        frames_ahead = Int32(clamping: hud.framesAhead)
        current_frame = Int64(hud.currentFrame)
        confirmed_frame = Int64(hud.confirmedFrame)
        desyncs = Int32(clamping: hud.desyncs)
        resyncs = Int32(clamping: hud.resyncs)
        let rows = hud.players.prefix(Int(NP_HUD_MAX_PLAYERS))
        player_count = Int32(rows.count)
        withUnsafeMutableBytes(of: &players) { buffer in
            let table = buffer.bindMemory(to: np_player_hud.self)
            for (index, player) in rows.enumerated() {
                var row = np_player_hud()
                row.slot = Int32(clamping: player.slot)
                copyCString(player.name, into: &row.name)
                row.connected = player.connected ? 1 : 0
                row.ping_ms = Int32(clamping: player.pingMs)
                row.substituted_frames = Int32(clamping: player.substitutedFrames)
                row.is_local = player.isLocal ? 1 : 0
                table[index] = row
            }
        }
    }
}

@_cdecl("np_match_get_hud")
public func np_match_get_hud(_ match: OpaquePointer?, _ out: UnsafeMutablePointer<np_hud>?) -> np_result {
    withMatch(match) { handle in
        guard let out else { throw CAPIFailure.invalid("out is NULL") }
        out.pointee = np_hud(handle.match.hud)
    }
}

@_cdecl("np_match_reported_checksum")
public func np_match_reported_checksum(_ match: OpaquePointer?, _ frame: Int64, _ out: UnsafeMutablePointer<UInt64>?) -> np_result {
    withMatch(match) { handle in
        guard let out else { throw CAPIFailure.invalid("out is NULL") }
        guard let checksum = handle.match.reportedChecksums[Int(frame)] else {
            throw CAPIFailure(NP_ERR_NOT_FOUND, "no checksum reported for frame \(frame) (yet)")
        }
        out.pointee = checksum
    }
}

@_cdecl("np_match_start_now")
public func np_match_start_now(_ match: OpaquePointer?) -> np_result {
    withMatch(match) { handle in
        guard handle.isHost else { throw CAPIFailure.invalid("only the host starts the match") }
        handle.match.startNow()
    }
}

@_cdecl("np_match_send_chat")
public func np_match_send_chat(_ match: OpaquePointer?, _ text: UnsafePointer<CChar>?) -> np_result {
    withMatch(match) { handle in
        guard let text = string(text), !text.isEmpty else { throw CAPIFailure.invalid("text is NULL or empty") }
        if case .disconnected(let reason) = handle.match.state { throw CAPIFailure(NP_ERR_ENDED, "the match is over: \(reason)") }
        // Not sent while the relay does not know us (connecting, reconnecting): OK said it went.
        guard handle.match.sendChat(text) else {
            throw CAPIFailure(NP_ERR_UNAVAILABLE, "not connected to the relay yet (connecting or reconnecting): the line was not sent")
        }
    }
}

@_cdecl("np_match_next_chat")
public func np_match_next_chat(_ match: OpaquePointer?, _ out: UnsafeMutablePointer<np_chat_line>?) -> np_result {
    withMatch(match) { handle in
        guard let out else { throw CAPIFailure.invalid("out is NULL") }
        let lines = handle.match.chatLines
        let firstKept = handle.match.chatReceived - lines.count
        // Lines the match no longer keeps are skipped: the oldest kept is the next one.
        handle.chatRead = max(handle.chatRead, firstKept)
        guard handle.chatRead < handle.match.chatReceived else {
            throw CAPIFailure(NP_ERR_NOT_FOUND, "no chat line left to read")
        }
        let line = lines[handle.chatRead - firstKept]
        handle.chatRead += 1
        var row = np_chat_line()
        row.slot = Int32(clamping: line.slot)
        copyCString(line.from, into: &row.from)
        copyCString(line.text, into: &row.text)
        row.sent_at_unix_ms = Int64(clamping: line.sentAtUnixMs)
        out.pointee = row
    }
}

@_cdecl("np_match_leave")
public func np_match_leave(_ match: OpaquePointer?, _ waitSeconds: Double) -> np_result {
    withMatch(match) { handle in
        guard waitSeconds >= 0, waitSeconds <= 60 else { throw CAPIFailure.invalid("wait_seconds must be 0 ... 60") }
        handle.match.leave()
        if waitSeconds > 0 { handle.match.waitUntilLeft(seconds: waitSeconds) }
    }
}

@_cdecl("np_match_free")
public func np_match_free(_ match: OpaquePointer?) {
    HandleRegistry.remove(match, as: MatchHandle.self)?.close()
}
