import CNetplayAPI
import Foundation
import NetplayAuth
import NetplayKit
import Rollback
import Synchronization

/// What an np_match handle stands for: a NetplayKit match of the frontend's callback game,
/// the LAN room it hosts (if any) and the lobby that marks it started.
///
/// NetplayKit's match is driven from one thread; so is an np_match (the C API's contract: one
/// call on a match at a time, callbacks on the ticking thread), hence unchecked Sendable. The
/// contract is checked: a call while another thread is inside one on the same match is refused
/// (``withMatch(_:_:)``), and so is a tick from inside the match's own callbacks.
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
    /// Inside ``tick(_:)``: the frontend's callbacks may be running.
    private var ticking = false
    /// The thread inside a call on this match, and how deep (a callback may call in again).
    private let caller = Mutex<(thread: pthread_t?, depth: Int)>((nil, 0))

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

    /// Marks the calling thread as inside a call on this match; refused while another thread
    /// is (overlapping calls would race on the match's sockets and state).
    func enterCall() throws(CAPIFailure) {
        let me = pthread_self()
        let busy = caller.withLock { state -> Bool in
            if let thread = state.thread, pthread_equal(thread, me) == 0 { return true }
            state.thread = me
            state.depth += 1
            return false
        }
        if busy {
            throw CAPIFailure.invalid("another thread is inside a call on this np_match: calls on one match must not overlap")
        }
    }

    /// The end of a call ``enterCall()`` admitted.
    func exitCall() {
        caller.withLock { state in
            state.depth -= 1
            if state.depth == 0 { state.thread = nil }
        }
    }

    var isHost: Bool { match.isHost }

    /// One tick with `input`; the failure when the match is over or a callback failed.
    func tick(_ input: GameInput) throws(CAPIFailure) -> TickResult {
        // From inside one of its own callbacks, a tick would re-enter the rollback engine
        // mid-frame and corrupt it.
        guard !ticking else { throw CAPIFailure.invalid("np_match_tick was called from inside this match's own callback") }
        ticking = true
        defer { ticking = false }
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

    /// Leaves (if not left), stops a LAN room's relay. Once. Freed from inside one of its own
    /// callbacks (a frontend whose emulator failed), no callback runs again: the engine may still
    /// be in the middle of a frame or a rollback, and the frontend is about to free what its
    /// callbacks use.
    func close() {
        guard !freed else { return }
        freed = true
        if ticking { callbacks.stop("the np_match was freed inside its own callback") }
        match.leave()
        lanHost?.stop()
    }
}

/// Runs `body` on the live match behind `pointer` as one C API call: the handle is checked, the
/// call admitted by ``MatchHandle/enterCall()``, and any failure becomes the `np_result`.
func withMatch(_ pointer: OpaquePointer?, _ body: (MatchHandle) throws -> Void) -> np_result {
    entry {
        let handle = try MatchHandle.from(pointer)
        try handle.enterCall()
        defer { handle.exitCall() }
        try body(handle)
    }
}
