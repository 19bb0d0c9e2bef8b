import NetplayTestSupport
import Rollback
import Testing
@testable import RetroArchRelay

/// A transport that records what the core does.
final class RecordingTransport: TunnelTransport {
    var sent: [TunnelConnection: [UInt8]] = [:]
    var closed: [TunnelConnection] = []
    var events: [TunnelEvent] = []
    var refuseSendsTo: Set<TunnelConnection> = []
    var nextPortListener = 100
    var portsClosed: [Int] = []

    func send(_ bytes: UnsafeRawBufferPointer, to connection: TunnelConnection) -> Bool {
        guard !refuseSendsTo.contains(connection), !closed.contains(connection) else { return false }
        sent[connection, default: []].append(contentsOf: bytes)
        return true
    }
    func close(_ connection: TunnelConnection) { closed.append(connection) }
    func openSessionPort(for session: TunnelID) -> (listener: Int, port: UInt16)? {
        nextPortListener += 1
        return (nextPortListener, UInt16(40_000 + nextPortListener))
    }
    func closeSessionPort(listener: Int) { portsClosed.append(listener) }
    func tunnelEvent(_ event: TunnelEvent) { events.append(event) }

    /// Takes what was sent to `connection` so far.
    func take(_ connection: TunnelConnection) -> [UInt8] {
        defer { sent[connection] = nil }
        return sent[connection] ?? []
    }
}

/// Drives a ``TunnelCore`` as RetroArch hosts and clients would.
struct TunnelRig {
    let transport = RecordingTransport()
    let core: TunnelCore
    var now: UInt64 = 1_000
    var nextId: UInt64 = 1

    init(_ configuration: TunnelConfiguration = TunnelConfiguration(advertiseHost: "relay.example", sessionPorts: nil)) {
        let seed = SeededRandom(seed: 42)
        core = TunnelCore(configuration: configuration, transport: transport, wallClockMs: { 1_700_000_000_000 }, generator: seed)
    }

    mutating func connect(listener: Int = 0, address: [UInt8] = [10, 0, 0, 9]) -> TunnelConnection {
        let connection = TunnelConnection(listener: listener, id: nextId)
        nextId += 1
        core.opened(connection, address: address, nowMs: now)
        return connection
    }

    func send(_ bytes: [UInt8], on connection: TunnelConnection) {
        bytes.withUnsafeBytes { core.received($0, on: connection, nowMs: now) }
    }

    /// A host with its session: the control connection and the session id.
    mutating func host() throws -> (TunnelConnection, TunnelID) {
        let control = connect(address: [192, 168, 1, 2])
        send(TunnelWire.message(TunnelWire.session, .zero), on: control)
        let reply = transport.take(control)
        #expect(reply.count == 16 && TunnelWire.magic(reply) == TunnelWire.session)
        let id = try #require(TunnelID(reply[4...]))
        #expect(!id.isZero)
        return (control, id)
    }

    /// A client joining `session`: its connection and the link id the host was told.
    mutating func client(of session: TunnelID, control: TunnelConnection, first bytes: [UInt8] = []) throws -> (TunnelConnection, TunnelID) {
        let client = connect(address: [203, 0, 113, 7])
        send(TunnelWire.message(TunnelWire.session, session) + bytes, on: client)
        let told = transport.take(control)
        try #require(told.count == 16 && TunnelWire.magic(told) == TunnelWire.link)
        return (client, try #require(TunnelID(told[4...])))
    }
}

@Suite("RetroArch tunnel core", .ownThread)
struct TunnelCoreTests {
    @Test func aHostGetsASessionAClientIsLinkedAndBytesFlowBothWays() throws {
        var rig = TunnelRig()
        let (control, session) = try rig.host()
        let hello: [UInt8] = Array("client header".utf8)
        let (client, link) = try rig.client(of: session, control: control, first: hello)
        rig.send([1, 2, 3], on: client)  // buffered until the link exists
        #expect(rig.transport.sent[client] == nil)

        // The host asks where the client comes from: an IPv4-mapped IPv6 address.
        rig.send(TunnelWire.message(TunnelWire.address, link), on: control)
        let address = rig.transport.take(control)
        #expect(address == TunnelWire.message(TunnelWire.address, link) + [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 203, 0, 113, 7])

        // The host's link connection claims the link: the client's buffered bytes reach it.
        let hostLink = rig.connect(address: [192, 168, 1, 2])
        rig.send(TunnelWire.message(TunnelWire.link, link) + Array("host header".utf8), on: hostLink)
        #expect(rig.transport.take(hostLink) == hello + [1, 2, 3])
        #expect(rig.transport.take(client) == Array("host header".utf8))
        rig.send([9, 9], on: client)
        #expect(rig.transport.take(hostLink) == [9, 9])
        rig.send([7], on: hostLink)
        #expect(rig.transport.take(client) == [7])

        let report = try #require(rig.core.reports().first)
        #expect(report.join == "relay.example|55435|\(session.base64)")
        #expect(report.clients == 1 && report.pendingClients == 0 && report.clientsJoined == 1)
        #expect(report.counters.bytesToHost == UInt64(hello.count + 5) && report.counters.bytesFromHost == UInt64("host header".utf8.count + 1))
        #expect(rig.core.linkCount == 1)
    }

