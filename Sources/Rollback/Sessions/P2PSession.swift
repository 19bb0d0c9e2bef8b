/// A rollback session between 2 ... 8 players on several machines, optionally through a
/// relay, plus spectators.
///
/// The session does no I/O and reads no clock. Drive it once per tick:
///
/// ```swift
/// for (peer, message) in transport.received() { session.handle(message, from: peer, now: ms) }
/// session.poll(now: ms)
/// for event in session.drainEvents() { ... }
/// try session.addLocalInput(pad, for: localPlayer)
/// if case .advanced = try session.advanceFrame() { render(session.game) }
/// for out in session.drainOutgoing() { transport.send(out.message, to: out.peer) }
/// ```
///
/// **Relay.** When `relay` is given, that endpoint is the authority: it sends every
/// player's final input (the recipient's own included) marked
/// ``InputOrigin/authoritative`` or ``InputOrigin/substituted``; a frame is confirmed once
/// its authoritative inputs for all players arrived, and an authoritative input that differs
/// from what was simulated (a prediction, a peer's input or even this peer's own late input)
/// triggers a rollback. Players may be `.remote(relay)` or reachable directly
/// (`.remote(peer)`, whose inputs then serve as early, provisional information); the relay
/// may also forward inputs early with ``InputOrigin/peer``.
///
/// A session is not thread-safe; keep it inside one actor or thread.
public final class P2PSession<G: Game> {
    // Unchecked: the session is single-threaded and never re-entered (the game gets no
    // reference to it), and a dynamic exclusivity check per access cost ~5 ns each, a dozen
    // or more per frame (one per received message, poll, input, advance, drain).
    @exclusivity(unchecked) @usableFromInline var core: P2PCore
    @exclusivity(unchecked) @usableFromInline var runner: GameRunner<G>

    /// Creates a session.
    ///
    /// - Parameters:
    ///   - game: the game at frame 0, identical on every peer.
    ///   - configuration: sizes, windows, timeouts; see ``SessionConfiguration``.
    ///   - players: one entry per player, in player order (the same order on every peer).
    ///   - spectators: endpoints that receive confirmed inputs.
    ///   - relay: the authoritative relay endpoint, if inputs go through one.
    public init(game: G, configuration: SessionConfiguration, players: [PlayerLocation],
                spectators: [PeerID] = [], relay: PeerID? = nil) throws {
        core = try P2PCore(configuration: configuration, players: players, spectators: spectators, relay: relay)
        runner = GameRunner(game: game, configuration: configuration, inputs: &core.inputs)
    }

    // MARK: - Reading

    /// The configuration the session was created with (``inputDelay`` may differ since).
    public var configuration: SessionConfiguration { core.configuration }
    /// Where every player plays.
    public var players: [PlayerLocation] { core.players }
    /// The local players' handles.
    public var localPlayers: [PlayerHandle] { core.localPlayers }
    /// Every remote endpoint, in creation order.
    public var peers: [PeerID] { core.endpoints.map(\.id) }
    /// The game (read it to render; change it only through the session).
    public var game: G { runner.game }
    /// The next frame to simulate.
    public var currentFrame: Frame { runner.currentFrame }
    /// Handshaking or running.
    public var state: SessionState { core.state }
    /// Frames between a local input and the frame it applies to.
    public var inputDelay: Int { core.inputDelay }
    /// The newest frame whose inputs are final on every peer (states up to the next frame never change).
    public var confirmedFrame: Frame { core.confirmedFrame }
    /// The newest frame whose inputs are final as far as this peer knows.
    public var localConfirmedFrame: Frame { core.localConfirmedFrame }
    /// How many frames this peer runs ahead of the slowest remote (time sync). A frontend
    /// can run slightly slower while it is positive instead of skipping frames.
    public var framesAhead: Double { core.framesAhead }

    /// Statistics for one endpoint.
    public func stats(for peer: PeerID) -> PeerStats? { core.stats(for: peer) }

    /// Whole-session statistics.
    public var sessionStats: SessionStats {
        var stats = runner.stats
        stats.currentFrame = runner.currentFrame
        stats.confirmedFrame = core.confirmedFrame
        stats.predictionBarrierStalls = core.barrierStalls
        return stats
    }

    /// The frame from which `player`'s inputs are disconnected, once that is final.
    public func disconnectFrame(of player: PlayerHandle) -> Frame? { core.disconnectFrame(of: player) }

    // MARK: - Driving

    /// Takes every event queued since the last call.
    public func drainEvents() -> [SessionEvent] { core.drainEvents() }

    /// Takes every outgoing message queued since the last call.
    public func drainOutgoing() -> [OutgoingMessage] { core.drainOutgoing() }

