import Testing
@testable import ZeroMQ
import NetplayTestSupport

@Suite("Socket options", .ownThread)
struct OptionTests {
    @Test func optionsReadBackAsSet() throws {
        let socket = try Context.shared.socket(.router)
        try socket.set([
            .linger(milliseconds: 250),
            .maxMessageSize(bytes: 1 << 20),
            .sendHighWaterMark(5000),
            .receiveHighWaterMark(6000),
            .routerMandatory(true),
            .routerHandover(true),
            .immediate(true),
            .tcpKeepalive(true),
            .tcpKeepaliveIdle(seconds: 30),
            .tcpKeepaliveInterval(seconds: 5),
            .tcpKeepaliveCount(3),
            .tcpMaxRetransmitTimeout(milliseconds: 15_000),
            .heartbeatInterval(milliseconds: 1000),
            .heartbeatTimeout(milliseconds: 3000),
            .heartbeatTTL(milliseconds: 6000),
            .routingId(Array("svc-1".utf8)),
        ])
        #expect(try socket.linger == 250)
        #expect(try socket.maxMessageSize == 1 << 20)
        #expect(try socket.sendHighWaterMark == 5000)
        #expect(try socket.receiveHighWaterMark == 6000)
        #expect(try socket.immediate)
        #expect(try socket.tcpKeepalive == 1)
        #expect(try socket.tcpKeepaliveIdle == 30)
        #expect(try socket.tcpKeepaliveInterval == 5)
        #expect(try socket.tcpKeepaliveCount == 3)
        #expect(try socket.tcpMaxRetransmitTimeout == 15_000)
        #expect(try socket.heartbeatTTL == 6000)
        #expect(try socket.heartbeatInterval == 1000)
        #expect(try socket.heartbeatTimeout == 3000)
        #expect(try socket.routingId == Array("svc-1".utf8))
    }

    @Test func malformedOptionValuesAreRejected() throws {
        let socket = try Context.shared.socket(.dealer)
        #expect(throws: ZMQError.invalidArgument) { try socket.set(.curveServerKey([1, 2, 3])) }
        #expect(throws: ZMQError.invalidArgument) { try socket.set(.routingId([])) }
    }

    @Test func oversizedInboundMessageDropsTheSender() throws {
        let pull = try Context.shared.socket(.pull)
        try pull.set(.maxMessageSize(bytes: 16))
        try pull.set(.receiveTimeout(milliseconds: 300))
        let endpoint = try bindEphemeral(pull)
        let push = try Context.shared.socket(.push)
        try push.connect(endpoint)
        try push.send([UInt8](repeating: 1, count: 64))
        #expect(throws: ZMQError.wouldBlock) { try pull.receive() }
    }
}
