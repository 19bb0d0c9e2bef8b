import Foundation
import Testing
import ZeroMQ
@testable import NetplayService
import NetplayTestSupport

/// The inbound guard's limits, on a real ROUTER and raw ZMTP senders in this process (the
/// attack on a real service is `SecurityTests.UnfinishedMessageFloodTests`).
@Suite("Inbound guard: input that never becomes a message", .ownThread)
struct InboundGuardTests {
    static let limits = InboundGuard.Limits(perConnectionDrained: 2 << 20, perConnection: 16 << 20, total: 48 << 20)

    func router() throws -> (Socket, InboundGuard, Int) {
        let socket = try SocketDefaults.server(.router, curve: nil)
        try socket.bind("tcp://127.0.0.1:0")
        let port = try #require(EndpointPorts.port(of: try socket.lastEndpoint))
        return (socket, try InboundGuard(socket, limits: Self.limits), port)
    }

    /// Waits until libzmq has read what the senders sent (their bytes left the receive queues).
    func settle() { Thread.sleep(forTimeInterval: 0.5) }

    @Test func whileWholeMessagesWaitOnlyTheLooseLimitsCutTheLargestFirst() throws {
        let (socket, inbound, port) = try router()
        defer { inbound.close(); socket.close() }
        var senders: [UnfinishedMessageSender] = []
        for _ in 0 ..< 5 {
            let sender = try UnfinishedMessageSender(port: port)
            #expect(sender.sendUnfinished(frames: 12) == 12)
            senders.append(sender)
        }
        let over = try UnfinishedMessageSender(port: port)
        #expect(over.sendUnfinished(frames: 20) == 20)
        settle()
        // 20 MiB is over 16 on its own; then 5 x 12 = 60 MiB is over 48 in all: one more goes.
        let cuts = inbound.check(drained: false)
        #expect(cuts.count == 2, "\(cuts.map(\.reason))")
        #expect(cuts.first?.reason.contains("not yet a message") == true && cuts.first?.held ?? 0 > 16 << 20)
        #expect(over.closedByPeer(within: 2))
        #expect(senders.filter { $0.closedByPeer(within: 0.5) }.count == 1)
        // With nothing else to read, the rest hold too much of a message that does not end.
        #expect(inbound.check(drained: true).count == 4)
        #expect(senders.allSatisfy { $0.closedByPeer(within: 2) })
    }

    @Test func wholeMessagesTheServiceHasNotReadAndHalfAMessageAreNoAttack() throws {
        let (socket, inbound, port) = try router()
        defer { inbound.close(); socket.close() }
        // Twelve whole messages of 1 MiB the service has not read yet.
        let client = try SocketDefaults.client(.dealer, curve: nil)
        defer { client.close() }
        try client.connect("tcp://127.0.0.1:\(port)")
        let message = [UInt8](repeating: 7, count: 1 << 20)
        for _ in 0 ..< 12 { try client.send(message) }
        // Half of one: 1.5 MiB.
        let half = try UnfinishedMessageSender(port: port)
        #expect(half.sendUnfinished(frames: 3, size: 512 << 10) == 3)
        settle()
        #expect(try socket.readiness.readable)
        #expect(inbound.check(drained: false).isEmpty)
        #expect(!half.closedByPeer(within: 0.2))
        // Read: the messages were counted as handed out, and nothing is over any limit.
        var frames = 0
        while (try? socket.receiveBorrowed(flags: .dontWait)) != nil { frames += 1 }
        #expect(frames == 24, "routing id and payload of each message")
        #expect(inbound.check(drained: true).isEmpty)
    }
}