    @Test func theSessionIdIsRetroArchsBase64() throws {
        let id = try #require(TunnelID([0xFB, 0xFF, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]))
        #expect(id.base64 == "+/8BAgMEBQYHCAkK")
        #expect(id.base64.count == 16)
        #expect(TunnelID(base64: id.base64) == id)
        #expect(TunnelID(base64: "not base64!") == nil)
        #expect(TunnelID(base64: "AAAA") == nil)
    }

    @Test func strangersAreClosedWithACountedReason() throws {
        var rig = TunnelRig()
        let bad = rig.connect()
        rig.send(Array("GET / HTTP/1.1\r\n\r\n".utf8), on: bad)
        #expect(rig.transport.closed == [bad])
        #expect(rig.core.closes[.badMagic] == 1)

        let unknown = rig.connect()
        rig.send(TunnelWire.message(TunnelWire.session, TunnelID(Array(1...12))!), on: unknown)
        #expect(rig.core.closes[.unknownSession] == 1)

        let forged = rig.connect()
        rig.send(TunnelWire.message(TunnelWire.link, TunnelID(Array(1...12))!), on: forged)
        #expect(rig.core.closes[.unknownLink] == 1)

        // Seven bytes, then silence: closed when the prefix timeout passes, not before.
        let slow = rig.connect()
        rig.send(Array("RATS123".utf8), on: slow)
        rig.now += 9_000
        rig.core.tick(nowMs: rig.now)
        #expect(!rig.transport.closed.contains(slow))
        rig.now += 1_001
        rig.core.tick(nowMs: rig.now)
        #expect(rig.transport.closed.contains(slow))
        #expect(rig.core.closes[.prefixTimeout] == 1)
        #expect(rig.core.connectionCount == 0)
    }

    @Test func aPlainRetroArchClientIsToldTheServerIsOutOfDate() throws {
        var rig = TunnelRig()
        let plain = rig.connect()
        rig.send([0x52, 0x41, 0x4E, 0x50, 0, 4, 0, 8, 0, 0, 0, 1, 0, 0, 0, 6, 0, 0, 0, 5, 0, 0, 4, 0x69], on: plain)
        #expect(rig.transport.take(plain) == [0x52, 0x41, 0x4E, 0x50] + [UInt8](repeating: 0, count: 20))
        // Closed once the answer had time to leave, whatever the client sends meanwhile.
        rig.send([1, 2, 3], on: plain)
        rig.core.tick(nowMs: rig.now + 100)
        #expect(rig.transport.closed.isEmpty)
        rig.core.tick(nowMs: rig.now + 500)
        #expect(rig.transport.closed == [plain])
        #expect(rig.core.closes[.notTunnel] == 1)
    }

