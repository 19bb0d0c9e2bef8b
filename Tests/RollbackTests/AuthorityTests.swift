import Rollback
import Testing
import NetplayTestSupport

/// Two players of one-byte inputs without checksums, and a log that records the inputs.
func twoPlayersLoggingInputs() -> (SessionConfiguration, FrameLog<HashGame.State>) {
    var configuration = SessionConfiguration(playerCount: 2, inputSize: 1)
    configuration.checksumInterval = 0
    let log = FrameLog<HashGame.State>()
    log.recordInputs = true
    return (configuration, log)
}

@Suite("Relay authority", .ownThread)
struct AuthorityTests {
    @Test("through a relay that substitutes late inputs, every client matches the relay's final inputs",
          arguments: [UInt64(41), 42, 43])
    func substitution(seed: UInt64) throws {
        var configuration = meshConfiguration(players: 3, inputSize: 2)
        configuration.predictionWindow = 10
        let harness = try RelayHarness<HashGame>(playerCount: 3, configuration: configuration,
                                                 conditions: LinkConditions(latencyMs: 20, jitterMs: 10,
                                                                            lossRate: 0.05, reorderRate: 0.05),
                                                 seed: seed, lateness: 3) { HashGame() }
        // Client 3 has a slow uplink: its inputs often miss the relay's deadline.
        harness.network.setConditions(LinkConditions(latencyMs: 70, jitterMs: 40, lossRate: 0.05),
                                      from: PeerID(3), to: harness.relay.id)
        try harness.run(limitMs: 30_000) { harness.minSettledFrame >= 300 }
        #expect(harness.minSettledFrame >= 300)
        #expect(harness.relay.substitutions > 0)

        // Replay the relay's final inputs: every client must have simulated exactly that.
        var reference = HashGame()
        for frame in 0 ... 300 {
            let statuses = harness.relay.substituted[frame].map { $0 ? InputStatus.substituted : .confirmed }
            reference.advanceFrame(FrameInputs(frame: frame, inputs: harness.relay.final[frame], statuses: statuses))
            for client in harness.clients {
                #expect(client.log.state(at: frame + 1) == reference.state, "client \(client.id) frame \(frame)")
            }
        }
        // The slow client's own inputs were replaced, so it rolled back on the relay's word.
        let slow = harness.clients[2]
        let ownSubstituted = (0 ... 300).filter { harness.relay.substituted[$0][2] }
        #expect(!ownSubstituted.isEmpty)
        #expect(ownSubstituted.contains { slow.log.statuses(at: $0)?[2] == .substituted })
        #expect((slow.session.stats(for: harness.relay.id)?.rollbacks ?? 0) > 0)
    }

    @Test("an authoritative input that replaces this peer's own input rolls back to that frame")
    func ownInputReplaced() throws {
        let relay = PeerID(9)
        let (configuration, log) = twoPlayersLoggingInputs()
        let session = try P2PSession(game: LoggingGame(base: HashGame(), log: log), configuration: configuration,
                                     players: [.local, .remote(relay)], relay: relay)
        let now = completeHandshake(session, with: relay)
        func authoritative(_ player: Int, _ start: Frame, _ inputs: [UInt64], _ origin: InputOrigin = .authoritative) {
            session.handle(.input(InputMessage(player: player, origin: origin, startFrame: start,
                                               inputs: inputs.map { GameInput(low: $0) }, ackFrame: start,
                                               confirmedFrame: start + inputs.count - 1, senderFrame: start)),
                           from: relay, now: now)
        }
        authoritative(1, 0, Array(repeating: 7, count: 10))
        for _ in 0 ..< 10 {
            try session.addLocalInput(GameInput(low: 1), for: 0)
            #expect(try session.advanceFrame() == .advanced(rolledBackFrames: 0))
        }
        #expect(session.confirmedFrame == nullFrame, "nothing is confirmed before the relay echoes our inputs")
        authoritative(0, 0, [1, 1, 1])
        authoritative(0, 3, [5], .substituted)
        authoritative(0, 4, [1, 1, 1, 1, 1, 1])
        session.poll(now: now)
        #expect(session.confirmedFrame == 9)
        // Confirmed through 9, but frame 3 was simulated with the wrong input and the rollback
        // comes with the next advance: no state after frame 3 may be offered to anyone yet.
        #expect(try #require(session.latestConfirmedState()).frame <= 3)
        try session.addLocalInput(GameInput(low: 1), for: 0)
        #expect(try session.advanceFrame() == .advanced(rolledBackFrames: 7))
        #expect(log.inputs(at: 3)?[0] == GameInput(low: 5))
        #expect(log.statuses(at: 3)?[0] == .substituted)
        #expect(log.inputs(at: 4)?[0] == GameInput(low: 1))
        #expect(session.stats(for: relay)?.rollbacks == 1)
        #expect(try #require(session.latestConfirmedState()).frame == 10)
    }

