import Foundation
import Glibc
import NetplayService
import NetplayTestSupport
import NetplayWire
import Testing

/// A stranger speaking ZMTP over a raw TCP socket: it greets (NULL mechanism), says READY as a
/// DEALER, then sends frames marked "more" and never the last one. libzmq keeps such a message
/// whole until it ends, unseen by the service, with no limit (`ZMQ_MAXMSGSIZE` caps one frame).
final class UnfinishedMessageSender {
    private let fd: Int32

    init(port: Int, as type: String = "DEALER") throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw HarnessError("connect to \(port): errno \(errno)") }
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let greeting: [UInt8] = [0xFF] + [UInt8](repeating: 0, count: 8) + [0x7F, 3, 0]
            + Array("NULL".utf8) + [UInt8](repeating: 0, count: 16) + [0] + [UInt8](repeating: 0, count: 31)
        guard send(greeting) else { throw HarnessError("greeting not sent") }
        var theirs = [UInt8](repeating: 0, count: 64), got = 0
        while got < 64 {
            let read = theirs.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + got, 64 - got, 0) }
            guard read > 0 else { throw HarnessError("no greeting back") }
            got += read
        }
        let name = Array("Socket-Type".utf8), type = Array(type.utf8)
        let body = [5] + Array("READY".utf8) + [UInt8(name.count)] + name + [0, 0, 0, UInt8(type.count)] + type
        guard send([0x04, UInt8(body.count)] + body) else { throw HarnessError("READY not sent") }
    }

    deinit { close(fd) }

    /// Sends `frames` frames of `size` bytes, each marked "more"; how many went out before the
    /// service closed the connection.
    func sendUnfinished(frames: Int, size: Int = 1 << 20) -> Int {
        var header: [UInt8] = [0x03]  // MORE | LONG
        for shift in stride(from: 56, through: 0, by: -8) { header.append(UInt8(truncatingIfNeeded: UInt64(size) >> UInt64(shift))) }
        let frame = header + [UInt8](repeating: 0x5A, count: size)
        for sent in 0 ..< frames where !send(frame) { return sent }
        return frames
    }

    /// Whether the service closed the connection within `seconds`.
    func closedByPeer(within seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        var buffer = [UInt8](repeating: 0, count: 256)
        while Date() < deadline {
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 100) > 0 else { continue }
            if buffer.withUnsafeMutableBytes({ recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }) <= 0 { return true }
        }
        return false
    }

    private func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { return false }
            offset += sent
        }
        return true
    }
}

/// Multipart messages that never end, against a real service: each connection may hold at most
/// 64 MiB that never became a message, all of them 256 MiB; beyond, the connection (the largest
/// first) is shut down, libzmq frees what it held, and the service answers as before. Without
/// the guard one connection grew netplay-discovery by 1.5 GB in seconds, and the memory stayed.
/// Discovery's public events endpoint (a PUB, whose subscribers' messages the service never
/// reads) is guarded the same way.
@Suite("Attack: multipart messages that never end", .serialized, .ownThread)
struct UnfinishedMessageFloodTests {
    @Test(.timeLimit(.minutes(2)))
    func aConnectionHoldingAnUnfinishedMessageIsCutAndItsMemoryFreed() throws {
        let port = TestPorts.free(), eventsPort = TestPorts.free()
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("netplay-unfinished-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let discovery = try ServiceProcess("netplay-discovery", [
            "--endpoint", "tcp://127.0.0.1:\(port)", "--events", "tcp://127.0.0.1:\(eventsPort)", "--telemetry", "none",
            "--data-dir", root + "/discovery-0",
            "--control-endpoint", "none", "--beacon-port", "0", "--retroarch-port", "0",
        ])
        defer { discovery.kill9() }
        let client = try BlockingClient(endpoint: "tcp://127.0.0.1:\(port)", timeout: 2)
        #expect(eventually(within: 15) { (try? client.request(.healthRequest(HealthRequest()))) != nil }, "\(discovery.log)")
        let pid = discovery.pid
        let before = StateTransferFloodTests.residentBytes(pid)

        // One connection, a gigabyte of one message: cut on the way.
        let flooder = try UnfinishedMessageSender(port: port)
        let sent = flooder.sendUnfinished(frames: 1_024)
        #expect(sent < 1_024 || flooder.closedByPeer(within: 2), "a 1 GiB unfinished message was taken whole")
        #expect(eventually(within: 3) { StateTransferFloodTests.residentBytes(pid) < before + (160 << 20) },
                "resident \(StateTransferFloodTests.residentBytes(pid) >> 20) MiB after the cut, \(before >> 20) MiB before")

        // Eight connections of 40 MiB each, under the per-connection limit: over 256 MiB in all,
        // so the largest are cut until the rest fit.
        var crowd: [UnfinishedMessageSender] = []
        for _ in 0 ..< 8 {
            let sender = try UnfinishedMessageSender(port: port)
            #expect(sender.sendUnfinished(frames: 40) == 40)
            crowd.append(sender)
        }
        let cut = crowd.filter { $0.closedByPeer(within: 1) }.count
        #expect(cut >= 2 && cut < 8, "\(cut) of 8 connections holding 40 MiB each were cut")
        #expect(StateTransferFloodTests.residentBytes(pid) < before + (400 << 20),
                "resident \(StateTransferFloodTests.residentBytes(pid) >> 20) MiB")

        // A subscriber's unfinished message to the events endpoint.
        let subscriber = try UnfinishedMessageSender(port: eventsPort, as: "SUB")
        let subscriberSent = subscriber.sendUnfinished(frames: 1_024)
        #expect(subscriberSent < 1_024 || subscriber.closedByPeer(within: 2), "the PUB took a 1 GiB unfinished message whole")

        // The service answers, and a request of a whole megabyte still goes through.
        #expect((try? client.request(.healthRequest(HealthRequest()))) != nil)
        let big = try BlockingClient(endpoint: "tcp://127.0.0.1:\(port)", timeout: 5)
        var filter = RoomFilter()
        filter.gameName = String(repeating: "g", count: 1 << 20)
        _ = try? big.request(.listRoomsRequest(ListRoomsRequest(filter: filter)))
        #expect((try? big.request(.healthRequest(HealthRequest()))) != nil, "a client sending a 1 MiB request was cut")
        #expect(discovery.log.contains("connection cut"), "\(discovery.log.suffix(2_000))")
        #expect(discovery.process.isRunning)
    }
}