    @Test func controlMessagesSplitAndJoinedAreRead() throws {
        var rig = TunnelRig()
        let (control, session) = try rig.host()
        let (_, link) = try rig.client(of: session, control: control)
        let (_, second) = try rig.client(of: session, control: control)
        // A ping echo and an address request in one read, then an address request split in two.
        rig.send(Array("RATP".utf8) + TunnelWire.message(TunnelWire.address, link), on: control)
        #expect(rig.transport.take(control).count == 32)
        let request = TunnelWire.message(TunnelWire.address, second)
        rig.send(Array(request[0..<6]), on: control)
        #expect(rig.transport.take(control).isEmpty)
        rig.send(Array(request[6...]), on: control)
        #expect(rig.transport.take(control) == TunnelWire.addressReply(second, address: [203, 0, 113, 7]))
        #expect(rig.core.sessionCount == 1)
    }

    /// RetroArch asks the address of each link it is told of once. A host asking more is no
    /// RetroArch: each ask cost a reply and a send on the thread every session shares, and one
    /// read of 256 KiB held 16,384 of them.
    @Test func aHostAskingMoreAddressesThanItWasToldLinksEndsItsSession() throws {
        var rig = TunnelRig()
        let (control, session) = try rig.host()
        let (client, link) = try rig.client(of: session, control: control)
        rig.send(TunnelWire.message(TunnelWire.address, link), on: control)
        #expect(rig.transport.take(control) == TunnelWire.addressReply(link, address: [203, 0, 113, 7]))
        rig.send(TunnelWire.message(TunnelWire.address, link) + TunnelWire.message(TunnelWire.address, TunnelID(Array(1...12))!),
                 on: control)
        #expect(rig.transport.take(control).isEmpty)
        #expect(rig.transport.closed.contains(control) && rig.transport.closed.contains(client))
        #expect(rig.core.closes[.badControlMessage] == 1 && rig.core.sessionCount == 0)
    }

    /// A client that hangs up while joining left the host a pending connection that never ended:
    /// the relay answered the host's address request for it with a zero id, as the official server
    /// does, which matches none of RetroArch's pending connections, so RetroArch neither linked
    /// nor timed it out (a connected socket is always writable, and it times out only unwritable
    /// ones); after 8 such clients it took no client again. Now the answer names the link, the
    /// host links it, the relay closes that link, and the place is free.
    @Test func aClientThatHangsUpWhileJoiningLeavesTheHostNoDeadPlace() throws {
        var rig = TunnelRig(TunnelConfiguration(advertiseHost: "relay.example", sessionPorts: nil, maxPendingLinks: 1))
        let (control, session) = try rig.host()
        let (client, link) = try rig.client(of: session, control: control)
        rig.core.closedByPeer(client, nowMs: rig.now)
        rig.send(TunnelWire.message(TunnelWire.address, link), on: control)
        #expect(rig.transport.take(control) == TunnelWire.addressReply(link, address: []))
        #expect(rig.core.reports().first?.pendingClients == 0, "no client waits")
        // Until the host links it, the host still holds that pending connection: no other joins.
        let early = rig.connect(address: [203, 0, 113, 8])
        rig.send(TunnelWire.message(TunnelWire.session, session), on: early)
        #expect(rig.transport.closed.contains(early) && rig.core.closes[.clientLimit] == 1)
        let hostLink = rig.connect(address: [192, 168, 1, 2])
        rig.send(TunnelWire.message(TunnelWire.link, link), on: hostLink)
        #expect(rig.transport.closed.contains(hostLink) && rig.core.closes[.partnerClosed] == 1)
        #expect(rig.core.closes[.unknownLink] == nil && !rig.transport.closed.contains(control))
        // Its place is free again.
        let (later, laterLink) = try rig.client(of: session, control: control)
        let laterHostLink = rig.connect(address: [192, 168, 1, 2])
        rig.send(TunnelWire.message(TunnelWire.link, laterLink), on: laterHostLink)
        rig.send([1], on: later)
        #expect(rig.transport.take(laterHostLink) == [1])
    }