    @Test("inputs marked authoritative by anyone but the relay are not trusted")
    func onlyTheRelayIsAuthoritative() throws {
        let harness = try lanPair(seed: 44)
        try harness.run(limitMs: 10_000) { harness.minConfirmedFrame >= 20 }
        let session = harness.node(0).session
        let frame = session.currentFrame + 30
        // Peer 2 claims an authoritative input for player 1 (the local one): ignored.
        session.handle(.input(InputMessage(player: 0, origin: .substituted, startFrame: 0,
                                           inputs: Array(repeating: GameInput(low: 99), count: frame),
                                           ackFrame: 0, confirmedFrame: 0, senderFrame: 0)),
                       from: PeerID(2), now: harness.nowMs)
        try harness.run(limitMs: harness.nowMs + 2000) { harness.minConfirmedFrame >= frame + 10 }
        #expect(harness.disagreements().isEmpty)
        #expect(harness.node(1).log.state(at: 10) == harness.node(0).log.state(at: 10))
    }
}

@Suite("Hostile input", .ownThread)
struct HostileInputTests {
    @Test("inputs far beyond the simulation are not accepted (they would overwrite needed history)")
    func farFuture() throws {
        let harness = try lanPair(seed: 45)
        try harness.run(limitMs: 10_000) { harness.minConfirmedFrame >= 20 }
        let session = harness.node(0).session
        let known = try #require(session.stats(for: PeerID(2))?.lastReceivedFrame)
        let flood = Array(repeating: GameInput(low: 3), count: 2000)
        session.handle(.input(InputMessage(player: 1, startFrame: known + 1, inputs: flood, ackFrame: 0,
                                           confirmedFrame: 0, senderFrame: 0)), from: PeerID(2), now: harness.nowMs)
        let accepted = try #require(session.stats(for: PeerID(2))?.lastReceivedFrame)
        #expect(accepted <= session.currentFrame + session.configuration.inputHistory / 2)
        #expect(accepted > known, "inputs within reach are still taken")
        // Out-of-range players and negative frames are ignored without harm.
        session.handle(.input(InputMessage(player: 7, startFrame: -5, inputs: flood, ackFrame: 0,
                                           confirmedFrame: 0, senderFrame: 0)), from: PeerID(2), now: harness.nowMs)
        session.handle(.disconnectNotice(DisconnectNotice(player: 9, frame: -1)), from: PeerID(2), now: harness.nowMs)
        session.handle(.checksumReport(ChecksumReport(frame: -30, checksum: 1)), from: PeerID(2), now: harness.nowMs)
        #expect(session.drainEvents().allSatisfy { if case .desync = $0 { return false } else { return true } })
    }

