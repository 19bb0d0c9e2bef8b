import ArgumentParser
import Coordinator
import Discovery
import Foundation
import NetplayService
import NetplayWire
import ZeroMQ

/// `netplay-bench controlplane`: rooms listed per second with 10,000 rooms registered (a filtered
/// list, p50/p99 latency) through the in-memory registry and through netplay-discovery's real
/// service over tcp loopback; and joins per second through netplay-coordinator with its durable
/// SQLite store. Both services run in this process on their own reactor threads, exactly as the
/// executables run them.
struct ControlPlaneBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "controlplane",
        abstract: "Discovery list latency with 10,000 rooms; coordinator joins per second with durable storage.")

    @Option(help: "Rooms registered.") var rooms = 10_000
    @Option(help: "Filtered lists measured.") var lists = 3_000
    @Option(help: "Joins measured for throughput.") var joins = 20_000
    @Option(help: "Joins in flight at once (pipelined over one DEALER).") var window = 32
    @Option(help: "SQLite durability: normal or full.") var durability = "normal"
    @Option(help: "Rounds of each measurement; the best is reported (the machine may be shared).") var runs = 3

    func run() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("netplay-bench-cp-\(getpid())")
        try? FileManager.default.removeItem(at: directory)
        defer { try? FileManager.default.removeItem(at: directory) }

        guard runs >= 1 else { throw ValidationError("--runs must be at least 1") }
        print("Control plane (\(rooms) rooms; filter: game contains \"mario\", free slot, no password; 100 per page; best of \(runs))")
        print(pad("figure", 44) + pad("p50", 12) + pad("p99", 12) + pad("rate", 16) + "target")

        // 1. The registry alone.
        let registry = RoomRegistry()
        for room in Self.rooms(rooms) {
            _ = try registry.announce(room, announcerId: "bench", ttlMs: 600_000, at: RegistryTime(monotonicMs: 0, unixMs: 0))
        }
        let filter = RoomFilter(gameName: "mario", hasFreeSlot: true, noPassword: true)
        var matched = 0
        let memory = try best(of: runs) {
            var samples: [Double] = []
            for _ in 0..<lists {
                let started = DispatchTime.now().uptimeNanoseconds
                let page = try registry.page(filter: filter, pageSize: 100, pageToken: "", tokenField: "f")
                samples.append(Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6)
                matched = page.total
            }
            return samples
        }
        report("filtered list, in-memory registry", memory, unit: "lists/s", target: nil)

        // 2. Through netplay-discovery over tcp loopback.
        var discoverySettings = DiscoveryConfiguration()
        discoverySettings.announceRatePerSecond = 0
        discoverySettings.readRatePerSecond = 0  // one client measures thousands of lists: no per-address read limit
        discoverySettings.beaconPort = nil
        discoverySettings.retroArchPort = nil
        let discoveryConfigured = discoverySettings
        // Both services admit the trust store's keys on their control endpoints, as in a cluster;
        // the benchmark announces and registers as a cluster member of its own.
        let trust = TrustStore(directory: directory.appendingPathComponent("keys"))
        let member = try CurveKeyPair.generate()
        try trust.publish(TrustStore.Member(kind: "coordinator", instance: "bench", publicKey: member.publicKey))
        func controlled(_ configuration: ServiceConfiguration) -> ServiceConfiguration {
            var configuration = configuration
            configuration.trustStore = trust.directory
            configuration.control = "tcp://127.0.0.1:*"
            return configuration
        }
        let discovery = try ServiceHost.start(
            configuration: controlled(ServiceConfiguration(kind: "discovery", instance: "bench-discovery", endpoint: "tcp://127.0.0.1:*",
                                                           events: "tcp://127.0.0.1:*", logLevel: .error,
                                                           dataDirectory: directory.appendingPathComponent("discovery")))) {
            DiscoveryService(configuration: discoveryConfigured)
        }
        defer { discovery.stop() }
        let client = try BlockingClient(endpoint: discovery.endpoint, timeout: 10)
        guard let discoveryKey = trust.member(instance: "bench-discovery")?.publicKey, let discoveryControl = discovery.controlEndpoint else {
            throw ValidationError("discovery has no control endpoint")
        }
        try Self.pipeline(endpoint: discoveryControl, count: rooms, window: window, serverKey: discoveryKey, keys: member) { index in
            .announceRoomRequest(AnnounceRoomRequest(room: Self.room(index), ttlMs: 600_000, announcerId: "bench"))
        }
        let wire = try best(of: runs) {
            var samples: [Double] = []
            for index in 0..<(lists + 100) {
                let started = DispatchTime.now().uptimeNanoseconds
                let reply = try client.request(.listRoomsRequest(ListRoomsRequest(filter: filter, pageSize: 100)))
                if index >= 100 { samples.append(Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6) }  // 100 warm-up lists
                guard case .listRoomsResponse(let page) = reply, page.totalMatching == matched,
                      page.rooms.count == min(100, matched) else {
                    throw ValidationError("discovery listed the wrong rooms")
                }
            }
            return samples
        }
        report("filtered list, discovery over tcp", wire, unit: "lists/s", target: 5)
        print("  (\(matched) of \(rooms) rooms match; each reply carries 100 rooms)")

        // 3. Joins through netplay-coordinator, durable in SQLite.
        var coordinatorSettings = CoordinatorConfiguration()
        coordinatorSettings.discovery = discovery.endpoint
        coordinatorSettings.settings.relayTTLMs = 600_000
        coordinatorSettings.settings.maxSessions = 1_000_000
        // One client creates and joins thousands of sessions: no per-source limits here.
        coordinatorSettings.settings.createsPerMinutePerSource = 0
        coordinatorSettings.settings.joinsPerMinutePerSource = 0
        coordinatorSettings.settings.lobbySessionsPerSource = 0
        coordinatorSettings.settings.sessionsPerSource = 0
        coordinatorSettings.durability = durability == "full" ? .full : .normal
        let configured = coordinatorSettings
        let coordinator = try ServiceHost.start(
            configuration: controlled(ServiceConfiguration(kind: "coordinator", instance: "bench-coordinator", endpoint: "tcp://127.0.0.1:*",
                                                           events: "tcp://127.0.0.1:*", logLevel: .error,
                                                           dataDirectory: directory.appendingPathComponent("coordinator")))) {
            CoordinatorService(configuration: configured)
        }
        defer { coordinator.stop() }
        let control = try BlockingClient(endpoint: coordinator.endpoint, timeout: 10)
        // A relay registers as itself, with a relay's key.
        let relayKeys = try CurveKeyPair.generate()
        try trust.publish(TrustStore.Member(kind: "sync", instance: "bench-relay", publicKey: relayKeys.publicKey))
        guard let coordinatorKey = trust.member(instance: "bench-coordinator")?.publicKey, let coordinatorControl = coordinator.controlEndpoint else {
            throw ValidationError("the coordinator has no control endpoint")
        }
        _ = try BlockingClient(endpoint: coordinatorControl, timeout: 10, serverKey: coordinatorKey, keys: relayKeys)
            .request(.registerRelayRequest(RegisterRelayRequest(relay: RelayInfo(relayId: "bench-relay", endpoint: "tcp://127.0.0.1:1"))))
        // Sessions of 8 players and 8 spectators: 15 joins each.
        let perSession = 15
        // The latency rounds' sessions, then the throughput rounds', which start on a fresh session.
        let sessionCount = (2_000 * runs + perSession - 1) / perSession + (joins * runs + perSession - 1) / perSession
        var sessions: [String] = []
        for index in 0..<sessionCount {
            let reply = try control.request(.createSessionRequest(CreateSessionRequest(settings: SessionSettings(
                roomName: "bench \(index)", content: Self.content, maxPlayers: 8, spectatorsAllowed: true, maxSpectators: 8),
                hostName: "host\(index)")))
            guard case .createSessionResponse(let created) = reply else { throw ValidationError("create failed") }
            sessions.append(created.session.sessionId)
        }
        func joinRequest(_ index: Int) -> Envelope.Body {
            .joinSessionRequest(JoinSessionRequest(sessionId: sessions[index / perSession],
                                                   role: index % perSession < 7 ? .player : .spectator, name: "j\(index)",
                                                   content: Self.content))
        }
        // Latency: one join at a time (2,000 joins per round).
        var next = 0
        let joinLatency = try best(of: runs) {
            var samples: [Double] = []
            for _ in 0..<2_000 {
                let started = DispatchTime.now().uptimeNanoseconds
                guard case .joinSessionResponse = try control.request(joinRequest(next)) else { throw ValidationError("join failed") }
                samples.append(Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6)
                next += 1
            }
            return samples
        }
        // Throughput: `window` joins in flight, on sessions not touched by the latency rounds.
        next = (next + perSession - 1) / perSession * perSession
        var seconds = Double.infinity
        for _ in 0..<runs {
            let first = next
            let started = DispatchTime.now().uptimeNanoseconds
            try Self.pipeline(endpoint: coordinator.endpoint, count: joins, window: window) { joinRequest(first + $0) }
            seconds = min(seconds, Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9)
            next += joins
        }
        let rate = Double(joins) / seconds
        let sortedJoins = joinLatency.sorted()
        print(pad("join, coordinator + SQLite (\(coordinatorSettings.durability.rawValue))", 44)
              + pad(format(percentile(sortedJoins, 0.50), 3) + " ms", 12) + pad(format(percentile(sortedJoins, 0.99), 3) + " ms", 12)
              + pad(format(rate, 0) + " joins/s", 16) + ">= 2000 joins/s: \(rate >= 2_000 ? "PASS" : "MISS")")
        print("  (\(joins) joins with \(window) in flight in \(format(seconds, 2)) s; latency from 2,000 sequential joins)")
    }

    /// Runs `measure` `count` times and keeps the round with the lowest p99.
    private func best(of count: Int, _ measure: () throws -> [Double]) rethrows -> [Double] {
        var chosen: [Double] = []
        var chosenP99 = Double.infinity
        for _ in 0..<count {
            let samples = try measure()
            let p99 = percentile(samples.sorted(), 0.99)
            if p99 < chosenP99 {
                chosen = samples
                chosenP99 = p99
            }
        }
        return chosen
    }

    private func report(_ name: String, _ samples: [Double], unit: String, target: Double?) {
        let sorted = samples.sorted()
        let p50 = percentile(sorted, 0.50), p99 = percentile(sorted, 0.99)
        let rate = Double(samples.count) / (samples.reduce(0, +) / 1000)
        let verdict = target.map { "p99 < \(format($0, 0)) ms: \(p99 < $0 ? "PASS" : "MISS")" } ?? "-"
        print(pad(name, 44) + pad(format(p50, 3) + " ms", 12) + pad(format(p99, 3) + " ms", 12)
              + pad(format(rate, 0) + " " + unit, 16) + verdict)
    }

    private func percentile(_ sorted: [Double], _ q: Double) -> Double {
        guard !sorted.isEmpty else { return 0 }
        return sorted[min(sorted.count - 1, Int(Double(sorted.count) * q))]
    }

    static let content = ContentInfo(gameName: "Super Mario Bros.", crc32: 0x3337_EC46, coreId: "nestopia", coreVersion: "1.52.0")

    static let games = ["Super Mario Bros.", "Super Mario Bros. 3", "The Legend of Zelda", "Metroid", "Tetris", "Contra",
                        "Mega Man 2", "Castlevania", "Dr. Mario", "Kirby's Adventure"]

    /// A varied room: about 20% are Mario games; a third full; a fifth with a password.
    static func room(_ index: Int) -> Room {
        let game = games[index % games.count]
        let maxPlayers = UInt32(2 + index % 3)
        return Room(roomId: String(format: "room-%06d", index), sessionId: "", hostName: "host\(index)", roomName: "Room \(index)",
                    content: ContentInfo(gameName: game, crc32: UInt32(truncatingIfNeeded: index * 2_654_435_761),
                                         coreId: index % 2 == 0 ? "nestopia" : "fceumm", coreVersion: "1.52.0", system: "nes"),
                    maxPlayers: maxPlayers, currentPlayers: index % 3 == 0 ? maxPlayers : 1, spectatorsAllowed: true,
                    maxSpectators: 8, hasPassword: index % 5 == 0, transport: index % 4 == 0 ? .lan : .relay, region: "eu")
    }

    static func rooms(_ count: Int) -> [Room] { (0..<count).map(room) }

    /// Sends `count` requests over one DEALER with up to `window` in flight; every reply must be
    /// a success.
    static func pipeline(endpoint: String, count: Int, window: Int, serverKey: [UInt8]? = nil, keys: CurveKeyPair? = nil,
                         _ body: (Int) -> Envelope.Body) throws {
        let socket = try Context.shared.socket(.dealer)
        defer { socket.close() }
        try socket.set(.linger(milliseconds: 0))
        if let serverKey, let keys { try socket.makeCurveClient(serverKey: serverKey, keys: keys) }
        try socket.connect(endpoint)
        var sent = 0, received = 0
        let poller = Poller()
        poller.add(socket)
        while received < count {
            while sent < count && sent - received < window {
                try socket.send(try Envelope(requestId: UInt64(sent + 1), body: body(sent)).encoded())
                sent += 1
            }
            guard try poller.poll(timeout: 10_000) > 0 else { throw ValidationError("no reply within 10 s") }
            while let frame = try? socket.receive(flags: .dontWait) {
                let reply = try Envelope(decoding: frame)
                if case .error(let error) = reply.body { throw ValidationError("request \(reply.requestId) failed: \(error.message)") }
                received += 1
            }
        }
    }
}
