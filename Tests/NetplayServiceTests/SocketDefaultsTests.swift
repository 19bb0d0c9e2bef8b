import Foundation
import Testing
import ZeroMQ
@testable import NetplayService
import NetplayTestSupport

@Suite("Socket defaults: heartbeats are the connecting side's, keepalive on both", .ownThread)
struct SocketDefaultsTests {
    @Test func aConnectingSocketPingsAndABoundOneDoesNot() throws {
        let client = try SocketDefaults.client(.dealer, curve: nil)
        #expect(try client.heartbeatInterval == SocketDefaults.heartbeatIntervalMs)
        #expect(try client.heartbeatTimeout == SocketDefaults.heartbeatTimeoutMs)
        #expect(try client.heartbeatTTL == SocketDefaults.heartbeatTimeoutMs)
        let server = try SocketDefaults.server(.router, curve: nil)
        #expect(try server.heartbeatInterval == 0)
        for socket in [client, server] {
            #expect(try socket.linger == SocketDefaults.lingerMilliseconds)
            #expect(try socket.sendHighWaterMark == SocketDefaults.highWaterMark)
            #expect(try socket.tcpKeepalive == 1)
            #expect(try socket.tcpKeepaliveIdle == SocketDefaults.keepaliveIdleSeconds)
            #expect(try socket.tcpKeepaliveInterval == SocketDefaults.keepaliveIntervalSeconds)
            #expect(try socket.tcpKeepaliveCount == SocketDefaults.keepaliveProbes)
            #expect(try socket.tcpMaxRetransmitTimeout == SocketDefaults.unacknowledgedTimeoutMs)
        }
        #expect(SocketDefaults.options(for: .router, end: .binds).contains(.routerMandatory(true)))
        #expect(!SocketDefaults.options(for: .dealer, end: .connects).contains(.routerMandatory(true)))
    }

    /// Through a bare ZMTP peer, so the test sees every command the bound socket's libzmq sends:
    /// its PINGs are answered, it PINGs nobody (a connecting libzmq socket would PING within
    /// 2 s), and it drops a peer that stays silent past the TTL of that peer's last PING.
    @Test func aBoundSocketAnswersPingsSendsNoneAndDropsAPeerSilentPastItsTTL() throws {
        let server = try SocketDefaults.server(.router, curve: nil)
        try server.bind("tcp://127.0.0.1:*")
        let endpoint = try server.lastEndpoint
        let port = try #require(endpoint.split(separator: ":").last.flatMap { UInt16($0) })
        let peer = try BareZMTPPeer(port: port)
        defer { peer.close() }
        try peer.handshake(socketType: "DEALER")

        var pongs = 0
        let quietUntil = Date().addingTimeInterval(3)
        while Date() < quietUntil {
            try peer.sendPing(ttlDeciseconds: 0)
            let nextPing = Date().addingTimeInterval(0.25)
            while let frame = try peer.nextFrame(until: nextPing) {
                switch frame {
                case .command(name: "PONG", _): pongs += 1
                case .command(let name, _): Issue.record("the bound socket sent a \(name) command")
                case .message: Issue.record("the bound socket sent a message")
                case .closed: Issue.record("the bound socket closed a connection that was talking"); return
                }
            }
        }
        #expect(pongs >= 10)

        try peer.sendPing(ttlDeciseconds: 5)  // drop me after 0.5 s of silence
        let silentSince = Date()
        var closedAfter: TimeInterval?
        while closedAfter == nil, Date().timeIntervalSince(silentSince) < 5 {
            if case .closed = try peer.nextFrame(until: Date().addingTimeInterval(0.5)) {
                closedAfter = Date().timeIntervalSince(silentSince)
            }
        }
        let after = try #require(closedAfter, "the bound socket kept a peer silent past its TTL")
        #expect(after >= 0.4)
    }
}

