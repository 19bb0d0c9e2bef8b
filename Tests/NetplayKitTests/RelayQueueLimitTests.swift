import Foundation
import NetplayTestSupport
import NetplayWire
import Testing
import ZeroMQ
@testable import NetplayKit

/// What a relay can pile up at a peer that stops reading (a frontend in the background) or
/// hand it in one tick. The service defaults let a relay queue 10,000 messages of up to 1 MiB
/// at a peer, and one tick decoded all 10,000.
@Suite("NetplayKit: what a relay can queue at a peer", .ownThread)
struct RelayQueueLimitTests {
    /// A stand-in relay: a ROUTER that learns a fresh link's routing id from its first message.
    final class StandInRelay {
        let router: StandInRouter
        let link: RelayLink
        let identity: [UInt8]

        init() throws {
            router = try StandInRouter()
            link = try RelayLink(endpoint: router.endpoint, conditions: NetworkConditions())
            // The connection's handshake takes a moment: until it is up, nothing is queued.
            let deadline = Date().addingTimeInterval(5)
            while !link.send(.ping(Ping(nonce: 1)), now: 0), Date() < deadline { usleep(10_000) }
            identity = try router.nextPeer()
        }

        /// Sends `message` to the link until `count` went out or every queue on the way is full.
        func flood(_ message: [UInt8], count: Int) -> Int { router.flood(message, to: identity, count: count) }
    }

    /// A state chunk of 100 KiB, as a relay sends one.
    static let chunk = try! Envelope(body: .stateChunk(StateChunk(transferId: 1, frame: 1, totalSize: 1 << 28,
                                                                  data: Array(repeating: 7, count: 100 << 10)))).encoded()

    @Test func aPeerThatDoesNotReadHoldsAThousandMessagesAtMost() throws {
        let relay = try StandInRelay()
        let queued = relay.flood(Self.chunk, count: 20_000)
        // 1,000 at the link, 10 at the stand-in, and what the kernel's socket buffers hold.
        #expect(queued >= 1_000 && queued < 1_500, "\(queued) messages of 100 KiB queued at a peer that does not read")
        // What was queued is still there to read.
        var read = 0
        for _ in 0 ..< 50 { read += relay.link.receive(now: 0).count }
        #expect(read >= 1_000)
    }

    @Test func oneReceiveDecodesSixteenMebibytesAtMost() throws {
        let relay = try StandInRelay()
        #expect(relay.flood(Self.chunk, count: 400) == 400)
        Thread.sleep(forTimeInterval: 2)
        let most = (16 << 20) / Self.chunk.count + 1
        var calls: [Int] = []
        let deadline = Date().addingTimeInterval(10)
        while calls.reduce(0, +) < 400, Date() < deadline {
            calls.append(relay.link.receive(now: 0).count)
            usleep(10_000)
        }
        #expect(calls.first == most && calls.allSatisfy { $0 <= most }, "chunks of \(Self.chunk.count) bytes per call: \(calls)")
        #expect(calls.reduce(0, +) == 400)
    }

    /// A message larger than any a relay sends (a state chunk's data is at most 256 KiB) ends
    /// the connection instead of being taken (taken, these bytes would count as undecodable).
    @Test func aMessageLargerThanARelaySendsIsNotTaken() throws {
        let relay = try StandInRelay()
        #expect(relay.flood(Array(repeating: 1, count: 400 << 10), count: 1) == 1)
        Thread.sleep(forTimeInterval: 0.5)
        var taken: [Envelope] = []
        for _ in 0 ..< 5 { taken += relay.link.receive(now: 0) }
        #expect(taken.isEmpty && relay.link.undecodable == 0, "\(taken.count) taken, \(relay.link.undecodable) undecodable")
    }
}
