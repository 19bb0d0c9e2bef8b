import Rollback

/// Runs several P2P sessions (one player each) and optional spectators over a seeded
/// simulated network, each ticking at 60 Hz from its own start time, and records what
/// every peer simulated.
final class MeshHarness<Base: Game> where Base.State: Equatable {
    typealias Node = SimulatedPlayer<Base>

    final class Watcher {
        let id: PeerID
        let session: SpectatorSession<LoggingGame<Base>>
        let log: FrameLog<Base.State>
        var startMs: UInt64
        var ticks: UInt64 = 0
        var events: [SessionEvent] = []
        var inbox: [SimulatedDelivery<RollbackMessage>] = []
        var maxStep = 0

        init(id: PeerID, session: SpectatorSession<LoggingGame<Base>>, log: FrameLog<Base.State>, startMs: UInt64) {
            self.id = id
            self.session = session
            self.log = log
            self.startMs = startMs
        }

        func nextTickMs() -> UInt64 { startMs + ticks * 1000 / 60 }
    }

    var network: NetworkSimulator<RollbackMessage>
    private(set) var nodes: [Node] = []
    private(set) var watchers: [Watcher] = []
    let script: InputScript
    private(set) var nowMs: UInt64 = 0
    /// Called before each local input is added: (node, frame) -> input override.
    var inputOverride: ((Node, Frame) -> GameInput?)?
    /// Called after each tick of a node.
    var afterTick: ((Node) -> Void)?

    init(playerCount: Int, configuration: SessionConfiguration, conditions: LinkConditions, seed: UInt64,
         spectators: Int = 0, spectatorStartMs: UInt64 = 0, catchUpThreshold: Int = 8, catchUpSpeed: Int = 2,
         startOffsetsMs: [UInt64]? = nil, makeGame: (Int) -> Base) throws {
        network = NetworkSimulator(seed: seed, conditions: conditions)
        script = InputScript(seed: seed, size: configuration.inputSize)
        var startRandom = SeededRandom(seed: seed ^ 0xA5A5)
        let spectatorIDs = (0 ..< spectators).map { PeerID(UInt64(100 + $0)) }
        for player in 0 ..< playerCount {
            let id = PeerID(UInt64(player + 1))
            var locations = [PlayerLocation]()
            for other in 0 ..< playerCount {
                locations.append(other == player ? .local : .remote(PeerID(UInt64(other + 1))))
            }
            var config = configuration
            config.seed = SeededRandom.hash(seed, UInt64(player))
            let log = FrameLog<Base.State>()
            let session = try P2PSession(game: LoggingGame(base: makeGame(player), log: log), configuration: config,
                                         players: locations, spectators: player == 0 ? spectatorIDs : [])
            let start = startOffsetsMs?[player] ?? startRandom.below(120)
            nodes.append(Node(id: id, player: player, session: session, log: log, startMs: start))
        }
        for id in spectatorIDs {
            let log = FrameLog<Base.State>()
            let session = try SpectatorSession(game: LoggingGame(base: makeGame(Int(id.rawValue)), log: log),
                                               configuration: configuration, host: PeerID(1),
                                               catchUpThreshold: catchUpThreshold, catchUpSpeed: catchUpSpeed)
            watchers.append(Watcher(id: id, session: session, log: log, startMs: spectatorStartMs))
        }
    }

    func node(_ player: PlayerHandle) -> Node { nodes[player] }

    /// Stops ticking a node (it crashed or quit without a word).
    func kill(_ player: PlayerHandle) { nodes[player].alive = false }

    private func route(_ deliveries: [SimulatedDelivery<RollbackMessage>]) {
        for delivery in deliveries {
            if let node = nodes.first(where: { $0.id == delivery.to }) {
                node.inbox.append(delivery)
            } else if let watcher = watchers.first(where: { $0.id == delivery.to }) {
                watcher.inbox.append(delivery)
            }
        }
    }

