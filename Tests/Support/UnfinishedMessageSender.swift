import Foundation
import Glibc

/// A stranger speaking ZMTP over a raw TCP socket: it greets (NULL mechanism), says READY as a
/// DEALER, then sends frames marked "more" and never the last one (libzmq keeps such a message
/// whole until it ends, unseen by the service, with no limit: `ZMQ_MAXMSGSIZE` caps one frame),
/// or whole requests whose replies it never reads.
public final class UnfinishedMessageSender {
    private let fd: Int32

    /// Connects to 127.0.0.1:`port` and greets as a `type` socket.
    public init(port: Int, as type: String = "DEALER") throws {
        fd = try loopbackTCPConnection(port: port)
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
    public func sendUnfinished(frames: Int, size: Int = 1 << 20) -> Int {
        var frame: [UInt8]
        if size < 256 {
            frame = [0x01, UInt8(size)]  // MORE, short
        } else {
            frame = [0x03]  // MORE | LONG
            for shift in stride(from: 56, through: 0, by: -8) { frame.append(UInt8(truncatingIfNeeded: UInt64(size) >> UInt64(shift))) }
        }
        frame += [UInt8](repeating: 0x5A, count: size)
        // Small frames go out a megabyte at a time.
        let perSend = max(1, (1 << 20) / frame.count)
        let batch = [UInt8]((0 ..< perSend).lazy.flatMap { _ in frame })
        var sent = 0
        while sent < frames {
            let count = min(perSend, frames - sent)
            guard send(count == perSend ? batch : Array(batch.prefix(count * frame.count))) else { return sent }
            sent += count
        }
        return frames
    }

    /// Sends `payload` as `count` whole one-frame messages (a request each) and reads nothing:
    /// a peer that asks and never takes its replies. How many went out before the service closed
    /// the connection.
    public func sendWhole(_ payload: [UInt8], count: Int) -> Int {
        var frame: [UInt8] = payload.count < 256 ? [0x00, UInt8(payload.count)] : [0x02]
        if payload.count >= 256 {
            for shift in stride(from: 56, through: 0, by: -8) { frame.append(UInt8(truncatingIfNeeded: UInt64(payload.count) >> UInt64(shift))) }
        }
        frame += payload
        for sent in 0 ..< count where !send(frame) { return sent }
        return count
    }

    /// Whether the service closed the connection within `seconds`.
    public func closedByPeer(within seconds: Double) -> Bool {
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

/// A blocking TCP socket connected to 127.0.0.1:`port`.
public func loopbackTCPConnection(port: Int) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else {
        let failure = errno
        close(fd)
        throw HarnessError("connect to \(port): errno \(failure)")
    }
    return fd
}
