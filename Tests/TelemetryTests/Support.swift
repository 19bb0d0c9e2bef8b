import Foundation
import NetplayService
import NetplayTestSupport
import NetplayWire
import ZeroMQ

/// Pushes envelopes to a telemetry ingest endpoint, like a service's runtime does.
final class Pusher {
    let socket: Socket
    init(_ endpoint: String) throws {
        socket = try Context.shared.socket(.push)
        try socket.set(.linger(milliseconds: 1000))
        try socket.connect(endpoint)
    }
    deinit { socket.close() }
    func push(_ body: Envelope.Body) throws {
        try socket.send(try Envelope(body: body).encoded())
    }
}

/// A netplay-telemetry process on free ports.
final class TelemetryProcess {
    let endpoint = TestPorts.endpoint()
    let events = TestPorts.endpoint()
    let ingest = TestPorts.endpoint()
    let http = "127.0.0.1:\(TestPorts.free())"
    let process: ServiceProcess
    let data = FileManager.default.temporaryDirectory.appendingPathComponent("netplay-tel-\(UUID().uuidString)")

    init(_ extra: [String] = [], environment: [String: String] = [:]) throws {
        process = try ServiceProcess("netplay-telemetry",
                                     ["--endpoint", endpoint, "--events", events, "--ingest", ingest, "--http", http,
                                      "--discovery", "none", "--instance", "telemetry-test", "--data-dir", data.path] + extra,
                                     environment: environment)
    }

    deinit {
        process.kill9()
        try? FileManager.default.removeItem(at: data)
    }

    func waitUp() -> Bool { eventually(within: 10) { httpGet(http, "/healthz")?.status == 200 } }
}