    private func tick(_ node: Node) throws {
        let now = node.nextTickMs()
        node.ticks += 1
        guard node.alive else {
            node.inbox.removeAll()
            return
        }
        for delivery in node.inbox.takeAll() { node.session.handle(delivery.message, from: delivery.from, now: now) }
        node.session.poll(now: now)
        for event in node.session.drainEvents() {
            node.events.append(event)
            if case .waitRecommendation(let frames) = event, node.honourWaits { node.skipFrames += frames }
        }
        if node.session.state == .running && now >= node.stallUntilMs {
            if node.skipFrames > 0 {
                node.skipFrames -= 1
            } else {
                let frame = node.session.currentFrame + node.session.inputDelay
                let input = inputOverride?(node, frame) ?? script.input(player: node.player, frame: frame)
                try node.session.addLocalInput(input, for: node.player)
                switch try node.session.advanceFrame() {
                case .advanced(let rolledBack):
                    node.advanced += 1
                    if rolledBack > 0 { node.rollbacks += 1 }
                case .waiting(let reason):
                    node.waits[reason, default: 0] += 1
                }
            }
        }
        for event in node.session.drainEvents() {
            node.events.append(event)
            if case .waitRecommendation(let frames) = event, node.honourWaits { node.skipFrames += frames }
        }
        for out in node.session.drainOutgoing() {
            network.send(out.message, from: node.id, to: out.peer, now: now)
        }
        afterTick?(node)
    }

    private func tick(_ watcher: Watcher) {
        let now = watcher.nextTickMs()
        watcher.ticks += 1
        for delivery in watcher.inbox.takeAll() { watcher.session.handle(delivery.message, from: delivery.from, now: now) }
        watcher.session.poll(now: now)
        watcher.maxStep = max(watcher.maxStep, watcher.session.advanceFrame())
        watcher.events.append(contentsOf: watcher.session.drainEvents())
        for out in watcher.session.drainOutgoing() {
            network.send(out.message, from: watcher.id, to: out.peer, now: now)
        }
    }

    /// Ticks everyone in time order until `done` holds (checked after every tick) or `limitMs`
    /// of simulated time passed. Returns whether `done` held.
    @discardableResult
    func run(limitMs: UInt64, until done: () -> Bool) throws -> Bool {
        while nowMs < limitMs {
            var nextNode: Node?
            for node in nodes where nextNode == nil || node.nextTickMs() < nextNode!.nextTickMs() { nextNode = node }
            var nextWatcher: Watcher?
            for watcher in watchers where nextWatcher == nil || watcher.nextTickMs() < nextWatcher!.nextTickMs() {
                nextWatcher = watcher
            }
            if let watcher = nextWatcher, watcher.nextTickMs() < nextNode!.nextTickMs() {
                nowMs = watcher.nextTickMs()
                route(network.deliver(now: nowMs))
                tick(watcher)
            } else {
                nowMs = nextNode!.nextTickMs()
                route(network.deliver(now: nowMs))
                try tick(nextNode!)
            }
            if done() { return true }
        }
        return false
    }

    /// The smallest settled frame among live nodes.
    var minConfirmedFrame: Frame {
        nodes.filter(\.alive).map(\.settledFrame).min() ?? nullFrame
    }

    /// Frames (as state indices) where two live nodes disagree, up to each pair's common confirmed frame.
    func disagreements(limit: Int = 5) -> [String] {
        var found: [String] = []
        let live = nodes.filter(\.alive)
        guard let reference = live.first else { return [] }
        for other in live.dropFirst() {
            let last = min(reference.settledFrame, other.settledFrame) + 1
            guard last >= 1 else { continue }
            for frame in 1 ... last {
                let a = reference.log.state(at: frame), b = other.log.state(at: frame)
                if a == nil || b == nil || a! != b! {
                    found.append("frame \(frame): \(reference.id) vs \(other.id)")
                    if found.count >= limit { return found }
                    break
                }
            }
        }
        return found
    }

    func desyncEvents() -> [DesyncReport] {
        nodes.flatMap { node in
            node.events.compactMap { event -> DesyncReport? in
                if case .desync(let report) = event { return report }
                return nil
            }
        }
    }
}
