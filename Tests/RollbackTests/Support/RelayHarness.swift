import Rollback

/// Clients that play through a ``TestRelay``: every client's session names the relay as its
/// authority, and every remote player sits behind it.
final class RelayHarness<Base: Game> where Base.State: Equatable {
    typealias Client = SimulatedPlayer<Base>

    let relay: TestRelay
    private(set) var clients: [Client] = []
    var network: NetworkSimulator<RollbackMessage>
    let script: InputScript
    private(set) var nowMs: UInt64 = 0
    private var relayTicks: UInt64 = 0
    private var relayInbox: [SimulatedDelivery<RollbackMessage>] = []

    init(playerCount: Int, configuration: SessionConfiguration, conditions: LinkConditions, seed: UInt64,
         lateness: Int, makeGame: () -> Base) throws {
        let relayID = PeerID(1000)
        let ids = (0 ..< playerCount).map { PeerID(UInt64($0 + 1)) }
        relay = TestRelay(id: relayID, clients: ids, lateness: lateness)
        network = NetworkSimulator(seed: seed, conditions: conditions)
        script = InputScript(seed: seed, size: configuration.inputSize)
        for player in 0 ..< playerCount {
            let locations = (0 ..< playerCount).map { $0 == player ? PlayerLocation.local : .remote(relayID) }
            var config = configuration
            config.seed = SeededRandom.hash(seed, UInt64(player))
            let log = FrameLog<Base.State>()
            log.recordInputs = true
            let session = try P2PSession(game: LoggingGame(base: makeGame(), log: log), configuration: config,
                                         players: locations, relay: relayID)
            clients.append(Client(id: ids[player], player: player, session: session, log: log,
                                  startMs: UInt64(player) * 7))
        }
    }

    private func route(_ deliveries: [SimulatedDelivery<RollbackMessage>]) {
        for delivery in deliveries {
            if delivery.to == relay.id {
                relayInbox.append(delivery)
            } else if let client = clients.first(where: { $0.id == delivery.to }) {
                client.inbox.append(delivery)
            }
        }
    }

    private func tick(_ client: Client) throws {
        let now = client.nextTickMs()
        client.ticks += 1
        for delivery in client.inbox.takeAll() { client.session.handle(delivery.message, from: delivery.from, now: now) }
        client.session.poll(now: now)
        noteEvents(client)
        if client.session.state == .running {
            if client.skipFrames > 0 {
                client.skipFrames -= 1
            } else {
                let frame = client.session.currentFrame + client.session.inputDelay
                try client.session.addLocalInput(script.input(player: client.player, frame: frame), for: client.player)
                if case .advanced(let rolledBack) = try client.session.advanceFrame(), rolledBack > 0 {
                    client.rollbacks += 1
                }
            }
        }
        noteEvents(client)
        for out in client.session.drainOutgoing() {
            network.send(out.message, from: client.id, to: out.peer, now: now)
        }
    }

    private func noteEvents(_ client: Client) {
        for event in client.session.drainEvents() {
            client.events.append(event)
            if case .waitRecommendation(let frames) = event { client.skipFrames += frames }
        }
    }

    private func tickRelay(now: UInt64) {
        relayTicks += 1
        for delivery in relayInbox.takeAll() { relay.handle(delivery.message, from: delivery.from, now: now) }
        relay.poll(now: now)
        for out in relay.drain() { network.send(out.message, from: relay.id, to: out.peer, now: now) }
    }

    @discardableResult
    func run(limitMs: UInt64, until done: () -> Bool) throws -> Bool {
        while nowMs < limitMs {
            let client = clients.min { $0.nextTickMs() < $1.nextTickMs() }!
            let relayNext = relayTicks * 1000 / 60 + 3
            if relayNext < client.nextTickMs() {
                nowMs = relayNext
                route(network.deliver(now: nowMs))
                tickRelay(now: nowMs)
            } else {
                nowMs = client.nextTickMs()
                route(network.deliver(now: nowMs))
                try tick(client)
            }
            if done() { return true }
        }
        return false
    }

    var minSettledFrame: Frame { clients.map(\.settledFrame).min() ?? nullFrame }
}