    /// Joins that hang up at once freed their place at once, though the host had been told of
    /// each: a stranger queued link announcements on the host's control connection faster than
    /// RetroArch reads them (one message a frame), until a real client's waited past its timeout
    /// and the session was closed as a slow reader. The host is told of no more links than it
    /// can hold pending, and an announced link stays pending until the host links it or the link
    /// timeout passes.
    @Test func joinsThatHangUpAtOnceQueueNoMoreLinksThanTheHostHoldsPending() throws {
        var rig = TunnelRig()
        let (control, session) = try rig.host()
        var announced = 0
        for _ in 0 ..< 1_000 {
            let client = rig.connect(address: [203, 0, 113, 9])
            rig.send(TunnelWire.message(TunnelWire.session, session) + [UInt8](repeating: 1, count: 24), on: client)
            rig.core.closedByPeer(client, nowMs: rig.now)
            announced += rig.transport.take(control).count / TunnelWire.idMessageSize
        }
        #expect(announced == 8, "\(announced) links announced")
        #expect(!rig.transport.closed.contains(control) && rig.core.bufferedBytes == 0)
        // Past the link timeout the host's places are free again.
        rig.now += 30_000
        rig.core.tick(nowMs: rig.now)
        _ = rig.transport.take(control)  // the relay's ping
        let (client, _) = try rig.client(of: session, control: control)
        #expect(!rig.transport.closed.contains(client))
    }

    /// One address cannot host every session (a few addresses held all 1,000, and filled the
    /// lobby); others still can, and a closed session gives its place back.
    @Test func oneAddressHostsNoMoreThanItsShareOfSessions() throws {
        var configuration = TunnelConfiguration(advertiseHost: "relay.example", sessionPorts: nil)
        try configuration.applyLimits("sessions-per-address=2")
        var rig = TunnelRig(configuration)
        let (first, _) = try rig.host()
        _ = try rig.host()
        let third = rig.connect(address: [192, 168, 1, 2])
        rig.send(TunnelWire.message(TunnelWire.session, .zero), on: third)
        #expect(rig.transport.closed.contains(third) && rig.core.closes[.sessionLimit] == 1)
        let elsewhere = rig.connect(address: [192, 168, 1, 3])
        rig.send(TunnelWire.message(TunnelWire.session, .zero), on: elsewhere)
        #expect(rig.core.sessionCount == 3)
        rig.core.closedByPeer(first, nowMs: rig.now)
        _ = try rig.host()
        #expect(rig.core.sessionCount == 3)
    }

    /// A session's counts are 64-bit: a stranger hosting its own session and linking itself could
    /// wrap a 32-bit count, a trap that took the relay down. Reports clamp them.
    @Test func aSessionsCountsDoNotWrap() {
        let session = TunnelSession(id: .zero, host: TunnelConnection(listener: 0, id: 1), hostAddress: [], nowMs: 0, nowUnixMs: 0)
        session.clientsJoined = UInt64(UInt32.max)
        session.refused = UInt64(UInt32.max)
        session.clientsJoined += 1
        session.refused += 1
        let report = session.report(join: "", directEndpoint: "")
        #expect(report.clientsJoined == .max && report.refusedConnections == .max)
    }

    @Test func aPrefixSplitAcrossReadsIsStillRead() throws {
        var rig = TunnelRig()
        let control = rig.connect()
        let message = TunnelWire.message(TunnelWire.session, .zero)
        for byte in message { rig.send([byte], on: control) }
        #expect(rig.transport.take(control).count == 16)
        #expect(rig.core.sessionCount == 1)
    }

    @Test func limitsHold() throws {
        var rig = TunnelRig(TunnelConfiguration(maxSessions: 1, maxClientsPerSession: 3, maxPendingLinks: 2, maxBufferedBytes: 100))
        let (control, session) = try rig.host()
        let second = rig.connect()
        rig.send(TunnelWire.message(TunnelWire.session, .zero), on: second)
        #expect(rig.core.closes[.sessionLimit] == 1 && rig.core.sessionCount == 1)

        _ = try rig.client(of: session, control: control)
        _ = try rig.client(of: session, control: control)
        let third = rig.connect()
        rig.send(TunnelWire.message(TunnelWire.session, session), on: third)
        #expect(rig.core.closes[.clientLimit] == 1, "two links already wait for the host")

    }

