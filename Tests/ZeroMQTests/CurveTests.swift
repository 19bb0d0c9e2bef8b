import Testing
@testable import ZeroMQ
import NetplayTestSupport

@Suite("CurveZMQ keys and encrypted sockets", .enabled(if: Context.has("curve")), .ownThread)
struct CurveTests {
    @Test func z85RoundTripsAndRejectsGarbage() {
        let bytes: [UInt8] = [0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B]
        #expect(Z85.encode(bytes) == "HelloWorld")  // RFC 32 test vector
        #expect(Z85.decode("HelloWorld") == bytes)
        #expect(Z85.encode([1, 2, 3]) == nil)
        #expect(Z85.decode("abcd") == nil)
        #expect(Z85.decode("abc\"e") == nil)
    }

    @Test func generatedPairsAreDistinctAndDerivable() throws {
        let a = try CurveKeyPair.generate()
        let b = try CurveKeyPair.generate()
        #expect(a != b)
        #expect(a.publicZ85.count == 40)
        #expect(try CurveKeyPair(secretZ85: a.secretZ85) == a)
        #expect(throws: ZMQError.invalidArgument) { try CurveKeyPair(secretZ85: "short") }
    }

    @Test func encryptedRequestReplyWorks() throws {
        let serverKeys = try CurveKeyPair.generate()
        let server = try Context.shared.socket(.router)
        try server.makeCurveServer(serverKeys)
        let endpoint = try bindEphemeral(server)
        let client = try Context.shared.socket(.dealer)
        try client.makeCurveClient(serverKey: serverKeys.publicKey, keys: try .generate())
        try client.connect(endpoint)
        #expect(try client.mechanism == 2)
        try client.send("secret")
        try server.set(.receiveTimeout(milliseconds: 3000))
        let frames = try server.receiveMultipart()
        #expect(frames.last == Array("secret".utf8))
        try server.sendMultipart([frames[0], Array("ok".utf8)])
        try client.set(.receiveTimeout(milliseconds: 3000))
        #expect(try client.receiveString() == "ok")
    }

    @Test func clientWithWrongServerKeyGetsNothing() throws {
        let serverKeys = try CurveKeyPair.generate()
        let server = try Context.shared.socket(.router)
        try server.makeCurveServer(serverKeys)
        let endpoint = try bindEphemeral(server)
        let monitor = try server.monitor()
        let client = try Context.shared.socket(.dealer)
        try client.set(.linger(milliseconds: 0))
        try client.makeCurveClient(serverKey: try CurveKeyPair.generate().publicKey, keys: try .generate())
        try client.connect(endpoint)
        try client.send("secret")
        try server.set(.receiveTimeout(milliseconds: 500))
        #expect(throws: ZMQError.wouldBlock) { try server.receive() }
        // The server saw a failed handshake rather than a session.
        // A client with the wrong key keeps retrying, so read events for a bounded time only.
        var sawFailure = false
        let deadline = ContinuousClock.now + .seconds(2)
        while ContinuousClock.now < deadline, !sawFailure, let event = try monitor.next(timeout: 500) {
            if case .handshakeSucceeded = event.kind { Issue.record("handshake should not succeed") }
            if [.handshakeFailedProtocol, .handshakeFailedNoDetail, .handshakeFailedAuth, .disconnected].contains(event.kind) {
                sawFailure = true
            }
        }
        #expect(sawFailure)
    }

    @Test func plainClientCannotTalkToCurveServer() throws {
        let server = try Context.shared.socket(.router)
        try server.makeCurveServer(try .generate())
        let endpoint = try bindEphemeral(server)
        let client = try Context.shared.socket(.dealer)
        try client.set(.linger(milliseconds: 0))
        try client.connect(endpoint)
        try client.send("hello")
        try server.set(.receiveTimeout(milliseconds: 300))
        #expect(throws: ZMQError.wouldBlock) { try server.receive() }
    }
}
