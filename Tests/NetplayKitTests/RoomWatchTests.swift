import Foundation
import Games
import NetplayService
import NetplayTestSupport
import NetplayWire
import Synchronization
import Testing
import ZeroMQ
@testable import NetplayKit

/// What a watch reported so far, filled by the task consuming the stream.
final class WatchLog: Sendable {
    private let state = Mutex<(changes: [NetplayRoomChange], ended: Bool, error: String?)>(([], false, nil))

    /// Consumes `stream` in a task of its own, in the cooperative pool (the test itself blocks on
    /// its lane, see `OwnThreadTrait`).
    func consume(_ stream: AsyncThrowingStream<NetplayRoomChange, any Error>) -> Task<Void, Never> {
        Task { [self] in
            do {
                for try await change in stream { state.withLock { $0.changes.append(change) } }
                state.withLock { $0.ended = true }
            } catch {
                state.withLock { $0.ended = true; $0.error = "\(error)" }
            }
        }
    }

    var changes: [NetplayRoomChange] { state.withLock { $0.changes } }
    var ended: Bool { state.withLock { $0.ended } }
    var error: String? { state.withLock { $0.error } }

    /// The first change after the snapshot that `matches`, waiting up to `seconds`.
    func first(within seconds: Double, _ matches: (NetplayRoomChange) -> Bool) -> NetplayRoomChange? {
        var found: NetplayRoomChange?
        _ = eventually(within: seconds) {
            found = changes.dropFirst().first(where: matches)
            return found != nil
        }
        return found
    }
}

/// A live room watch against a real discovery and coordinator.
@Suite("NetplayKit: the live room watch", .serialized, .ownThread)
struct RoomWatchTests {
    let content = ContentInfo(gameName: "Arena", crc32: 0xA7E7_A001, coreId: "netplay.games.arena", coreVersion: "1")

    func cluster() throws -> TestCluster {
        var options = TestCluster.Options(secret: String(repeating: "5e", count: 32))
        options.events = true
        options.name = "kit-watch"
        options.coordinatorArguments = ["--relay-refresh-interval", "0.5"]
        return try TestCluster(options)
    }

    func lobby(_ cluster: TestCluster) -> NetplayLobby {
        var lobby = NetplayLobby(discovery: cluster.discoveryEndpoint, coordinator: cluster.coordinatorEndpoint,
                                 serverKey: cluster.serverKey, discoveryEvents: cluster.discoveryEvents)
        lobby.measuresRelays = false
        return lobby
    }

    func settings(_ name: String) -> NetplaySettings {
        var settings = NetplaySettings(roomName: name)
        settings.frameRateMilliHertz = 120_000
        settings.automaticFrameDelay = false
        settings.region = "eu-west"
        settings.maxSpectators = 3
        return settings
    }

    @Test(.timeLimit(.minutes(2)))
    func theWatchSeesARoomAppearFillASlotAndGoAwayAndStopsWhenCancelled() throws {
        let cluster = try cluster()
        let lobby = lobby(cluster)
        let log = WatchLog()
        let task = log.consume(lobby.watchRooms())
        #expect(eventually(within: 10) { log.changes.first != nil }, "no snapshot: \(log.error ?? "")")
        #expect(log.changes.first == .snapshot([]))

        let host = try lobby.host(settings: settings("watched"), content: content, inputSize: 1, hostName: "alice")
        let added = log.first(within: 10) { if case .added = $0 { true } else { false } }
        guard case .added(let room)? = added else {
            Issue.record("no room appeared: \(log.changes) \(log.error ?? "")")
            return
        }
        #expect(room.id == host.sessionId && room.roomName == "watched" && room.region == "eu-west" && room.maxSpectators == 3)
        #expect(room.source == .lobby && !room.hostVersion.isEmpty)
        #expect(room.slots.map(\.holder) == [.player(name: "alice"), .free])
        #expect(room.contentMatch(for: content) == .same)

        let bob = try lobby.join(room, name: "bob", content: content)
        #expect(bob.slot == 2)
        let joined = log.first(within: 10) {
            if case .updated(let room) = $0 { room.currentPlayers == 2 } else { false }
        }
        guard case .updated(let full)? = joined else {
            Issue.record("the join was not seen: \(log.changes)")
            return
        }
        #expect(full.slots.map(\.holder) == [.player(name: "alice"), .player(name: "bob")])
        #expect(full.slots.allSatisfy { !$0.isFree } && !full.hasFreeSlot)
        #expect(full.slots.allSatisfy { $0.connected == false }, "nobody attached to the relay yet")

        // The host attaches to the relay: its slot shows connected once the relay reports it.
        var options = NetplayMatchOptions()
        options.serverKey = cluster.serverKey
        let hostMatch = try NetplayMatch(game: Arena(playerCount: 2), admission: host, options: options)
        hostMatch.start()
        let connected = drive([hostMatch], seconds: 15) {
            log.changes.contains { change in
                if case .updated(let room) = change { room.slots.first?.connected == true } else { false }
            }
        }
        #expect(connected, "slot 1 never showed connected: \(log.changes)")

        // The host leaving (relay and coordinator) ends the session: its room is withdrawn.
        hostMatch.leave()
        let removed = log.first(within: 10) { if case .removed = $0 { true } else { false } }
        #expect(removed == .removed(id: host.sessionId, reason: .withdrawn), "\(log.changes)")

        // Cancelling the consumer ends the stream, its thread and its sockets.
        #expect(RoomWatch.running.load(ordering: .relaxed) >= 1)
        task.cancel()
        #expect(eventually(within: 5) { RoomWatch.running.load(ordering: .relaxed) == 0 && log.ended })
        #expect(log.error == nil)
    }