    @Test func aWaitingClientThatSendsTooMuchIsClosed() throws {
        var rig = TunnelRig(TunnelConfiguration(maxBufferedBytes: 100))
        let (control, session) = try rig.host()
        let (client, _) = try rig.client(of: session, control: control, first: [UInt8](repeating: 1, count: 60))
        rig.send([UInt8](repeating: 2, count: 41), on: client)
        #expect(rig.transport.closed == [client])
        #expect(rig.core.closes[.bufferOverflow] == 1)
        #expect(rig.core.reports().first?.pendingClients == 0)
    }

    /// Each waiting client was held to 64 KiB, but nothing bounded them together: a thousand
    /// sessions' waiting clients, from many addresses, could hold half a gigabyte. They now share a
    /// budget; bytes leave it when a link opens or its client goes.
    @Test func waitingClientsTogetherStayWithinTheBufferBudget() throws {
        // Each client's first 64 bytes are outside the budget (``TunnelCore/unchargedBytesPerClient``).
        var rig = TunnelRig(TunnelConfiguration(maxSessions: 4, maxBufferedBytes: 200, maxBufferedTotalBytes: 150))
        let (control, session) = try rig.host()
        let (first, firstLink) = try rig.client(of: session, control: control, first: [UInt8](repeating: 1, count: 164))
        #expect(rig.core.bufferedBytes == 100)
        // Within its own 200 bytes, but past the 150 all hold together: closed, counted.
        let (second, _) = try rig.client(of: session, control: control, first: [UInt8](repeating: 2, count: 100))
        #expect(rig.core.bufferedBytes == 136)
        rig.send([UInt8](repeating: 2, count: 20), on: second)
        #expect(rig.transport.closed.contains(second) && rig.core.closes[.bufferBudget] == 1)
        #expect(rig.core.bufferedBytes == 100)
        let (other, otherSession) = try rig.host()
        let third = rig.connect(address: [198, 51, 100, 4])
        rig.send(TunnelWire.message(TunnelWire.session, otherSession) + [UInt8](repeating: 3, count: 124), on: third)
        _ = rig.transport.take(other)
        #expect(rig.transport.closed.contains(third) && rig.core.closes[.bufferBudget] == 2, "another session's client shares it")
        // With the budget all but full, a real client's 24-byte header still gets through.
        let (header, _) = try rig.client(of: otherSession, control: other, first: [UInt8](repeating: 6, count: 24))
        #expect(!rig.transport.closed.contains(header) && rig.core.bufferedBytes == 100)
        // The first link opens: its bytes go to the host and leave the budget.
        let hostLink = rig.connect(address: [192, 168, 1, 2])
        rig.send(TunnelWire.message(TunnelWire.link, firstLink), on: hostLink)
        #expect(rig.transport.take(hostLink) == [UInt8](repeating: 1, count: 164))
        #expect(rig.core.bufferedBytes == 0)
        let (fourth, _) = try rig.client(of: session, control: control, first: [UInt8](repeating: 4, count: 154))
        #expect(!rig.transport.closed.contains(fourth) && rig.core.bufferedBytes == 90)
        // A waiting client that goes gives its bytes back.
        rig.core.closedByPeer(fourth, nowMs: rig.now)
        #expect(rig.core.bufferedBytes == 0)
        let (fifth, _) = try rig.client(of: session, control: control, first: [UInt8](repeating: 5, count: 134))
        #expect(rig.core.bufferedBytes == 70)
        // So does every waiting client of a session that ends.
        rig.core.closedByPeer(control, nowMs: rig.now)
        #expect(rig.transport.closed.contains(fifth) && rig.core.bufferedBytes == 0)
        _ = first
    }

    @Test func aLinkTheHostNeverOpensTimesOut() throws {
        var rig = TunnelRig()
        let (control, session) = try rig.host()
        let (client, _) = try rig.client(of: session, control: control)
        rig.now += 29_000
        rig.core.tick(nowMs: rig.now)
        #expect(!rig.transport.closed.contains(client))
        rig.now += 1_000
        rig.core.tick(nowMs: rig.now)
        #expect(rig.transport.closed.contains(client))
        #expect(rig.core.closes[.linkTimeout] == 1)
        #expect(!rig.transport.closed.contains(control), "the host's session stays")
    }