    @Test("a disconnect notice reaching back past confirmed frames rewrites none of them (it trapped the rollback)")
    func disconnectNoticeFromThePast() throws {
        let harness = try lanPair(seed: 46)
        _ = try harness.run(limitMs: 10_000) { harness.minConfirmedFrame >= 200 }
        let session = harness.node(0).session
        let confirmed = session.confirmedFrame
        #expect(confirmed >= 200)
        // Player 1's peer says player 1 left at frame 0, long out of the 32-state ring.
        session.handle(.disconnectNotice(DisconnectNotice(player: 1, frame: 0)), from: PeerID(2), now: harness.nowMs)
        _ = try harness.run(limitMs: harness.nowMs + 1_000) { false }
        #expect(session.currentFrame > confirmed)
        for frame in stride(from: 1, through: confirmed, by: 7) {
            #expect(harness.node(0).log.state(at: frame) == harness.node(1).log.state(at: frame), "frame \(frame) was rewritten")
        }
    }

    @Test("frames beyond 32 bits and echoes of times never sent are dropped (they overflowed or skewed the engine)")
    func numbersNoWireHolds() throws {
        let harness = try lanPair(seed: 47)
        // Past a minute of play: an echo of time 0 would be a sample of over a minute.
        _ = try harness.run(limitMs: 70_000) { false }
        let session = harness.node(0).session, peer = PeerID(2), now = harness.nowMs
        let before = try #require(session.stats(for: peer))
        for huge in [Int.max, Int.min, Int(Int32.max) + 1] {
            session.handle(.inputAck(InputAck(ackFrame: huge, confirmedFrame: huge, senderFrame: huge)), from: peer, now: now)
            session.handle(.qualityReport(QualityReport(sentAtMs: now, frame: huge, frameAdvantage: huge)), from: peer, now: now)
            session.handle(.input(InputMessage(player: 1, startFrame: huge, inputs: [GameInput(low: 1)], ackFrame: huge,
                                               confirmedFrame: huge, senderFrame: huge)), from: peer, now: now)
            session.handle(.checksumReport(ChecksumReport(frame: huge, checksum: 1)), from: peer, now: now)
            session.handle(.disconnectNotice(DisconnectNotice(player: 1, frame: huge)), from: peer, now: now)
        }
        #expect(session.stats(for: peer)?.messagesReceived == before.messagesReceived, "out-of-range messages were taken")
        session.handle(.qualityReply(QualityReply(echoedSentAtMs: 0)), from: peer, now: now)
        _ = try harness.run(limitMs: harness.nowMs + 2_000) { false }
        #expect(harness.minConfirmedFrame >= 4_100, "the match stalled at \(harness.minConfirmedFrame)")
        #expect(harness.disagreements().isEmpty)
        let ping = try #require(session.stats(for: peer)?.pingMs)
        #expect(ping < 1_000, "a reply echoing time 0 made the round trip \(ping) ms")
    }

    @Test("a spectator takes only the host's final inputs, not a provisional one forwarded early")
    func spectatorsIgnoreProvisionalInputs() throws {
        let host = PeerID(1)
        let (configuration, log) = twoPlayersLoggingInputs()
        let spectator = try SpectatorSession(game: LoggingGame(base: HashGame(), log: log), configuration: configuration, host: host)
        let now = completeHandshake(spectator, with: host)
        #expect(spectator.state == .running, "no handshake")
        func inputs(_ player: Int, _ value: UInt64, _ origin: InputOrigin) {
            spectator.handle(.input(InputMessage(player: player, origin: origin, startFrame: 0,
                                                 inputs: Array(repeating: GameInput(low: value), count: 10), ackFrame: 0,
                                                 confirmedFrame: 9, senderFrame: 9)), from: host, now: now)
        }
        inputs(0, 5, .peer)
        inputs(1, 1, .authoritative)
        inputs(0, 7, .authoritative)
        while spectator.currentFrame < 10, spectator.advanceFrame() > 0 {}
        #expect(spectator.currentFrame == 10)
        #expect(log.inputs(at: 0)?[0] == GameInput(low: 7), "the provisional input was taken as final")
    }
}
