import Foundation
import Testing
@testable import ZeroMQ
import NetplayTestSupport

/// Binds `socket` on an ephemeral loopback port and returns the resolved endpoint.
func bindEphemeral(_ socket: Socket) throws -> String {
    try socket.bind("tcp://127.0.0.1:*")
    return try socket.lastEndpoint
}

@Suite("Socket basics over tcp loopback", .ownThread)
struct SocketTests {
    @Test func requestReplyRoundTrip() throws {
        let server = try Context.shared.socket(.rep)
        let client = try Context.shared.socket(.req)
        let endpoint = try bindEphemeral(server)
        #expect(endpoint.hasPrefix("tcp://127.0.0.1:"))
        try client.connect(endpoint)
        try client.send("ping")
        #expect(try server.receiveString() == "ping")
        try server.send("pong")
        #expect(try client.receiveString() == "pong")
    }

    @Test func multipartFramesArriveTogether() throws {
        let router = try Context.shared.socket(.router)
        let dealer = try Context.shared.socket(.dealer)
        try dealer.set(.routingId(Array("peer-1".utf8)))
        let endpoint = try bindEphemeral(router)
        try dealer.connect(endpoint)
        try dealer.sendMultipart([[1, 2], [], [3]])
        try router.set(.receiveTimeout(milliseconds: 2000))
        let frames = try router.receiveMultipart()
        #expect(frames == [Array("peer-1".utf8), [1, 2], [], [3]])
        // Route a reply back by routing id.
        try router.sendMultipart([Array("peer-1".utf8), [9]])
        try dealer.set(.receiveTimeout(milliseconds: 2000))
        #expect(try dealer.receiveMultipart() == [[9]])
    }

    @Test func zeroCopyReceiveSeesBytesAndMoreFlag() throws {
        let pull = try Context.shared.socket(.pull)
        let push = try Context.shared.socket(.push)
        let endpoint = try bindEphemeral(pull)
        try push.connect(endpoint)
        try push.sendMultipart([[7, 7, 7], [8]])
        let first = try pull.receive { bytes, more in (Array(bytes), more) }
        let second = try pull.receive { bytes, more in (Array(bytes), more) }
        #expect(first.0 == [7, 7, 7] && first.1)
        #expect(second.0 == [8] && !second.1)
    }

    @Test func receiveIntoBufferReportsTruncation() throws {
        let pull = try Context.shared.socket(.pull)
        let push = try Context.shared.socket(.push)
        try push.connect(try bindEphemeral(pull))
        try push.send([UInt8](repeating: 5, count: 100))
        var buffer = [UInt8](repeating: 0, count: 10)
        let size = try buffer.withUnsafeMutableBytes { try pull.receive(into: $0) }
        #expect(size == 100)
        #expect(buffer == [UInt8](repeating: 5, count: 10))
    }

    @Test func nonBlockingReceiveOnEmptySocketWouldBlock() throws {
        let pull = try Context.shared.socket(.pull)
        _ = try bindEphemeral(pull)
        #expect(throws: ZMQError.wouldBlock) { try pull.receive(flags: .dontWait) }
    }

    @Test func receiveTimeoutIsWouldBlock() throws {
        let pull = try Context.shared.socket(.pull)
        _ = try bindEphemeral(pull)
        try pull.set(.receiveTimeout(milliseconds: 20))
        #expect(throws: ZMQError.wouldBlock) { try pull.receive() }
    }

    @Test func routerMandatoryRejectsUnknownPeer() throws {
        let router = try Context.shared.socket(.router)
        try router.set(.routerMandatory(true))
        _ = try bindEphemeral(router)
        #expect(throws: ZMQError.hostUnreachable) {
            try router.sendMultipart([Array("nobody".utf8), [1]])
        }
    }

    @Test func badEndpointsGiveTypedErrors() throws {
        let socket = try Context.shared.socket(.router)
        #expect(throws: ZMQError.protocolNotSupported) { try socket.bind("bogus://x") }
        #expect(throws: ZMQError.invalidArgument) { try socket.bind("tcp://127.0.0.1:notaport") }
        let endpoint = try bindEphemeral(socket)
        let other = try Context.shared.socket(.router)
        #expect(throws: ZMQError.addressInUse) { try other.bind(endpoint) }
    }

    @Test func closedSocketThrowsNotASocket() throws {
        let socket = try Context.shared.socket(.dealer)
        socket.close()
        #expect(throws: ZMQError.notASocket) { try socket.send([1]) }
    }

    @Test func wrongSocketOperationIsInvalidState() throws {
        let req = try Context.shared.socket(.req)
        try req.set(.linger(milliseconds: 0))
        try req.connect("tcp://127.0.0.1:1")
        #expect(throws: ZMQError.invalidState) { try req.receive(flags: .dontWait) }
    }

    @Test func publishSubscribeFiltersByPrefix() throws {
        let pub = try Context.shared.socket(.pub)
        let sub = try Context.shared.socket(.sub)
        let endpoint = try bindEphemeral(pub)
        try sub.set(.subscribe(Array("rooms.".utf8)))
        try sub.set(.receiveTimeout(milliseconds: 50))
        try sub.connect(endpoint)
        // Subscriptions propagate asynchronously: publish until one arrives.
        var received: [[UInt8]] = []
        for _ in 0..<100 where received.isEmpty {
            try pub.sendMultipart([Array("sessions.started".utf8), [0]])
            try pub.sendMultipart([Array("rooms.added".utf8), [1]])
            if let frames = try? sub.receiveMultipart() { received = frames }
        }
        #expect(received == [Array("rooms.added".utf8), [1]])
    }

    @Test func socketKeepsItsContextAlive() throws {
        var context: Context? = Context()
        let pull = try context!.socket(.pull)
        let push = try context!.socket(.push)
        context = nil  // sockets still hold it
        try push.connect(try bindEphemeral(pull))
        try push.send([42])
        #expect(try pull.receive() == [42])
    }

    @Test func everySocketTypeCanBeCreated() throws {
        for type in SocketType.allCases {
            let socket = try Context.shared.socket(type)
            #expect(socket.type == type)
        }
    }
}
