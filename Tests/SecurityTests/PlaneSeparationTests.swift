import Foundation
import NetplayService
import NetplayTestSupport
import NetplayWire
import Testing
import ZeroMQ

// A cluster whose services run with their planes on separate addresses
// plays a match end to end with every cluster-plane connection authenticated. Two network
// namespaces stand in for two hosts: the server host `a` (10.77.0.1) runs discovery, the
// coordinator and a relay with their public endpoints on the host's address and their control
// endpoints on its loopback; the players' host `b` (10.77.0.2) runs two netplay-peers. The
// services reach each other only through the trust store's keys and control endpoints; from `b`
// the control plane is out of reach, even with the operator's key, and the public endpoints refuse
// cluster requests.

/// The server host's ports: a public and a control port per service.
private enum Ports {
    static let discovery = (public: 7100, control: 7105)
    static let coordinator = (public: 7200, control: 7205)
    static let relay = (public: 7300, control: 7305)
}

private let serverAddress = "10.77.0.1"
private let clusterSecret = String(repeating: "5e", count: 32)

private func publicEndpoint(_ port: Int) -> String { "tcp://\(serverAddress):\(port)" }
private func controlEndpoint(_ port: Int) -> String { "tcp://127.0.0.1:\(port)" }

/// What a request from the other host got: the error code of the reply, "answered" for a
/// reply that was no error, or "no reply" within the timeout.
private enum Outcome: Equatable, Sendable, CustomStringConvertible {
    case refused(ErrorCode)
    case answered
    case noReply

    var description: String {
        switch self {
        case .refused(let code): "refused (\(code.protoName))"
        case .answered: "answered"
        case .noReply: "no reply"
        }
    }

    init(_ client: BlockingClient, _ body: Envelope.Body) {
        guard let reply = try? client.requestEnvelope(body) else { self = .noReply; return }
        if case .error(let error) = reply.body { self = .refused(error.code) } else { self = .answered }
    }
}

/// Runs `body` on a thread of its own inside network namespace `namespace`, with a ZeroMQ
/// context made on that thread (its I/O thread, started with the first socket, inherits the
/// namespace), and returns what `body` returned. The test's other threads stay where they are.
private func fromNamespace<T: Sendable>(_ namespace: String, _ body: @escaping @Sendable (Context) throws -> T) throws -> T {
    let box = ResultBox<T>()
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        defer { done.signal() }
        let descriptor = open("/var/run/netns/\(namespace)", O_RDONLY)
        guard descriptor >= 0 else { box.result = .failure(HarnessError("cannot open namespace \(namespace)")); return }
        defer { close(descriptor) }
        guard let setns = setns, setns(descriptor, 0x4000_0000 /* CLONE_NEWNET */) == 0 else {
            box.result = .failure(HarnessError("setns into \(namespace) failed: errno \(errno)"))
            return
        }
        box.result = Result { try body(Context()) }  // the context (and its I/O thread) ends with the closure
    }
    thread.start()
    guard done.wait(timeout: .now() + 120) == .success, let result = box.result else {
        throw HarnessError("the requests from \(namespace) did not finish")
    }
    return try result.get()
}

/// The result a ``fromNamespace(_:_:)`` thread hands back.
private final class ResultBox<T: Sendable>: @unchecked Sendable {
    var result: Result<T, any Error>?
}

/// `setns(2)`, which Glibc's Swift module does not export (it is a `_GNU_SOURCE` declaration).
private let setns: (@convention(c) (Int32, Int32) -> Int32)? = {
    guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "setns") else { return nil }
    return unsafeBitCast(symbol, to: (@convention(c) (Int32, Int32) -> Int32).self)
}()

@Suite("Planes on separate hosts: a match through an authenticated cluster plane", .serialized, .ownThread)
struct PlaneSeparationTests {
    static let skipReason = NamespacePair.unavailableReason

    @Test(.disabled(if: skipReason != nil, Comment(rawValue: "SKIPPED: \(skipReason ?? "")")))
    func aClusterWithItsControlPlaneOnLoopbackPlaysAMatchForPlayersOnAnotherHost() throws {
        let hosts = try NamespacePair()
        defer { hosts.tearDown() }
        let root = hosts.directory
        let binaries = BuildProducts.directory.path
        try #require(FileManager.default.isExecutableFile(atPath: binaries + "/netplay-peer"),
                     "netplay-peer is not built in \(binaries) (swift build --build-tests builds every product)")
        let quiet = ["NETPLAY_TELEMETRY": "none"]
        func logOf(_ name: String) -> String { (try? String(contentsOfFile: "\(root)/\(name).log", encoding: .utf8)) ?? "" }
        func logs() -> String {
            ["discovery", "coordinator", "sync", "host", "join"].map { "--- \($0):\n\(logOf($0).suffix(3000))" }.joined(separator: "\n")
        }
        /// `netplayctl` inside `namespace` (at most 30 s): exit status and output.
        func netplayctl(in namespace: String, _ arguments: [String]) -> (status: Int32, output: String) {
            Shell.run(hosts.ip, ["netns", "exec", namespace, "env", "NETPLAY_KEYS_DIR=\(root)/keys", binaries + "/netplayctl"] + arguments)
        }

