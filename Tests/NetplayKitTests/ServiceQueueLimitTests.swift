import Foundation
import NetplayService
import NetplayTestSupport
import NetplayWire
import Testing
import ZeroMQ
@testable import NetplayKit

/// What whatever answers at a discovery or coordinator endpoint can pile up in an app: a player
/// may use a cluster it does not run, and the sockets' defaults (10,000 messages of up to 1 MiB
/// per connection) let it queue about 10 GiB at an idle lobby connection or a room watch.
@Suite("NetplayKit: what a service can queue at an app", .ownThread)
struct ServiceQueueLimitTests {
    /// A request/reply connection waits for one reply at a time: it holds 16 queued replies, and
    /// past them libzmq stops reading the connection (nothing is lost; the service holds the rest).
    @Test func aRequestConnectionHoldsSixteenRepliesAtMost() throws {
        let router = try StandInRouter()
        let client = try BlockingClient(endpoint: router.endpoint, timeout: 1)
        try client.sendRaw(try Envelope(body: .healthRequest(HealthRequest())).encoded())
        let reply = [UInt8](repeating: 0x42, count: 100 << 10)
        let sent = router.flood(reply, to: try router.nextPeer(), count: 20_000)
        // 16 at the client, 10 at the stand-in, and what the kernel's socket buffers hold.
        #expect(sent >= 16 && sent < 1_000, "\(sent) unasked replies of 100 KiB queued at a client")
        // The client still reads them, in order.
        #expect((try? client.receiveRaw()).map { $0.count == reply.count } == true)
    }

    /// A room watch takes room events (a few KiB at most) of up to 64 KiB: a larger one closes
    /// the connection instead of being queued (the watch subscribes again once a silence shows it
    /// missed a change, see `RoomWatchTests.aSubscriptionDroppedForGoodIsMadeAgain`).
    @Test func aRoomWatchTakesNoEventOver64KiB() throws {
        let publisher = try Context.shared.socket(.pub)
        defer { publisher.close() }
        try publisher.bind("tcp://127.0.0.1:*")
        let subscriber = try EventSubscriber(endpoint: try publisher.lastEndpoint, prefixes: ["rooms."],
                                             limits: RoomWatch.eventQueueLimits)
        let small = try Envelope(body: .roomAdded(RoomAdded(sequence: 1, room: Room(roomId: "r", roomName: "small")))).encoded()
        var topics: [String] = []
        // Small events until the subscription is through, then a large one among small ones.
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline, topics.isEmpty {
            _ = try? publisher.sendMultipart([Array("rooms.small".utf8), small], flags: .dontWait)
            topics += subscriber.drain(waitingUpTo: 50).map(\.topic)
        }
        #expect(!topics.isEmpty, "the subscription never came through")
        _ = try publisher.sendMultipart([Array("rooms.large".utf8), [UInt8](repeating: 0x41, count: 100 << 10)])
        for _ in 0 ..< 20 {
            _ = try? publisher.sendMultipart([Array("rooms.small".utf8), small], flags: .dontWait)
            topics += subscriber.drain(waitingUpTo: 20).map(\.topic)
        }
        #expect(!topics.contains("rooms.large"), "an event of 100 KiB was taken")
    }
}
