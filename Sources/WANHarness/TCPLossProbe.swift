import Foundation
#if canImport(Glibc)
import Glibc
#endif
import IPv4Sockets

/// Measures what TCP does to a thin, latency-sensitive stream (netplay inputs: small messages at
/// a fixed rate) on a ``WANPeer``'s path: a sender in the peer's namespace sends `rateHz`
/// messages a second to a receiver on the lab's service address, over one or more TCP
/// connections carrying the same messages (the receiver keeps the first copy). Each message's
/// one-way latency is taken from the shared monotonic clock; its *extra* delay is that latency
/// minus the smallest one seen.
public enum TCPLossProbe {
    /// How the sender's connections are set up.
    public struct Options: Sendable, CustomStringConvertible {
        /// Parallel connections, each carrying every message.
        public var connections: Int = 1
        /// TCP_NODELAY (ZeroMQ always sets it).
        public var noDelay = true
        /// TCP_THIN_LINEAR_TIMEOUTS: no exponential back-off while the stream is thin.
        public var thinLinearTimeouts = false
        /// TCP_RTO_MIN_US on the sender (Linux 6.15+), in milliseconds; nil keeps the 200 ms default.
        public var rtoMinMs: Int?
        /// Messages per second.
        public var rateHz: Double = 60
        /// Bytes per message (at least 12: sequence number and send time).
        public var messageBytes = 40
        /// SO_SNDBUF of each sender connection, bytes; nil keeps the kernel's (autotuned) size.
        public var sendBufferBytes: Int?
        /// Creates options; see each property.
        public init(connections: Int = 1, noDelay: Bool = true, thinLinearTimeouts: Bool = false, rtoMinMs: Int? = nil) {
            self.connections = connections
            self.noDelay = noDelay
            self.thinLinearTimeouts = thinLinearTimeouts
            self.rtoMinMs = rtoMinMs
        }
        /// Why these options cannot be run for `seconds`, or nil when they can.
        public func problem(seconds: Double) -> String? {
            if !(1...1_000).contains(connections) { return "connections must be 1 to 1000, got \(connections)" }
            if !(12...65_536).contains(messageBytes) { return "messageBytes must be 12 to 65536, got \(messageBytes)" }
            if !(rateHz > 0 && rateHz <= 100_000) { return "rateHz must be above 0 and at most 100000, got \(rateHz)" }
            if !(seconds > 0 && seconds <= 86_400) { return "seconds must be above 0 and at most 86400, got \(seconds)" }
            if !(Double(seconds) * rateHz <= 10_000_000) { return "seconds × rateHz must be at most 10,000,000 messages" }
            if let rtoMinMs, !(1...2_000_000).contains(rtoMinMs) { return "rtoMinMs must be 1 to 2000000, got \(rtoMinMs)" }
            if let sendBufferBytes, !(1...(64 << 20)).contains(sendBufferBytes) {
                return "sendBufferBytes must be 1 to 67108864, got \(sendBufferBytes)"
            }
            return nil
        }

        /// A short label, e.g. "2 conn, nodelay, thin".
        public var description: String {
            var parts = ["\(connections) conn", noDelay ? "nodelay" : "nagle"]
            if thinLinearTimeouts { parts.append("thin-linear") }
            if let rtoMinMs { parts.append("rto_min \(rtoMinMs) ms") }
            return parts.joined(separator: ", ")
        }
    }

    /// What one run measured; delays in milliseconds.
    public struct Result: Sendable, CustomStringConvertible {
        /// Messages sent.
        public var sent: Int
        /// Messages received (first copies).
        public var received: Int
        /// The smallest one-way latency seen.
        public var minimumLatencyMs: Double
        /// Extra delay over the minimum: median, 99th percentile, maximum.
        public var p50Ms: Double, p99Ms: Double, maxMs: Double
        /// Messages more than 100 ms later than the minimum.
        public var lateOver100: Int
        /// One line: "sent 1800 received 1800 min 50.1 ms extra p50 4.9 p99 130.2 max 290.0 ms, >100 ms late: 31".
        public var description: String {
            String(format: "sent %d received %d min %.1f ms extra p50 %.1f p99 %.1f max %.1f ms, >100 ms late: %d",
                   sent, received, minimumLatencyMs, p50Ms, p99Ms, maxMs, lateOver100)
        }
    }