        // The server host: each service's public plane on 10.77.0.1, its cluster plane on 127.0.0.1.
        let plan = ClusterLaunchPlan(discovery: publicEndpoint(Ports.discovery.public), coordinator: publicEndpoint(Ports.coordinator.public),
                                     dataRoot: root, secret: clusterSecret)
        let discovery = try hosts.launch(in: hosts.a, binaries + "/netplay-discovery", plan.discoveryArguments(
            instance: "discovery-1", extra: ["--control-endpoint", controlEndpoint(Ports.discovery.control), "--sync-interval", "0.2"]),
            environment: quiet, log: root + "/discovery.log")
        let coordinator = try hosts.launch(in: hosts.a, binaries + "/netplay-coordinator", plan.coordinatorArguments(
            instance: "coordinator-1", extra: ["--control-endpoint", controlEndpoint(Ports.coordinator.control),
                                               "--password-cost", "minimum", "--relay-refresh-interval", "0.5"]),
            environment: quiet, log: root + "/coordinator.log")
        let relay = try hosts.launch(in: hosts.a, binaries + "/netplay-sync", plan.relayArguments(
            endpoint: publicEndpoint(Ports.relay.public), instance: "sync-0",
            extra: ["--control-endpoint", controlEndpoint(Ports.relay.control)]),
            environment: quiet, log: root + "/sync.log")
        let services = [discovery, coordinator, relay]

        // The relay finds the coordinator's key and control endpoint in the trust store and registers there.
        let registered = eventually(within: 30) {
            logOf("sync").contains("registered with the coordinator") || services.contains { !$0.isRunning }
        }
        try #require(registered && services.allSatisfy { $0.isRunning }, "the relay did not register:\n\(logs())")
        #expect(logOf("coordinator").contains("relay registered"), "\(logs())")