    @Test(.timeLimit(.minutes(2)))
    func theWatchEndsWithAClearErrorWhenDiscoveryIsGone() throws {
        let cluster = try cluster()
        let log = WatchLog()
        _ = log.consume(lobby(cluster).watchRooms(giveUpAfter: 2))
        #expect(eventually(within: 10) { log.changes.first == .snapshot([]) }, "no snapshot: \(log.error ?? "")")
        cluster.discovery?.kill9()
        #expect(eventually(within: 20) { log.ended }, "the watch did not end without discovery")
        #expect(log.error?.contains("stopped answering") == true, "\(log.error ?? "no error")")
        #expect(eventually(within: 5) { RoomWatch.running.load(ordering: .relaxed) == 0 })

        // No discovery at all: the first snapshot fails at once.
        let nowhere = NetplayLobby(discovery: "tcp://127.0.0.1:\(TestPorts.free())", coordinator: nil, timeout: 0.5)
        let refused = WatchLog()
        _ = refused.consume(nowhere.watchRooms())
        #expect(eventually(within: 10) { refused.ended })
        #expect(refused.changes.isEmpty && refused.error?.contains("did not answer") == true, "\(refused.error ?? "no error")")
    }
}

/// Discovery's events passed on through a PUB of the test's own, into which the test can slip
/// events of its own.
final class EventForwarder: @unchecked Sendable {
    let endpoint: String
    private let source: Socket
    private let sink: Socket
    private let injected = Mutex<[[[UInt8]]]>([])
    private let stopped = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    init(from events: String) throws {
        source = try Context.shared.socket(.sub)
        try source.set(.subscribe([]))
        try source.connect(events)
        sink = try Context.shared.socket(.pub)
        try sink.bind("tcp://127.0.0.1:*")
        endpoint = try sink.lastEndpoint
        Thread.detachNewThread { [self] in
            defer { finished.signal() }
            while !stopped.load(ordering: .relaxed) {
                for frames in injected.withLock({ pending in defer { pending.removeAll() }; return pending }) {
                    _ = try? sink.sendMultipart(frames, flags: .dontWait)
                }
                let poller = Poller()
                poller.add(source)
                guard (try? poller.poll(timeout: 10)) ?? 0 > 0, let frames = try? source.receiveMultipart(flags: .dontWait) else { continue }
                _ = try? sink.sendMultipart(frames, flags: .dontWait)
            }
        }
    }

    /// Publishes `payload` under `topic` to the forwarder's subscribers.
    func inject(topic: String, _ payload: [UInt8]) { injected.withLock { $0.append([Array(topic.utf8), payload]) } }

    func stop() {
        stopped.store(true, ordering: .relaxed)
        finished.wait()
        source.close()
        sink.close()
    }
}

extension RoomWatchTests {
    /// libzmq drops a connection for good after a protocol error (here an event over the watch's
    /// 64 KiB limit): the watch's subscription never came back, and it polled discovery every
    /// 3 s for the rest of its life. Silence now brings a new subscription, and events flow again.
    @Test(.timeLimit(.minutes(2)))
    func aSubscriptionDroppedForGoodIsMadeAgain() throws {
        let cluster = try cluster()
        let forwarder = try EventForwarder(from: cluster.discoveryEvents)
        defer { forwarder.stop() }
        var lobby = lobby(cluster)
        lobby.discoveryEventsEndpoint = forwarder.endpoint
        let log = WatchLog()
        let task = log.consume(lobby.watchRooms())
        defer { task.cancel() }
        #expect(eventually(within: 10) { log.changes.first != nil }, "no snapshot: \(log.error ?? "")")
        let before = RoomWatch.subscriptions.load(ordering: .relaxed)
        forwarder.inject(topic: "rooms.added", [UInt8](repeating: 0x41, count: 100 << 10))
        // The room comes through the snapshot a silence brings, which shows the subscription
        // missed a change: it is made again.
        let host = try lobby.host(settings: settings("again"), content: content, inputSize: 1, hostName: "alice")
        let added = log.first(within: 10) { if case .added(let room) = $0 { room.id == host.sessionId } else { false } }
        #expect(added != nil, "\(log.changes) \(log.error ?? "")")
        #expect(eventually(within: 10) { RoomWatch.subscriptions.load(ordering: .relaxed) > before }, "no new subscription")
        #expect(log.error == nil)
    }
}