    /// Runs the probe for `seconds` from `peer` to `lab.serviceAddress`. Throws for options it
    /// cannot run (``Options/problem(seconds:)``) and when the path carries nothing.
    public static func run(lab: WANLab, peer: WANPeer, seconds: Double, options: Options = Options()) throws -> Result {
        if let problem = options.problem(seconds: seconds) { throw WANHarnessError("TCP loss probe: \(problem)") }
        let listener: Int32
        do {
            // Every connection is made before the first is accepted: the queue holds them all.
            listener = try IPv4Socket.bound(.stream, host: lab.serviceAddress, port: 0,
                                            listenBacklog: Int32(max(8, options.connections))).descriptor
        } catch {
            throw WANHarnessError("cannot listen on \(lab.serviceAddress): \(error)")
        }
        defer { close(listener) }
        guard let address = IPv4Socket.localAddress(of: listener) else {
            throw WANHarnessError("getsockname: \(IPv4Socket.lastErrorText())")
        }

        // Connect from inside the peer's namespace.
        var senders: [Int32] = []
        defer { for fd in senders { close(fd) } }
        for _ in 0..<options.connections {
            let fd = try peer.withNamespace { socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
            guard fd >= 0 else { throw WANHarnessError("socket in \(peer.namespace): \(String(cString: strerror(errno)))") }
            senders.append(fd)
            var one: Int32 = 1
            if options.noDelay { setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(4)) }
            if options.thinLinearTimeouts {
                guard setsockopt(fd, Int32(IPPROTO_TCP), 16 /* TCP_THIN_LINEAR_TIMEOUTS */, &one, socklen_t(4)) == 0 else {
                    throw WANHarnessError("TCP_THIN_LINEAR_TIMEOUTS: \(String(cString: strerror(errno)))")
                }
            }
            if let bytes = options.sendBufferBytes {
                var size = Int32(bytes)
                guard setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(4)) == 0 else {
                    throw WANHarnessError("SO_SNDBUF: \(String(cString: strerror(errno)))")
                }
            }
            if let rtoMinMs = options.rtoMinMs {
                var microseconds = Int32(rtoMinMs * 1000)
                guard setsockopt(fd, Int32(IPPROTO_TCP), 45 /* TCP_RTO_MIN_US */, &microseconds, socklen_t(4)) == 0 else {
                    throw WANHarnessError("TCP_RTO_MIN_US is not supported by this kernel: \(String(cString: strerror(errno)))")
                }
            }
            let connected = IPv4Socket.withSocketAddress(address) { connect(fd, $0, $1) }
            guard connected == 0 else { throw WANHarnessError("connect to \(lab.serviceAddress): \(String(cString: strerror(errno)))") }
        }
        var receivers: [Int32] = []
        defer { for fd in receivers { close(fd) } }
        for _ in 0..<options.connections {
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else { throw WANHarnessError("accept: \(String(cString: strerror(errno)))") }
            receivers.append(fd)
        }

        let count = Int(seconds * options.rateHz)
        let period = UInt64(1e9 / options.rateHz)
        let size = options.messageBytes
        let sendFds = senders
        let sender = Thread {
            var message = [UInt8](repeating: 0, count: size)
            let start = monotonicNanoseconds() + 20_000_000
            for sequence in 0..<count {
                let due = start + UInt64(sequence) * period
                var wake = timespec(tv_sec: Int(due / 1_000_000_000), tv_nsec: Int(due % 1_000_000_000))
                while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &wake, nil) == EINTR {}
                var fields = (UInt32(sequence).littleEndian, monotonicNanoseconds().littleEndian)
                withUnsafeBytes(of: &fields.0) { message.replaceSubrange(0..<4, with: $0) }
                withUnsafeBytes(of: &fields.1) { message.replaceSubrange(4..<12, with: $0) }
                for fd in sendFds {
                    var offset = 0
                    while offset < size {
                        let n = message.withUnsafeBytes { send(fd, $0.baseAddress! + offset, size - offset, Int32(MSG_NOSIGNAL)) }
                        if n <= 0 { if errno == EINTR { continue }; break }
                        offset += n
                    }
                }
            }
            for fd in sendFds { shutdown(fd, Int32(SHUT_WR)) }
        }
        sender.start()

        // Receive: first copy of each sequence number wins.
        var latencies = [Double](repeating: -1, count: count)
        var buffers = [[UInt8]](repeating: [], count: receivers.count)
        var open = Set(receivers.indices)
        let deadline = monotonicNanoseconds() + UInt64((seconds + 10) * 1e9)
        var chunk = [UInt8](repeating: 0, count: 65536)
        while !open.isEmpty, monotonicNanoseconds() < deadline {
            var polls = receivers.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            if poll(&polls, nfds_t(polls.count), 200) <= 0 { continue }
            let now = monotonicNanoseconds()
            for index in receivers.indices where polls[index].revents != 0 && open.contains(index) {
                let n = chunk.withUnsafeMutableBytes { recv(receivers[index], $0.baseAddress, $0.count, 0) }
                if n <= 0 { open.remove(index); continue }
                buffers[index].append(contentsOf: chunk[0..<n])
                while buffers[index].count >= size {
                    let sequence = buffers[index].withUnsafeBytes { Int(UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self))) }
                    let sentAt = buffers[index].withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: 4, as: UInt64.self)) }
                    buffers[index].removeFirst(size)
                    if sequence < count, latencies[sequence] < 0 { latencies[sequence] = Double(now &- sentAt) / 1e6 }
                }
            }
        }
        // A sender still blocked in send() (a path that died: TCP retries for many minutes) is
        // woken rather than waited for.
        for fd in senders { shutdown(fd, Int32(SHUT_RDWR)) }
        while !sender.isFinished { usleep(10_000) }
        let seen = latencies.filter { $0 >= 0 }
        guard let minimum = seen.min() else { throw WANHarnessError("the probe received nothing") }
        let extra = seen.map { $0 - minimum }.sorted()
        func percentile(_ p: Double) -> Double { extra[min(extra.count - 1, Int(Double(extra.count - 1) * p))] }
        return Result(sent: count, received: seen.count, minimumLatencyMs: minimum, p50Ms: percentile(0.5),
                      p99Ms: percentile(0.99), maxMs: extra.last ?? 0, lateOver100: extra.filter { $0 > 100 }.count)
    }
}

/// CLOCK_MONOTONIC in nanoseconds (shared by every network namespace of the machine).
func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}