        // Every member published its key with its two planes' endpoints into the shared store.
        let keys = TestKeys(dataRoot: root)
        for (instance, kind, ports) in [("discovery-1", "discovery", Ports.discovery), ("coordinator-1", "coordinator", Ports.coordinator),
                                        ("sync-0", "sync", Ports.relay)] {
            // Discovery's start is not waited for above (the relay registers with the coordinator
            // alone): under load its key may take a moment longer to appear.
            #expect(eventually(within: 10) { FileManager.default.fileExists(atPath: "\(root)/keys/cluster/\(instance).pub") },
                    "\(instance) published no key:\n\(logs())")
            let member = try keys.member(instance)
            #expect(member.kind == kind)
            #expect(member.endpoint == publicEndpoint(ports.public) && member.control == controlEndpoint(ports.control),
                    "\(instance): endpoint \(member.endpoint ?? "-"), control \(member.control ?? "-")")
        }

        // The players' host: a host and a joiner play a short arena match through the public planes.
        let lobby = ["--discovery", publicEndpoint(Ports.discovery.public), "--coordinator", publicEndpoint(Ports.coordinator.public)]
        let match = ["--room", "planes apart", "--frames", "240", "--timeout", "60"]
        let host = try hosts.launch(in: hosts.b, binaries + "/netplay-peer", ["host"] + lobby + match + [
            "--players", "2", "--frame-rate", "120", "--frame-delay", "4", "--prediction-window", "24",
            "--lag-tolerance", "12", "--checksum-interval", "60", "--input-seed", "11",
        ], environment: [:], log: root + "/host.log")
        try #require(eventually(within: 30) { logOf("host").contains("session s-") || !host.isRunning },
                     "the host got no session:\n\(logs())")
        let join = try hosts.launch(in: hosts.b, binaries + "/netplay-peer", ["join"] + lobby + match + ["--input-seed", "12"],
                                    environment: [:], log: root + "/join.log")
        _ = eventually(within: 90) { !host.isRunning && !join.isRunning }
        try #require(!host.isRunning && !join.isRunning, "the match did not end:\n\(logs())")
        #expect(host.terminationStatus == 0 && join.terminationStatus == 0, "\(logs())")
        _ = eventually(within: 3) { logOf("host").contains("RESULT ") && logOf("join").contains("RESULT ") }
        let hostResult = try #require(PeerResult(log: logOf("host")), "\(logs())")
        let joinResult = try #require(PeerResult(log: logOf("join")), "\(logs())")
        #expect(hostResult.frames == 240 && joinResult.frames == 240, "\(hostResult) / \(joinResult)")
        #expect(hostResult.checksum == joinResult.checksum && hostResult.checksum != "?", "\(hostResult) / \(joinResult)")

        // The cluster's own traffic (the relay's registration and refreshes, the room the joiner
        // found in discovery, which only the coordinator's announcement puts there) all went over
        // authenticated control connections: no connection, request or room was refused anywhere.
        for name in ["discovery", "coordinator", "sync"] {
            let log = logOf(name)
            #expect(!log.contains("refused"), "\(name) refused some of the cluster's own traffic:\n\(log.suffix(3000))")
        }

        // The operator on the server host reaches the control plane through the trust store.
        let introspect = netplayctl(in: hosts.a, ["introspect", "coordinator", "--timeout", "2", "--json"])
        #expect(introspect.status == 0 && introspect.output.contains("{"), "introspect on the server host: \(introspect.output)")

        // From the players' host, the same operator key reaches nothing: the control endpoints are
        // the server host's loopback. The public endpoint refuses the inspection.
        let remoteOperator = netplayctl(in: hosts.b, ["introspect", "coordinator", "--timeout", "1"])
        #expect(remoteOperator.status != 0, "an operator on another host reached the control plane: \(remoteOperator.output)")
        let viaPublic = netplayctl(in: hosts.b, ["introspect", publicEndpoint(Ports.coordinator.public), "--public-plane", "--timeout", "1"])
        #expect(viaPublic.status != 0 && viaPublic.output.contains("PERMISSION_DENIED"), "public introspect: \(viaPublic.output)")

        // Raw cluster requests from the players' host: refused on every public endpoint; on the
        // control ports (with the operator's key and the right server key) nothing answers at all.
        let operatorKeys = try keys.operatorKeys()
        let members = try ["discovery-1", "coordinator-1", "sync-0"].map { try keys.member($0) }
        let outcomes = try fromNamespace(hosts.b) { context -> [String: Outcome] in
            var outcomes: [String: Outcome] = [:]
            let coordinatorClient = try BlockingClient(endpoint: publicEndpoint(Ports.coordinator.public), timeout: 2, context: context)
            outcomes["RegisterRelay (hijack sync-0)"] = Outcome(coordinatorClient, .registerRelayRequest(RegisterRelayRequest(
                relay: RelayInfo(relayId: "sync-0", endpoint: "tcp://10.77.0.2:7300"))))
            outcomes["RegisterRelay (new relay)"] = Outcome(coordinatorClient, .registerRelayRequest(RegisterRelayRequest(
                relay: RelayInfo(relayId: "rogue-relay", endpoint: "tcp://10.77.0.2:7300"))))
            let relayClient = try BlockingClient(endpoint: publicEndpoint(Ports.relay.public), timeout: 2, context: context)
            outcomes["CloseRelaySession"] = Outcome(relayClient, .closeRelaySessionRequest(CloseRelaySessionRequest(sessionId: "s-1")))
            let discoveryClient = try BlockingClient(endpoint: publicEndpoint(Ports.discovery.public), timeout: 2, context: context)
            outcomes["AnnounceRoom"] = Outcome(discoveryClient, .announceRoomRequest(AnnounceRoomRequest(
                room: Room(roomId: "rogue", roomName: "FREE SKINS"), ttlMs: 60_000, announcerId: "coordinator-1")))
            for member in members {
                for control in [member.control!, member.control!.replacingOccurrences(of: "127.0.0.1", with: serverAddress)] {
                    let client = try BlockingClient(endpoint: control, timeout: 1, serverKey: member.publicKey, keys: operatorKeys,
                                                    context: context)
                    outcomes["Health on \(member.instance)'s control port \(control)"] = Outcome(client, .healthRequest(HealthRequest()))
                }
            }
            return outcomes
        }
        for (request, outcome) in outcomes.sorted(by: { $0.key < $1.key }) {
            let expected: Outcome = request.hasPrefix("Health") ? .noReply : .refused(.permissionDenied)
            #expect(outcome == expected, "\(request) from the players' host: \(outcome)")
        }

        // The refusals were logged with the players' host as the peer, and changed nothing: the
        // registry still holds exactly the real relay on its real endpoint.
        let coordinatorLog = logOf("coordinator")
        #expect(coordinatorLog.contains("refused request") && coordinatorLog.contains("10.77.0.2"), "\(coordinatorLog.suffix(3000))")
        let relays = netplayctl(in: hosts.a, ["relays", "list", "--coordinator", publicEndpoint(Ports.coordinator.public),
                                              "--public-plane", "--json", "--timeout", "2"])
        #expect(relays.status == 0, "\(relays.output)")
        let listed = relays.output.split(separator: "\n").compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
        }
        #expect(listed.count == 1 && listed.first?["relayId"] as? String == "sync-0"
                && listed.first?["endpoint"] as? String == publicEndpoint(Ports.relay.public), "relays: \(relays.output)")
        #expect(services.allSatisfy { $0.isRunning }, "\(logs())")
    }
}
