import ArgumentParser
import Foundation
import Synchronization
import ZeroMQ

/// `netplay-bench zeromq`: the Swift binding's round-trip latency and one-way throughput for
/// small messages over tcp loopback, beside the same figures from a plain C program using libzmq
/// directly (Benchmarks/c/zmq_bench.c, built by `make bench`). Both use one thread per side.
struct ZeroMQBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "zeromq",
        abstract: "ZeroMQ binding latency and throughput versus plain C libzmq."
    )

    @Option(help: "Message size in bytes.") var size = 64
    @Option(help: "Round trips for the latency test.") var roundTrips = 50_000
    @Option(help: "Messages for the throughput test.") var messages = 3_000_000
    @Option(help: "Repetitions; the best run of each is reported.") var runs = 3
    @Option(help: "Path of the C baseline binary (built by `make bench`).") var cBench: String?

    func run() throws {
        var swiftLatency = Double.infinity, swiftThroughput = 0.0
        var cLatency = Double.infinity, cThroughput = 0.0
        for _ in 0..<runs {
            swiftLatency = min(swiftLatency, try Self.latency(size: size, count: roundTrips))
            swiftThroughput = max(swiftThroughput, try Self.throughput(size: size, count: messages))
            if let cBench {
                cLatency = min(cLatency, try Self.runC(cBench, ["lat", "\(size)", "\(roundTrips)"], key: "lat_us"))
                cThroughput = max(cThroughput, try Self.runC(cBench, ["thr", "\(size)", "\(messages)"], key: "thr_msgs"))
            }
        }
        print("ZeroMQ binding, \(size)-byte messages over tcp loopback (best of \(runs))")
        print(pad("figure", 28) + pad("Swift", 14) + pad("C libzmq", 14) + "target")
        let latencyVerdict = cBench == nil ? "-" : (swiftLatency - cLatency <= 10 ? "PASS" : "MISS")
        let throughputVerdict = cBench == nil ? "-" : (swiftThroughput >= 0.8 * cThroughput ? "PASS" : "MISS")
        print(pad("round trip (us)", 28) + pad(format(swiftLatency, 2), 14)
              + pad(cBench == nil ? "n/a" : format(cLatency, 2), 14)
              + "within 10 us of C: \(latencyVerdict)")
        print(pad("one-way (msg/s)", 28) + pad(format(swiftThroughput, 0), 14)
              + pad(cBench == nil ? "n/a" : format(cThroughput, 0), 14)
              + ">= 80% of C (\(cBench == nil ? "-" : format(100 * swiftThroughput / cThroughput, 1) + "%")): \(throughputVerdict)")
    }

    /// Mean round trip in microseconds: DEALER sends, a ROUTER echo thread replies.
    static func latency(size: Int, count: Int) throws -> Double {
        let endpoint = Mutex<String?>(nil)
        let ready = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        let total = count + 1  // one warm-up round trip
        Thread.detachNewThread {
            defer { done.signal() }
            do {
                let router = try Context.shared.socket(.router)
                try router.bind("tcp://127.0.0.1:*")
                let resolved = try router.lastEndpoint
                endpoint.withLock { $0 = resolved }
                ready.signal()
                var identity = [UInt8](repeating: 0, count: 256)
                var body = [UInt8](repeating: 0, count: max(size, 1))
                try identity.withUnsafeMutableBytes { id in
                    try body.withUnsafeMutableBytes { payload in
                        for _ in 0..<total {
                            let idCount = try router.receive(into: id)
                            let bodyCount = try router.receive(into: payload)
                            try router.send(UnsafeRawBufferPointer(rebasing: id[..<idCount]), flags: .more)
                            try router.send(UnsafeRawBufferPointer(rebasing: payload[..<bodyCount]))
                        }
                    }
                }
            } catch {
                ready.signal()
                FileHandle.standardError.write(Data("echo thread failed: \(error)\n".utf8))
            }
        }
        ready.wait()
        guard let target = endpoint.withLock({ $0 }) else { throw ValidationError("echo server failed to bind") }
        let dealer = try Context.shared.socket(.dealer)
        try dealer.connect(target)
        var buffer = [UInt8](repeating: 0, count: size)
        let elapsed = try buffer.withUnsafeMutableBytes { raw -> Double in
            let outgoing = UnsafeRawBufferPointer(raw)
            try dealer.send(outgoing)
            _ = try dealer.receive(into: raw)
            let start = DispatchTime.now().uptimeNanoseconds
            for _ in 0..<count {
                try dealer.send(outgoing)
                _ = try dealer.receive(into: raw)
            }
            return Double(DispatchTime.now().uptimeNanoseconds - start)
        }
        done.wait()
        return elapsed / 1_000 / Double(count)
    }

    /// Messages per second from a PUSH thread to a PULL socket.
    static func throughput(size: Int, count: Int) throws -> Double {
        let pull = try Context.shared.socket(.pull)
        try pull.bind("tcp://127.0.0.1:*")
        let target = try pull.lastEndpoint
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            defer { done.signal() }
            do {
                let push = try Context.shared.socket(.push)
                try push.connect(target)
                let payload = [UInt8](repeating: 0, count: size)
                try payload.withUnsafeBytes { raw in
                    for _ in 0..<count { try push.send(raw) }
                }
            } catch {
                FileHandle.standardError.write(Data("push thread failed: \(error)\n".utf8))
            }
        }
        var buffer = [UInt8](repeating: 0, count: size)
        let elapsed = try buffer.withUnsafeMutableBytes { raw -> Double in
            _ = try pull.receive(into: raw)
            let start = DispatchTime.now().uptimeNanoseconds
            for _ in 1..<count { _ = try pull.receive(into: raw) }
            return Double(DispatchTime.now().uptimeNanoseconds - start)
        }
        done.wait()
        return Double(count - 1) / (elapsed / 1e9)
    }

    /// Runs the C baseline and reads `key=value` from its output.
    static func runC(_ path: String, _ arguments: [String], key: String) throws -> Double {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0,
              let line = output.split(separator: "\n").first(where: { $0.hasPrefix(key + "=") }),
              let value = Double(line.dropFirst(key.count + 1)) else {
            throw ValidationError("C baseline \(path) \(arguments.joined(separator: " ")) failed: \(output)")
        }
        return value
    }
}

/// Left-aligns `text` in a column of `width` characters.
func pad(_ text: String, _ width: Int) -> String {
    text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
}

/// Formats `value` with `digits` decimals.
func format(_ value: Double, _ digits: Int) -> String {
    String(format: "%.\(digits)f", value)
}