    @Test func pingsMeasureTheHostAndASilentHostEndsItsSession() throws {
        var rig = TunnelRig()
        let (control, _) = try rig.host()
        rig.now += 10_000
        rig.core.tick(nowMs: rig.now)
        let ping = rig.transport.take(control)
        #expect(ping == Array("RATP".utf8), "RetroArch reads RATP alone: 4 bytes")
        rig.now += 37
        rig.send(ping, on: control)
        #expect(rig.core.reports().first?.hostRTTMs == 37)

        // Nothing heard for the host timeout: the session ends.
        rig.now += 240_000
        rig.core.tick(nowMs: rig.now)
        #expect(rig.transport.closed.contains(control))
        #expect(rig.core.closes[.hostTimeout] == 1)
        #expect(rig.core.sessionCount == 0)
    }

    @Test func aHostSendingGarbageOnItsControlConnectionEndsItsSessionAndItsLinks() throws {
        var rig = TunnelRig()
        let (control, session) = try rig.host()
        let (client, link) = try rig.client(of: session, control: control)
        let hostLink = rig.connect()
        rig.send(TunnelWire.message(TunnelWire.link, link), on: hostLink)
        rig.send(Array("XXXXXXXXXXXXXXXX".utf8), on: control)
        #expect(rig.core.closes[.badControlMessage] == 1)
        #expect(Set(rig.transport.closed) == [control, client, hostLink])
        #expect(rig.core.sessionCount == 0 && rig.core.connectionCount == 0)
        let closedEvent = rig.transport.events.contains { if case .sessionClosed(let id, _, _) = $0 { id == session } else { false } }
        #expect(closedEvent)
    }

    @Test func whenOneEndOfALinkGoesTheOtherIsClosed() throws {
        var rig = TunnelRig()
        let (control, session) = try rig.host()
        let (client, link) = try rig.client(of: session, control: control)
        let hostLink = rig.connect()
        rig.send(TunnelWire.message(TunnelWire.link, link), on: hostLink)
        rig.send([4, 2], on: hostLink)
        rig.core.closedByPeer(client, nowMs: rig.now)
        #expect(rig.transport.closed.isEmpty, "what was piped to the other end leaves before it is closed")
        rig.core.tick(nowMs: rig.now + 500)
        #expect(rig.transport.closed == [hostLink])
        #expect(rig.core.sessionCount == 1 && rig.core.linkCount == 0)
        // A second claim of the same link is refused.
        let again = rig.connect()
        rig.send(TunnelWire.message(TunnelWire.link, link), on: again)
        #expect(rig.core.closes[.unknownLink] == 1)
    }

    @Test func aSlowReaderIsClosed() throws {
        var rig = TunnelRig()
        let (control, session) = try rig.host()
        let (client, link) = try rig.client(of: session, control: control)
        let hostLink = rig.connect()
        rig.send(TunnelWire.message(TunnelWire.link, link), on: hostLink)
        rig.transport.refuseSendsTo = [client]
        rig.send([1, 2, 3], on: hostLink)
        #expect(rig.core.closes[.slowReader] == 1)
        rig.core.tick(nowMs: rig.now + 500)
        #expect(rig.transport.closed.contains(client) && rig.transport.closed.contains(hostLink))
    }

    @Test func aSessionPortTakesClientsWithoutAPrefix() throws {
        var rig = TunnelRig(TunnelConfiguration(advertiseHost: "relay.example", sessionPorts: 40_000...40_100))
        let (control, _) = try rig.host()
        let report = try #require(rig.core.reports().first)
        #expect(report.directEndpoint == "relay.example:40101")
        let client = rig.connect(listener: 101)
        #expect(TunnelWire.magic(rig.transport.take(control)) == TunnelWire.link)
        rig.send([5, 5], on: client)
        #expect(rig.core.reports().first?.pendingClients == 1)
        rig.core.closedByPeer(control, nowMs: rig.now)
        #expect(rig.transport.portsClosed == [101])
        #expect(rig.transport.closed == [client])
    }

