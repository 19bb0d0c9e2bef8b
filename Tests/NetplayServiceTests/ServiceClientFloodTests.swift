import Foundation
import NetplayTestSupport
import NetplayWire
import Synchronization
import Testing
import ZeroMQ
@testable import NetplayService

/// What the reactor saw: messages taken from the client, and timer turns while the flood was
/// still arriving.
private final class FloodTally: Sendable {
    struct Counts { var received = 0; var ticksMidFlood = 0 }
    let expected: Int
    private let counts = Mutex(Counts())

    init(expected: Int) { self.expected = expected }

    var snapshot: Counts { counts.withLock { $0 } }
    func received() { counts.withLock { $0.received += 1 } }
    func ticked() { counts.withLock { if $0.received > 0 && $0.received < expected { $0.ticksMidFlood += 1 } } }
}

/// A service holding one ``ServiceClient`` to a peer that pushes without pause, and a fast timer.
private final class FloodedClientService: Service {
    let peer: String
    let tally: FloodTally
    private var client: ServiceClient?

    init(peer: String, tally: FloodTally) {
        self.peer = peer
        self.tally = tally
    }

    func start(runtime: ServiceRuntime) throws {
        let client = try runtime.client(to: peer)
        client.onUnsolicited = { [tally] _ in tally.received() }
        self.client = client
        _ = runtime.every(seconds: 0.002) { [tally] _ in tally.ticked() }
    }

    func handle(_ request: Request, runtime: ServiceRuntime) throws(ServiceError) -> HandlerOutcome { .none }
}

@Suite("A service client under a flood of pushes", .ownThread)
struct ServiceClientFloodTests {
    /// A peer that keeps the client's socket readable used to hold the reactor in one drain until
    /// it paused: timers (the client's own request deadlines among them) stopped. The client takes
    /// a bounded batch a turn, so the timer runs during the flood and every message still arrives.
    @Test func aPeerPushingWithoutPauseCannotHoldTheReactor() throws {
        let pusher = try Context.shared.socket(.dealer)
        defer { pusher.close() }
        try pusher.set(.sendHighWaterMark(100_000))
        try pusher.bind("tcp://127.0.0.1:*")
        let peer = try pusher.lastEndpoint
        let count = 400_000
        let tally = FloodTally(expected: count)
        let configuration = ServiceConfiguration(
            kind: "probe", instance: "flooded-client", endpoint: "tcp://127.0.0.1:*", events: nil, telemetry: nil,
            supervisor: nil, logLevel: .critical,
            dataDirectory: FileManager.default.temporaryDirectory.appendingPathComponent("netplay-probe-\(UUID().uuidString)"))
        let running = try ServiceHost.start(configuration: configuration) { FloodedClientService(peer: peer, tally: tally) }
        defer { running.stop() }
        let push = try Envelope(body: .ping(Ping(nonce: 1, sentAtUs: 2))).encoded()
        for _ in 0 ..< count { _ = try pusher.send(push) }
        #expect(eventually(within: 30) { tally.snapshot.received == count })
        let seen = tally.snapshot
        #expect(seen.received == count)
        #expect(seen.ticksMidFlood >= 3, "the timer ran \(seen.ticksMidFlood) times while \(count) pushes arrived")
    }
}
