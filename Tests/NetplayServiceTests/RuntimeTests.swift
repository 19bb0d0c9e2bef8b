import Foundation
import Logging
import NetplayTestSupport
import NetplayWire
import Synchronization
import Testing
import ZeroMQ
@testable import NetplayService

/// A service exercising every runtime path: replies, typed errors, deferred replies through a
/// timer, events, and a ready flag that flips.
final class ProbeService: Service {
    /// The thread that handled the room lookup of each room id (tests compare it with other
    /// threads). Keyed, because the suite's tests run their probes at the same time.
    static let handlerThreads = Mutex<[String: pthread_t]>([:])
    var handled = 0
    var ready = true

    func start(runtime: ServiceRuntime) throws {
        runtime.metrics.counter("netplay_probe_started_total", help: "Probe starts.").increment()
    }

    func handle(_ request: Request, runtime: ServiceRuntime) throws(ServiceError) -> HandlerOutcome {
        handled += 1
        switch request.body {
        case .getRoomRequest(let get):
            ProbeService.handlerThreads.withLock { $0[get.roomId] = pthread_self() }
            if get.roomId == "missing" { throw ServiceError(.notFound, "No room 'missing'.") }
            return .reply(.getRoomResponse(GetRoomResponse(room: Room(roomId: get.roomId))))
        case .listRoomsRequest:
            runtime.after(seconds: 0.05) { runtime in
                runtime.reply(to: request, with: .listRoomsResponse(ListRoomsResponse(rooms: [Room(roomId: "later")])))
            }
            return .deferred
        case .withdrawRoomRequest(let withdraw):
            runtime.emit(topic: "rooms.removed", .roomRemoved(RoomRemoved(roomId: withdraw.roomId, reason: .withdrawn)),
                         message: "withdrawn")
            return .reply(.withdrawRoomResponse(WithdrawRoomResponse(roomId: withdraw.roomId, removed: true)))
        case .leaveSessionRequest(let leave):
            // A public request that emits an event (the tests' trigger without credentials).
            runtime.emit(topic: "rooms.removed", .roomRemoved(RoomRemoved(roomId: leave.sessionId, reason: .withdrawn)),
                         message: "withdrawn")
            return .reply(.ack(Ack()))
        case .lanBeacon:
            return .none
        default:
            throw ServiceError(.unknownRequest, "probe does not handle \(request.body.name)")
        }
    }

    var isReady: Bool { ready }
    func introspect(section: String) -> JSONValue { ["handled": .number(handled), "section": .string(section)] }
}

/// A raw-frame service that logs the runtime's read batches around the frames it takes
/// (frames starting with 0xEE; everything else goes to the generic path).
final class BatchProbeService: RawFrameService {
    /// What the runtime did, in order: "begin", "frame", "end".
    final class Log: Sendable {
        let entries = Mutex<[String]>([])
        func append(_ entry: String) { entries.withLock { $0.append(entry) } }
        var snapshot: [String] { entries.withLock { $0 } }
    }

    let log: Log

    init(log: Log) { self.log = log }

    func start(runtime: ServiceRuntime) throws {}
    func handle(_ request: Request, runtime: ServiceRuntime) throws(ServiceError) -> HandlerOutcome { .none }

    func handleRawFrame(_ frame: UnsafeRawBufferPointer, from peer: PeerAddress, runtime: ServiceRuntime) -> Bool {
        guard frame.first == 0xEE else { return false }
        log.append("frame")
        return true
    }

    func readBatchWillBegin(runtime: ServiceRuntime) { log.append("begin") }
    func readBatchDidEnd(runtime: ServiceRuntime) { log.append("end") }
}

/// A probe service in-process; with `keys`, it has a control endpoint admitting that store's keys.
func startProbe(curve: CurveKeyPair? = nil, telemetry: String? = nil, supervisor: String? = nil,
                metricsInterval: Double = 5, keys: TestKeys? = nil) throws -> RunningService {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("netplay-probe-\(UUID().uuidString)")
    var configuration = ServiceConfiguration(
        kind: "probe", instance: "probe-1", endpoint: "tcp://127.0.0.1:*", events: "tcp://127.0.0.1:*",
        telemetry: telemetry, supervisor: supervisor, logLevel: .critical,
        dataDirectory: root.appendingPathComponent("probe-1"),
        metricsInterval: metricsInterval, curve: curve)
    configuration.heartbeatInterval = 0.1
    if let keys {
        configuration.trustStore = keys.store.directory
        configuration.control = "tcp://127.0.0.1:*"
    }
    return try ServiceHost.start(configuration: configuration) { ProbeService() }
}