/// A ZMTP 3.1 peer written by hand over a plain TCP socket (RFC 23 and 37, NULL mechanism): it
/// sends only what a test tells it to and reports every frame it receives.
final class BareZMTPPeer {
    enum Frame: Equatable {
        case command(name: String, data: [UInt8])
        case message([UInt8])
        case closed
    }

    private let descriptor: Int32
    private var received: [UInt8] = []
    private var peerClosed = false

    init(port: UInt16) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.EMFILE) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            Glibc.close(descriptor)
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .ECONNREFUSED)
        }
        var timeout = timeval(tv_sec: 0, tv_usec: 20_000)  // reads wake up to check their deadline
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    func close() { Glibc.close(descriptor) }

    /// Greeting both ways (ours first, READY only after theirs), then READY both ways.
    func handshake(socketType: String) throws {
        var greeting = [UInt8](repeating: 0, count: 64)
        greeting[0] = 0xFF
        greeting[9] = 0x7F
        greeting[10] = 3
        greeting[11] = 1
        greeting.replaceSubrange(12 ..< 16, with: Array("NULL".utf8))
        try write(greeting)
        let deadline = Date().addingTimeInterval(2)
        while received.count < 64 {
            guard try fill(until: deadline) else { throw HandshakeFailure("no greeting from the bound socket") }
        }
        received.removeFirst(64)
        let name = Array("Socket-Type".utf8), value = Array(socketType.utf8)
        let property = [UInt8(name.count)] + name + bigEndianBytes(UInt32(value.count)) + value
        try sendCommand("READY", data: property)
        guard case .command(name: "READY", _) = try nextFrame(until: deadline) else {
            throw HandshakeFailure("no READY from the bound socket")
        }
    }

    /// A PING whose TTL (tenths of a second, 0: none) asks the peer to drop us after that much silence.
    func sendPing(ttlDeciseconds: UInt16) throws {
        try sendCommand("PING", data: [UInt8(ttlDeciseconds >> 8), UInt8(ttlDeciseconds & 0xFF)])
    }

    /// The next frame, `.closed` once the peer closed the connection, nil if nothing came by `deadline`.
    func nextFrame(until deadline: Date) throws -> Frame? {
        while true {
            if let frame = parseFrame() { return frame }
            if peerClosed { return .closed }
            guard try fill(until: deadline) else { return peerClosed ? .closed : nil }
        }
    }

    private func sendCommand(_ name: String, data: [UInt8]) throws {
        let body = [UInt8(name.utf8.count)] + Array(name.utf8) + data
        precondition(body.count < 256)
        try write([0x04, UInt8(body.count)] + body)
    }

    private func parseFrame() -> Frame? {
        guard received.count >= 2 else { return nil }
        let flags = received[0]
        var header = 2
        var size = Int(received[1])
        if flags & 0x02 != 0 {
            guard received.count >= 9 else { return nil }
            header = 9
            size = received[1 ..< 9].reduce(0) { $0 << 8 | Int($1) }
        }
        guard received.count >= header + size else { return nil }
        let body = Array(received[header ..< header + size])
        received.removeFirst(header + size)
        guard flags & 0x04 != 0 else { return .message(body) }
        let nameLength = Int(body.first ?? 0)
        guard body.count > nameLength else { return .command(name: "", data: []) }
        return .command(name: String(decoding: body[1 ... nameLength], as: UTF8.self), data: Array(body[(nameLength + 1)...]))
    }

    /// Reads what has arrived; false when the deadline passed or the peer closed with nothing new.
    private func fill(until deadline: Date) throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while Date() < deadline {
            let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                received += chunk[0 ..< count]
                return true
            }
            if count == 0 {
                peerClosed = true
                return false
            }
            if errno == ECONNRESET {
                peerClosed = true
                return false
            }
            guard errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR else {
                throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
            }
        }
        return false
    }

    private func write(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EPIPE) }
            offset += sent
        }
    }

    private func bigEndianBytes(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
    }

    struct HandshakeFailure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