    /// A full session's plain port closes what it refuses. The refused connection was not yet
    /// tracked, so the refusal closed nothing: it stayed open, uncounted and without a timeout,
    /// and a loop of connects ran the process out of descriptors.
    @Test func aFullSessionPortClosesAndCountsTheConnectionsItRefuses() throws {
        var rig = TunnelRig(TunnelConfiguration(advertiseHost: "relay.example", sessionPorts: 40_000...40_100))
        _ = try rig.host()
        let pending = (0 ..< 8).map { _ in rig.connect(listener: 101) }
        let refused = (0 ..< 5).map { _ in rig.connect(listener: 101) }
        #expect(rig.transport.closed == refused)
        #expect(rig.core.closes[.clientLimit] == 5)
        #expect(rig.core.connectionCount == 1 + pending.count)
        #expect(rig.core.reports().first?.pendingClients == 8)
    }

    /// A client's INFO names the session's core and content only once the host played on with
    /// it: a joiner the host turned away (or one lying) renamed the session in the lobby.
    @Test func onlyAClientTheHostPlaysWithNamesTheSessionsContent() throws {
        typealias Meter = NetplayStreamMeterTests
        var rig = TunnelRig()
        let (control, session) = try rig.host()
        func linked() throws -> (client: TunnelConnection, host: TunnelConnection) {
            let (client, link) = try rig.client(of: session, control: control)
            let hostLink = rig.connect(address: [192, 168, 1, 2])
            rig.send(TunnelWire.message(TunnelWire.link, link), on: hostLink)
            return (client, hostLink)
        }
        let header = [UInt8](repeating: 0xAB, count: NetplayStreamMeter.headerSize)
        func info(_ core: String) -> [UInt8] {
            Meter.message(NetplayStreamMeter.Command.info, [0, 0, 0, 1] + Meter.field(core) + Meter.field("6.6.6"))
        }
        let liar = try linked()
        rig.send(header + info("Forged"), on: liar.client)
        rig.send(header, on: liar.host)
        rig.core.closedByPeer(liar.host, nowMs: rig.now)  // the host turned it away
        #expect(rig.core.reports().first?.coreName == "")
        let player = try linked()
        rig.send(header + info("Nestopia"), on: player.client)
        rig.send(header + Meter.message(NetplayStreamMeter.Command.input, [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1]), on: player.host)
        #expect(rig.core.reports().first?.coreName == "Nestopia")
        // A second INFO, once the host played on, renames nothing (the meter keeps the handshake's).
        rig.send(info("Forged"), on: player.client)
        rig.core.closedByPeer(player.client, nowMs: rig.now)
        #expect(rig.core.reports().first?.coreName == "Nestopia")
    }

    /// One address cannot hold every connection place: beyond its share it is refused, and
    /// its places come back as its connections close.
    @Test func oneAddressHoldsNoMoreThanItsShareOfConnections() throws {
        var configuration = TunnelConfiguration(advertiseHost: "relay.example", sessionPorts: nil)
        try configuration.applyLimits("per-address=3")
        var rig = TunnelRig(configuration)
        let mine = (0 ..< 3).map { _ in rig.connect(address: [198, 51, 100, 1]) }
        let refused = rig.connect(address: [198, 51, 100, 1])
        #expect(rig.transport.closed == [refused] && rig.core.closes[.addressLimit] == 1)
        let other = rig.connect(address: [198, 51, 100, 2])
        #expect(!rig.transport.closed.contains(other))
        rig.core.closedByPeer(mine[0], nowMs: rig.now)
        let again = rig.connect(address: [198, 51, 100, 1])
        #expect(!rig.transport.closed.contains(again) && rig.core.connectionCount == 4)
    }

    @Test func limitsRefuseTimeoutsPastADay() {
        var configuration = TunnelConfiguration(advertiseHost: "relay.example", sessionPorts: nil)
        #expect(throws: TunnelConfiguration.LimitsError.self) { try configuration.applyLimits("host-timeout=1e17") }
        #expect(throws: TunnelConfiguration.LimitsError.self) { try configuration.applyLimits("prefix-timeout=86401") }
        #expect(throws: Never.self) { try configuration.applyLimits("link-timeout=86400,host-timeout=600") }
    }
}
