import Foundation
import Synchronization
import Testing
@testable import NetplayService
import NetplayTestSupport

/// The outbound guard's bookkeeping, with the kernel's acknowledged counts played by the test
/// (the attack on a real service is `DiscoveryTests`' `aPeerThatAsksAndNeverReadsHoldsOnlyItsShareOfReplies`).
@Suite("Outbound guard: replies a peer does not read", .ownThread)
struct OutboundGuardTests {
    /// Acknowledged bytes per descriptor, as the kernel would report them (nil: no TCP socket).
    final class Kernel: Sendable {
        let acknowledged = Mutex<[Int32: Int64]>([:])
        /// Each descriptor's socket (its inode); 1 unless a test opens a new socket on it.
        let sockets = Mutex<[Int32: UInt64]>([:])
        func set(_ fd: Int32, _ bytes: Int64?) { acknowledged.withLock { $0[fd] = bytes } }
        func read(_ fd: Int32) -> Int64? { acknowledged.withLock { $0[fd] } }
        func identity(_ fd: Int32) -> UInt64? { sockets.withLock { $0[fd] ?? 1 } }
    }

    static let kib = 1 << 10
    let kernel = Kernel()
    let alice = PeerAddress(routingId: [0, 1, 2, 3, 4])
    let bob = PeerAddress(routingId: [0, 1, 2, 3, 5])

    func makeGuard(perConnection: Int = 100 * kib, total: Int = 150 * kib) -> OutboundGuard {
        OutboundGuard(limits: OutboundGuard.Limits(perConnection: perConnection, total: total), acknowledged: kernel.read,
                      identity: kernel.identity)
    }

    @Test func aConnectionGetsItsShareThenWaitsUntilItReads() {
        let guardian = makeGuard()
        kernel.set(7, 5_000)  // the handshake, acknowledged before the first request
        guardian.noteRequest(from: alice, fd: 7)
        var admitted = 0
        while guardian.admit(10 * Self.kib - 2, to: alice) { admitted += 1 }
        #expect(admitted == 10, "10 KiB replies within 100 KiB: \(admitted)")
        // The peer reads (its kernel acknowledges) half: half its share comes back.
        kernel.set(7, 5_000 + Int64(50 * Self.kib))
        #expect(guardian.admit(10 * Self.kib - 2, to: alice) && guardian.admit(10 * Self.kib - 2, to: alice))
        #expect(guardian.admit(30 * Self.kib - 2, to: alice) && !guardian.admit(Self.kib, to: alice))
        // A REQ-style address of the same peer is the same connection; an unknown peer is not counted.
        #expect(!guardian.admit(Self.kib, to: PeerAddress(routingId: [0, 1, 2, 3, 4], delimited: true)))
        #expect(guardian.admit(1 << 30, to: bob))
    }

    @Test func framingAndHeartbeatsBuildNoCredit() {
        let guardian = makeGuard()
        kernel.set(3, 0)
        guardian.noteRequest(from: alice, fd: 3)
        #expect(guardian.admit(60 * Self.kib, to: alice))
        // The kernel acknowledged far more than the replies counted (heartbeats for hours).
        kernel.set(3, Int64(10 << 20))
        #expect(guardian.admit(60 * Self.kib, to: alice), "the first reply was read")
        #expect(!guardian.admit(60 * Self.kib, to: alice), "the surplus acknowledged is no credit for unread replies")
    }

    @Test func overTheTotalTheConnectionHoldingMostIsCut() {
        let guardian = makeGuard()
        for (fd, peer) in [(Int32(-5), alice), (Int32(-6), bob)] {
            kernel.set(fd, 0)
            guardian.noteRequest(from: peer, fd: fd)  // negative descriptors: never noted
        }
        #expect(guardian.connectionCount == 0)
        // Real descriptors would be shut down: use ones that are no socket (shutdown fails harmlessly).
        let big: Int32 = 100_001, small: Int32 = 100_002
        kernel.set(big, 0)
        kernel.set(small, 0)
        guardian.noteRequest(from: alice, fd: big)
        guardian.noteRequest(from: bob, fd: small)
        #expect(guardian.admit(90 * Self.kib, to: alice) && guardian.admit(70 * Self.kib, to: bob))
        let cuts = guardian.check()
        #expect(cuts.count == 1 && cuts.first.map { $0.held >= 90 * Self.kib } == true, "\(cuts)")
        #expect(guardian.connectionCount == 1)
        #expect(guardian.admit(20 * Self.kib, to: bob), "the other keeps its share")
        #expect(guardian.check().isEmpty)
    }

    /// One routing id on many connections (the ROUTER hands it over): each old connection keeps
    /// its account, so the total still sees it and can cut it. Forgetting it on the move let a
    /// stranger hold 8 MiB per connection without limit.
    @Test func aRoutingIdMovedToAnotherConnectionLeavesTheOldOneCounted() {
        let guardian = makeGuard()
        let first: Int32 = 100_011, second: Int32 = 100_012
        kernel.set(first, 0)
        kernel.set(second, 0)
        guardian.noteRequest(from: alice, fd: first)
        #expect(guardian.admit(95 * Self.kib, to: alice))
        guardian.noteRequest(from: alice, fd: second)
        #expect(guardian.connectionCount == 2)
        #expect(guardian.admit(60 * Self.kib, to: alice), "the new connection has its own share")
        let cuts = guardian.check()
        #expect(cuts.count == 1 && cuts.first.map { $0.held >= 95 * Self.kib } == true, "the old connection is cut: \(cuts)")
    }

    /// Replies are counted with the least framing the wire takes: counting more built a debt
    /// that, after enough replies on one long-lived connection, refused every reply.
    @Test func manyRepliesReadInTimeBuildNoDebt() {
        let guardian = makeGuard()
        kernel.set(5, 0)
        guardian.noteRequest(from: alice, fd: 5)
        var acknowledged: Int64 = 0
        var refused = 0
        for _ in 0 ..< 100_000 {
            if !guardian.admit(100, to: alice) { refused += 1 }
            acknowledged += 100 + 2  // the wire: the payload and a short frame header
            kernel.set(5, acknowledged)
            if acknowledged % 10_000 < 102 { _ = guardian.check() }
        }
        #expect(refused == 0 && guardian.admit(90 * Self.kib, to: alice), "\(refused) of 100,000 replies read in time refused")
    }

    @Test func aReusedDescriptorStartsANewAccount() {
        let guardian = makeGuard()
        kernel.set(9, 0)
        guardian.noteRequest(from: alice, fd: 9)
        #expect(guardian.admit(95 * Self.kib, to: alice))
        // Alice's connection closed; bob's new one got descriptor 9 and asks something.
        kernel.set(9, 100)
        guardian.noteRequest(from: bob, fd: 9)
        #expect(guardian.admit(95 * Self.kib, to: bob), "bob does not inherit alice's unread replies")
        #expect(guardian.admit(Self.kib, to: alice), "alice is no longer counted (her replies fail to route anyway)")
        // Another socket on the descriptor (its inode differs), asking nothing, is not bob's.
        kernel.sockets.withLock { $0[9] = 2 }
        _ = guardian.check()
        #expect(guardian.connectionCount == 0, "a new socket on the descriptor took the old account")
        kernel.sockets.withLock { $0[9] = nil }
        guardian.noteRequest(from: bob, fd: 9)
        #expect(guardian.admit(Self.kib, to: bob))
        // A descriptor that is no TCP socket any more is forgotten at the next check.
        kernel.set(9, nil)
        _ = guardian.check()
        #expect(guardian.connectionCount == 0)
    }
}