/// A trust store of its own for one test.
func probeKeys() -> TestKeys {
    TestKeys(directory: FileManager.default.temporaryDirectory.appendingPathComponent("netplay-keys-\(UUID().uuidString)"))
}

@Suite("Service runtime over real tcp sockets", .ownThread)
struct RuntimeTests {
    @Test func answersHealthIntrospectAndPing() throws {
        let keys = probeKeys()
        let service = try startProbe(keys: keys)
        defer { service.stop() }
        // The public endpoint: who and whether ready, nothing more; no state dumps.
        let anyone = try BlockingClient(endpoint: service.endpoint)
        guard case .healthResponse(let minimal) = try anyone.request(.healthRequest(HealthRequest())) else {
            Issue.record("no health response"); return
        }
        #expect(minimal.service == "probe" && minimal.ready && minimal.pid == 0 && minimal.details.isEmpty)
        #expect(throws: ClientError.self) { try anyone.request(.introspectRequest(IntrospectRequest())) }
        // The operator, on the control endpoint, sees everything.
        let client = try keys.operatorClient(instance: "probe-1")
        guard case .healthResponse(let health) = try client.request(.healthRequest(HealthRequest())) else {
            Issue.record("no health response"); return
        }
        #expect(health.service == "probe" && health.instance == "probe-1" && health.ready)
        #expect(health.pid == UInt32(getpid()) && health.version == NetplayVersion.current)
        let details = Dictionary(health.details.map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first })
        #expect(details["endpoint"] == service.endpoint && details["data_dir"]?.contains("netplay-probe-") == true, "\(details)")
        #expect(details["supervisor"] == "none" && details["telemetry"] == "off", "\(details)")
        guard case .introspectResponse(let dump) = try client.request(.introspectRequest(IntrospectRequest(section: "all"))) else {
            Issue.record("no introspect response"); return
        }
        let json = try #require(try JSONSerialization.jsonObject(with: Data(dump.json.utf8)) as? [String: Any])
        #expect(json["service"] as? String == "probe")
        #expect((json["state"] as? [String: Any])?["section"] as? String == "all")
        guard case .pong(let pong) = try client.request(.ping(Ping(nonce: 77, sentAtUs: 5))) else {
            Issue.record("no pong"); return
        }
        #expect(pong.nonce == 77 && pong.echoSentAtUs == 5)
    }

    @Test func handlerErrorsAndUnknownRequestsBecomeErrorReplies() throws {
        let keys = probeKeys()
        let service = try startProbe(keys: keys)
        defer { service.stop() }
        let client = try keys.operatorClient(instance: "probe-1")
        #expect(throws: ClientError.remote(ErrorReply(code: .notFound, message: "No room 'missing'."))) {
            try client.request(.getRoomRequest(GetRoomRequest(roomId: "missing")))
        }
        do {
            _ = try client.request(.stopClusterRequest(StopClusterRequest()))
            Issue.record("expected an error")
        } catch .remote(let reply) {
            #expect(reply.code == .unknownRequest)
        }
        // On the public endpoint an operator verb is refused before the service sees it.
        let anyone = try BlockingClient(endpoint: service.endpoint)
        #expect(throws: ClientError.remote(ErrorReply(code: .permissionDenied, message:
            "StopClusterRequest belongs to the operator plane: send it to the control endpoint with a cluster or operator key (docs/security.md)."))) {
            try anyone.request(.stopClusterRequest(StopClusterRequest()))
        }
        // Still serving afterwards.
        #expect(try client.request(.getRoomRequest(GetRoomRequest(roomId: "r1"))) == .getRoomResponse(GetRoomResponse(room: Room(roomId: "r1"))))
    }

    @Test func malformedFramesGetErrorRepliesAndTheServiceKeepsServing() throws {
        let keys = probeKeys()
        let service = try startProbe(keys: keys)
        defer { service.stop() }
        let client = try BlockingClient(endpoint: service.endpoint)
        let cases: [([UInt8], ErrorCode)] = [
            ([0xFF, 0xFF, 0xFF, 0xFF], .malformed),                 // not protobuf
            ([0x08, 0x2A], .malformed),                             // request id 42, no body
            ([0x08, 0x2B, 0xFA, 0x3F, 0x00], .unknownRequest),      // field 1023: unknown body
            (Array(repeating: 0x41, count: 2 * 1024 * 1024), .malformed), // oversized: dropped by ZMQ_MAXMSGSIZE
        ]
        for (frame, code) in cases.dropLast() {
            try client.sendRaw(frame)
            let reply = try Envelope(decoding: try client.receiveRaw())
            guard case .error(let error) = reply.body else { Issue.record("expected Error for \(frame.prefix(4))"); continue }
            #expect(error.code == code, "\(error)")
            if frame.starts(with: [0x08, 0x2A]) { #expect(reply.requestId == 42) }
        }
        // A three-frame message that is not [delimiter, payload].
        try client.sendRawMultipart([[1], [2], [3]])
        let multipart = try Envelope(decoding: try client.receiveRaw())
        #expect(multipart.body.name == "Error")
        // An oversized frame makes libzmq drop that connection; the service itself goes on.
        let abuser = try BlockingClient(endpoint: service.endpoint, timeout: 0.3)
        try abuser.sendRaw(cases.last!.0)
        #expect(throws: ClientError.self) { try abuser.receiveRaw() }
        guard case .healthResponse = try client.request(.healthRequest(HealthRequest())) else {
            Issue.record("service stopped serving"); return
        }
        let operatorClient = try keys.operatorClient(instance: "probe-1")
        guard case .introspectResponse(let dump) = try operatorClient.request(.introspectRequest(IntrospectRequest())) else { return }
        #expect(dump.json.contains("\"malformed_frames_total\":4"))
    }

    @Test func reqSocketsGetDelimitedReplies() throws {
        let service = try startProbe()
        defer { service.stop() }
        let req = try Context.shared.socket(.req)
        try req.set(.receiveTimeout(milliseconds: 2000))
        try req.connect(service.endpoint)
        try req.send(try Envelope(requestId: 9, body: .healthRequest(HealthRequest())).encoded())
        let reply = try Envelope(decoding: try req.receive())
        #expect(reply.requestId == 9)
        #expect(reply.body.name == "HealthResponse")
    }

    @Test func deferredRepliesArriveLater() throws {
        let service = try startProbe()
        defer { service.stop() }
        let client = try BlockingClient(endpoint: service.endpoint)
        let reply = try client.request(.listRoomsRequest(ListRoomsRequest()))
        #expect(reply == .listRoomsResponse(ListRoomsResponse(rooms: [Room(roomId: "later")])))
    }

    @Test func oneWayMessagesGetNoReply() throws {
        let service = try startProbe()
        defer { service.stop() }
        let client = try BlockingClient(endpoint: service.endpoint, timeout: 0.2)
        #expect(throws: ClientError.timeout(endpoint: service.endpoint, seconds: 0.2)) {
            try client.request(.lanBeacon(LanBeacon(beaconId: "b1")))
        }
    }

    @Test func eventsArePublishedWithTopics() throws {
        let service = try startProbe()
        defer { service.stop() }
        let subscriber = try EventSubscriber(endpoint: service.eventsEndpoint!, prefixes: ["rooms."])
        let client = try BlockingClient(endpoint: service.endpoint)
        var event: ReceivedEvent?
        // PUB/SUB subscriptions propagate asynchronously: retry until the first event arrives.
        for attempt in 0..<50 where event == nil {
            _ = try client.request(.leaveSessionRequest(LeaveSessionRequest(sessionId: "r\(attempt)", participantId: "p", participantToken: [1])))
            event = try subscriber.next(timeout: 100)
        }
        let received = try #require(event)
        #expect(received.topic == "rooms.removed")
        guard case .success(let envelope) = received.envelope, case .roomRemoved(let removed) = envelope.body else {
            Issue.record("wrong event body"); return
        }
        #expect(removed.reason == .withdrawn)
    }

    @Test func metricsAndEventsArePushedToTelemetry() throws {
        let pull = try Context.shared.socket(.pull)
        try pull.bind("tcp://127.0.0.1:*")
        try pull.set(.receiveTimeout(milliseconds: 3000))
        let service = try startProbe(telemetry: try pull.lastEndpoint, metricsInterval: 0.1)
        defer { service.stop() }
        var snapshot: MetricsSnapshot?
        for _ in 0..<20 where snapshot == nil {
            if case .metricsSnapshot(let received) = try Envelope(decoding: try pull.receive()).body { snapshot = received }
        }
        let metrics = try #require(snapshot)
        #expect(metrics.service == "probe" && metrics.instance == "probe-1")
        let names = Set(metrics.metrics.map(\.name))
        #expect(names.isSuperset(of: ["netplay_requests_total", "netplay_uptime_seconds", "netplay_probe_started_total",
                                      "netplay_request_duration_seconds"]))
        let client = try BlockingClient(endpoint: service.endpoint)
        _ = try client.request(.leaveSessionRequest(LeaveSessionRequest(sessionId: "gone", participantId: "p", participantToken: [1])))
        var record: EventRecord?
        for _ in 0..<50 where record == nil {
            if case .eventRecord(let received) = try Envelope(decoding: try pull.receive()).body { record = received }
        }
        #expect(record?.topic == "rooms.removed" && record?.service == "probe")
    }

    @Test func heartbeatsReachTheSupervisor() throws {
        let router = try Context.shared.socket(.router)
        try router.bind("tcp://127.0.0.1:*")
        try router.set(.receiveTimeout(milliseconds: 3000))
        let service = try startProbe(supervisor: try router.lastEndpoint)
        var beats: [ServiceHeartbeat] = []
        while beats.count < 3 {
            let frames = try router.receiveMultipart()
            if case .serviceHeartbeat(let beat) = try Envelope(decoding: frames.last!).body { beats.append(beat) }
        }
        // Consecutive sequence numbers (the very first beat may precede the connection).
        #expect(zip(beats, beats.dropFirst()).allSatisfy { $1.sequence == $0.sequence + 1 })
        #expect(beats.allSatisfy { $0.ready && $0.instance == "probe-1" && $0.pid == UInt32(getpid()) && !$0.draining })
        service.stop()
        // The draining beat was sent before the sockets closed; it may still be in flight.
        var sawDraining = false
        try router.set(.receiveTimeout(milliseconds: 500))
        while !sawDraining, let frames = try? router.receiveMultipart() {
            if case .serviceHeartbeat(let beat) = try Envelope(decoding: frames.last!).body, beat.draining { sawDraining = true }
        }
        #expect(sawDraining)
    }

    @Test func workEnqueuedFromOtherThreadsRunsOnTheReactor() throws {
        let service = try startProbe()
        defer { service.stop() }
        // The reactor thread is the one that handles requests: learn its id through a request.
        let client = try BlockingClient(endpoint: service.endpoint)
        _ = try client.request(.getRoomRequest(GetRoomRequest(roomId: "thread-probe")))
        let reactorThread = try #require(ProbeService.handlerThreads.withLock { $0["thread-probe"] })
        let seen = Mutex<(enqueuer: pthread_t, worker: pthread_t)?>(nil)
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            let enqueuer = pthread_self()
            service.handle.enqueue { _ in
                seen.withLock { $0 = (enqueuer, pthread_self()) }
                done.signal()
            }
        }
        #expect(done.wait(timeout: .now() + 2) == .success)
        let threads = try #require(seen.withLock { $0 })
        #expect(pthread_equal(threads.worker, reactorThread) != 0)
        #expect(pthread_equal(threads.worker, threads.enqueuer) == 0)
    }

    @Test func rawFramesAreHandledWithinReadBatches() throws {
        let log = BatchProbeService.Log()
        let configuration = ServiceConfiguration(
            kind: "probe", instance: "batch-probe", endpoint: "tcp://127.0.0.1:*", events: nil, telemetry: nil,
            supervisor: nil, logLevel: .critical,
            dataDirectory: FileManager.default.temporaryDirectory.appendingPathComponent("netplay-probe-\(UUID().uuidString)"))
        let service = try ServiceHost.start(configuration: configuration) { BatchProbeService(log: log) }
        defer { service.stop() }
        let dealer = try Context.shared.socket(.dealer)
        defer { dealer.close() }
        try dealer.connect(service.endpoint)
        for index in 0 ..< 200 { _ = try dealer.send([0xEE, UInt8(index)]) }
        #expect(eventually(within: 5) { log.snapshot.filter { $0 == "frame" }.count == 200 && log.snapshot.last == "end" })
        // Every frame lies within a batch, and batches neither nest nor stay open.
        var open = false
        for entry in log.snapshot {
            switch entry {
            case "begin": #expect(!open); open = true
            case "end": #expect(open); open = false
            default: #expect(open, "a frame handled outside a read batch")
            }
        }
        #expect(!open)
    }

    /// A service whose own start fails (a RetroArch port in use, say) fails `ServiceHost.start`
    /// with the reason, and its endpoint is free again: the caller used to get a running
    /// service whose thread had already exited.
    @Test func aServiceWhoseStartFailsIsNoRunningService() throws {
        final class FailingStart: Service {
            struct Refused: Error, CustomStringConvertible { var description: String { "port 55435 in use" } }
            func start(runtime: ServiceRuntime) throws { throw Refused() }
            func handle(_ request: Request, runtime: ServiceRuntime) throws(ServiceError) -> HandlerOutcome { .none }
        }
        let port = TestPorts.free()
        let configuration = ServiceConfiguration(kind: "probe", instance: "probe-failing", endpoint: "tcp://127.0.0.1:\(port)",
                                                 dataDirectory: FileManager.default.temporaryDirectory)
        do {
            let running = try ServiceHost.start(configuration: configuration) { FailingStart() }
            running.stop()
            Issue.record("a service whose start failed was reported running")
        } catch let error as RuntimeStartError {
            #expect(error.description.contains("port 55435 in use"), "\(error)")
        }
        // Free again: ZeroMQ's I/O thread closes the listening socket just after the failed
        // runtime closed it (a rebind at once can still find it in use, once in many CI runs);
        // a runtime that kept its sockets would hold the port for good.
        var again: RunningService?
        #expect(eventually(within: 3) {
            again = try? ServiceHost.start(configuration: configuration) { ProbeService() }
            return again != nil
        }, "the failed service's endpoint stayed taken")
        again?.stop()
    }

    @Test func bindingATakenEndpointFailsWithAReason() throws {
        let first = try startProbe()
        defer { first.stop() }
        let configuration = ServiceConfiguration(kind: "probe", instance: "probe-2", endpoint: first.endpoint,
                                                 dataDirectory: FileManager.default.temporaryDirectory)
        do {
            _ = try ServiceHost.start(configuration: configuration) { ProbeService() }
            Issue.record("expected address in use")
        } catch let error as RuntimeStartError {
            #expect(error.description.contains("address already in use"), "\(error)")
        }
    }

    @Test(.enabled(if: Context.has("curve")))
    func curveEncryptedRequestsWorkAndAWrongKeyGetsNothing() throws {
        let keys = try CurveKeyPair.generate()
        let service = try startProbe(curve: keys)
        defer { service.stop() }
        let good = try BlockingClient(endpoint: service.endpoint, serverKey: keys.publicKey)
        guard case .healthResponse(let health) = try good.request(.healthRequest(HealthRequest())) else {
            Issue.record("no health over CURVE"); return
        }
        #expect(health.ready)
        let wrong = try BlockingClient(endpoint: service.endpoint, timeout: 0.5, serverKey: try CurveKeyPair.generate().publicKey)
        #expect(throws: ClientError.timeout(endpoint: service.endpoint, seconds: 0.5)) {
            try wrong.request(.healthRequest(HealthRequest()))
        }
        let plain = try BlockingClient(endpoint: service.endpoint, timeout: 0.5)
        #expect(throws: ClientError.timeout(endpoint: service.endpoint, seconds: 0.5)) {
            try plain.request(.healthRequest(HealthRequest()))
        }
    }

    /// libzmq drops a plain client's connection to a CurveZMQ server for good once the handshake
    /// fails; a request sent after that has nowhere to queue and used to block in `zmq_send`
    /// forever (a keyless netplay-peer hung past its --timeout now and then).
    @Test(.enabled(if: Context.has("curve")))
    func aRequestAfterAFailedHandshakeTimesOutInsteadOfBlocking() throws {
        let service = try startProbe(curve: try CurveKeyPair.generate())
        defer { service.stop() }
        let plain = try BlockingClient(endpoint: service.endpoint, timeout: 0.5)
        usleep(500_000)  // the handshake has failed and the connection is gone
        let started = Date()
        for _ in 0 ..< 2 {
            #expect(throws: ClientError.timeout(endpoint: service.endpoint, seconds: 0.5)) {
                try plain.request(.healthRequest(HealthRequest()))
            }
        }
        #expect(Date().timeIntervalSince(started) < 5)
    }
}