/// A discovery that sends a watch page after page of rooms, never the last: the watch held every
/// room it was sent (a million tiny rooms took gigabytes before its first snapshot). It stops at
/// its room limit and ends with the reason.
@Suite("NetplayKit: a room watch against a discovery that never stops paging", .ownThread)
struct RoomWatchLimitTests {
    @Test(.timeLimit(.minutes(1)))
    func aSnapshotPastTheRoomLimitEndsTheWatchWithAReason() throws {
        let discovery = try LyingService { served, _ in
            .watchRoomsSnapshot(WatchRoomsSnapshot(sequence: 1, rooms: (0 ..< 1_000).map { Room(roomId: "r\(served)-\($0)", maxPlayers: 2) },
                                                   nextPageToken: "page-\(served)"))
        }
        defer { discovery.stop() }
        let lobby = NetplayLobby(discovery: discovery.requests, coordinator: nil, discoveryEvents: discovery.events)
        let log = WatchLog()
        let task = log.consume(lobby.watchRooms(maxRooms: 5_000))
        defer { task.cancel() }
        #expect(eventually(within: 20) { log.ended }, "\(log.changes.count) changes")
        #expect(log.error?.contains("More than 5000 rooms match this watch") == true, "\(log.error ?? "no error")")
        #expect(log.changes.isEmpty)
    }

    /// Discovery limits public reads per address: a listing of many pages outruns the burst. A
    /// refusal for the rate is waited out (the time it names) and the page asked again, up to
    /// 5 s in all; a discovery that refuses for longer ends the call with its reason.
    @Test(.timeLimit(.minutes(1)))
    func aRateLimitedListingWaitsAndAsksAgain() throws {
        let discovery = try LyingService { served, _ in
            if served % 3 != 0 {
                return .error(ErrorReply(code: .rateLimited, message: "Too many room reads from this address.", retryAfterMs: 50))
            }
            let page = served / 3
            return .listRoomsResponse(ListRoomsResponse(rooms: (0 ..< 100).map { Room(roomId: "r\(page)-\($0)", maxPlayers: 2) },
                                                        nextPageToken: page < 3 ? "p\(page)" : ""))
        }
        defer { discovery.stop() }
        let lobby = NetplayLobby(discovery: discovery.requests, coordinator: nil, discoveryEvents: discovery.events)
        let rooms = try lobby.lobbyRooms(limit: 1_000)
        #expect(rooms.count == 300 && discovery.log.count == 9, "\(rooms.count) rooms in \(discovery.log.count) requests")

        let refusing = try LyingService { _, _ in
            .error(ErrorReply(code: .rateLimited, message: "Too many room reads from this address.", retryAfterMs: 400))
        }
        defer { refusing.stop() }
        let started = Date()
        #expect {
            _ = try NetplayLobby(discovery: refusing.requests, coordinator: nil).lobbyRooms()
        } throws: { error in
            (error as? NetplayError)?.code == .rateLimited
        }
        let waited = Date().timeIntervalSince(started)
        #expect(waited > 4.5 && waited < 8, "gave up after \(waited) s")
    }

    /// Two snapshot pages naming each other used to be followed to the page limit, and what
    /// came meanwhile was taken as the rooms; now the watch ends with the reason at once.
    @Test(.timeLimit(.minutes(1)))
    func aSnapshotWhosePagesGoRoundInACircleEndsTheWatch() throws {
        let discovery = try LyingService { served, _ in
            .watchRoomsSnapshot(WatchRoomsSnapshot(sequence: 1, rooms: [Room(roomId: "r\(served)", maxPlayers: 2)],
                                                   nextPageToken: "t\(served % 2)"))
        }
        defer { discovery.stop() }
        let lobby = NetplayLobby(discovery: discovery.requests, coordinator: nil, discoveryEvents: discovery.events)
        let log = WatchLog()
        let task = log.consume(lobby.watchRooms())
        defer { task.cancel() }
        #expect(eventually(within: 20) { log.ended }, "\(log.changes.count) changes")
        #expect(log.error?.contains("sent a next-page token it had sent before") == true, "\(log.error ?? "no error")")
        #expect(log.changes.isEmpty && discovery.log.count == 3)
    }
}
