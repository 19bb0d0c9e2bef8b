import Foundation
import NetplayService
import NetplayTestSupport
import NetplayWire
import ZeroMQ

/// Pushes envelopes to a telemetry ingest endpoint as cluster member `instance` would: a key of
/// its own in the telemetry's trust store (telemetry takes from each member only what it says
/// of itself).
final class Pusher {
    let socket: Socket
    /// A member `instance` of service kind `kind` (default: the instance's name without its
    /// replica number, as `sync` for `sync-0`): telemetry takes only what it says of itself.
    init(_ telemetry: TelemetryProcess, as instance: String, kind: String? = nil) throws {
        var derived = Substring(instance)
        if let dash = derived.lastIndex(of: "-"), !derived[derived.index(after: dash)...].isEmpty,
           derived[derived.index(after: dash)...].allSatisfy(\.isNumber) {
            derived = derived[..<dash]
        }
        socket = try telemetry.keys.telemetryPusher(to: telemetry.ingest, kind: kind ?? String(derived), instance: instance)
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
    /// The data root: telemetry's data directory, the samples' beside it, the trust store in keys/.
    let data = FileManager.default.temporaryDirectory.appendingPathComponent("netplay-tel-\(UUID().uuidString)")
    /// The trust store telemetry admits pushes from.
    let keys: TestKeys

    init(_ extra: [String] = [], environment: [String: String] = [:]) throws {
        keys = TestKeys(dataRoot: data.path)
        process = try ServiceProcess("netplay-telemetry",
                                     ["--endpoint", endpoint, "--events", events, "--ingest", ingest, "--http", http,
                                      "--discovery", "none", "--instance", "telemetry-test",
                                      "--data-dir", data.appendingPathComponent("telemetry-test").path] + extra,
                                     environment: environment)
        _ = try? keys.member("telemetry-test")  // pushers need its key
    }

    deinit {
        process.kill9()
        try? FileManager.default.removeItem(at: data)
    }

    func waitUp() -> Bool { eventually(within: 10) { httpGet(http, "/healthz")?.status == 200 } }
}

