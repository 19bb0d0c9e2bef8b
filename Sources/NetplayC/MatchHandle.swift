import CNetplayAPI
import Foundation
import NetplayAuth
import NetplayKit
import Rollback

/// What an np_match handle stands for: a NetplayKit match of the frontend's callback game,
/// the LAN room it hosts (if any) and the lobby that marks it started.
///
/// NetplayKit's match is driven from one thread; so is an np_match (the C API's contract: one
/// call on a match at a time, callbacks on the ticking thread), hence unchecked Sendable.
final class MatchHandle: @unchecked Sendable {
    let match: NetplayMatch<CallbackGame>
    let callbacks: GameCallbacks
    let lanHost: LanHost?
    let lobby: NetplayLobby
    /// The host tells the coordinator once its match runs (the room shows "in progress").
    private var markedStarted = false
    /// Chat lines the frontend read (``NetplayMatch/chatReceived`` numbering).
    var chatRead = 0
    private var freed = false

    init(match: NetplayMatch<CallbackGame>, callbacks: GameCallbacks, lanHost: LanHost?, lobby: NetplayLobby) {
        self.match = match
        self.callbacks = callbacks
        self.lanHost = lanHost
        self.lobby = lobby
    }

    /// The match behind `handle`.
    static func from(_ handle: OpaquePointer?) throws(CAPIFailure) -> MatchHandle {
        guard let match = HandleRegistry.lookup(handle, as: MatchHandle.self) else {
            throw CAPIFailure(NP_ERR_INVALID_HANDLE, handle == nil ? "the np_match is NULL" : "not a live np_match (freed?)")
        }
        return match
    }

    var isHost: Bool { match.isHost }

    /// One tick with `input`; the failure when the match is over or a callback failed.
    func tick(_ input: GameInput) throws(CAPIFailure) -> TickResult {
        try checkGame()
        if case .disconnected(let reason) = match.state { throw CAPIFailure(NP_ERR_ENDED, "the match is over: \(reason)") }
        let result = match.tick(input: input)
        try checkGame()
        if result.running, isHost, !markedStarted {
            markedStarted = true
            // Off the game loop: a few round trips to the coordinator, more on a lossy path.
            let lobby = self.lobby, admission = match.admission
            Thread.detachNewThread { try? lobby.markStarted(admission) }
        }
        return result
    }

    /// A failed callback leaves the match: it cannot go on with a game it cannot save or load.
    private func checkGame() throws(CAPIFailure) {
        guard let failure = callbacks.failure else { return }
        if case .disconnected = match.state {} else { match.leave() }
        throw CAPIFailure(NP_ERR_GAME, "a game callback failed, the match was left: \(failure)")
    }

    /// Leaves (if not left), stops a LAN room's relay. Once.
    func close() {
        guard !freed else { return }
        freed = true
        match.leave()
        lanHost?.stop()
    }
}