    /// Hands every outgoing message to `body` without allocating a new array. `body` must not
    /// call this session.
    @inlinable
    public func drainOutgoing(_ body: (OutgoingMessage) throws -> Void) rethrows {
        try core.drainOutgoing(body)
    }

    /// Feeds a message received from `peer` at time `now` (milliseconds of the caller's
    /// clock). Messages from unknown or disconnected endpoints are ignored.
    @inlinable
    public func handle(_ message: RollbackMessage, from peer: PeerID, now: UInt64) {
        core.handle(message, from: peer, now: now)
    }

    /// Handles timers: handshake retries, re-sends, pings, keep-alives, timeouts. Call every tick.
    @inlinable
    public func poll(now: UInt64) {
        core.poll(now: now)
    }

    /// Sets the input of local player `player` for the next ``advanceFrame()``.
    @inlinable
    public func addLocalInput(_ input: GameInput, for player: PlayerHandle) throws {
        try core.addLocalInput(input, for: player)
    }

    /// Changes the input delay of every local player from the next frame on. Increasing it
    /// repeats the last input over the gap; decreasing it drops inputs until the delay is met.
    public func setInputDelay(_ frames: Int) throws { try core.setInputDelay(frames) }

    /// Simulates the next frame (rolling back to the first incorrect frame first if needed),
    /// or says why it must wait. Every local player needs an input for a frame's first call;
    /// while the frame waits, that input is already queued and sent.
    @inlinable
    public func advanceFrame() throws -> AdvanceResult {
        let oldest = runner.oldestNeededState(confirmedFrame: core.confirmedFrame)
        if let reason = try core.prepareAdvance(oldestNeededState: oldest) { return .waiting(reason) }
        var rolledBack = 0
        if let (target, culprit) = core.pendingRollback() {
            // The rollback fills this frame's input row too and simulates the frame right after.
            rolledBack = runner.rollbackAndAdvance(to: target, inputs: &core.inputs)
            core.noteRollback(length: rolledBack, culprit: culprit)
        } else {
            runner.advance(inputs: &core.inputs)
        }
        core.finishAdvance(currentFrame: runner.currentFrame)
        return .advanced(rolledBackFrames: rolledBack)
    }

    /// Disconnects an endpoint now (kick, or the caller's own transport saw it leave).
    public func disconnect(peer: PeerID) { core.disconnect(peer: peer) }

    // MARK: - State transfer (resync)

    /// Asks `peer` for a confirmed state (it sees ``SessionEvent/stateRequested(peer:confirmedFrame:)``).
    public func requestState(from peer: PeerID) { core.requestState(from: peer) }

    /// The newest saved state whose inputs are final everywhere: what to send on a state request.
    /// Not past a frame simulated with an input since found wrong (a late input handled, its
    /// rollback still to come at the next advance): that state would carry the misprediction,
    /// and the checksum with it, so the receiver's check would pass and the desync stay.
    public func latestConfirmedState() -> ConfirmedState<G.State>? {
        let limit = min(core.confirmedFrame + 1, runner.currentFrame, core.inputs.firstIncorrectFrame ?? .max)
        guard let frame = runner.ring.newestSaved(atOrBefore: limit), let state = runner.ring.state(at: frame) else { return nil }
        return ConfirmedState(frame: frame, state: state, checksum: core.inputs.checksums.checksum(at: frame))
    }

    /// Queues a serialised state for `peer`.
    public func sendState(_ transfer: StateTransfer, to peer: PeerID) { core.sendState(transfer, to: peer) }

    /// Replaces this peer's state at `frame` with a transferred confirmed state and
    /// re-simulates up to the current frame: the resync after a desync. It holds only while no
    /// rollback goes back past `frame`: load at a frame up to ``confirmedFrame`` + 1, or an input
    /// still to come for an earlier frame rolls back into the old run and over the state.
    public func loadState(_ state: G.State, frame: Frame) throws {
        try install(state, frame: frame) { game, state in game.loadState(state) }
    }

    func install(_ state: G.State, frame: Frame, load: (inout G, G.State) throws -> Void) throws {
        guard frame >= core.oldestLoadableFrame, frame <= runner.currentFrame else {
            throw RollbackError.frameOutOfRange(frame)
        }
        try runner.install(state, at: frame, inputs: &core.inputs, load: load)
        core.stateInstalled()
    }
}

extension P2PSession where G: SerializableGame {
    /// ``loadState(_:frame:)`` for a state from another peer or a relay: one the game refuses
    /// (``SerializableGame/loadForeignState(_:)`` throws) changes nothing, and the error is
    /// rethrown.
    public func loadForeignState(_ state: G.State, frame: Frame) throws {
        try install(state, frame: frame) { game, state in try game.loadForeignState(state) }
    }
}
