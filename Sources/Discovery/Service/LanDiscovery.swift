import NetplayAuth
import NetplayLAN
import NetplayService
import NetplayWire

/// The LAN side of discovery, driven by the service reactor: the beacon listener (our own
/// protocol), the RetroArch RANQ responder (so RetroArch's LAN scan lists our LAN rooms) and the
/// RetroArch scanner (so real RetroArch hosts appear as rooms). Each part is optional; a port
/// that cannot be bound disables that part with a warning instead of stopping the service.
///
/// What arrives by UDP may come from anyone on the network, so every part is bounded: a RANQ
/// gets at most one RANS (no amplification), replies are rate-limited per source address and in
/// all, a beacon must name its sender's own address, and LAN rooms are capped per source
/// address and in total (``LanRoomBook``), the least recently heard making way.
final class LanDiscovery {
    /// Prefix of the frontend string in our own RANS replies; a scanner ignores such replies
    /// (those rooms arrive through beacons and the lobby).
    static let frontendPrefix = "netplay-toolkit"
    /// The announcer id of rooms found by RetroArch scans.
    static let retroArchAnnouncer = "retroarch-lan"

    private let configuration: DiscoveryConfiguration
    private weak var service: DiscoveryService?
    private var beaconSocket: UDPSocket?
    private var responderSocket: UDPSocket?
    private var scanSocket: UDPSocket?
    private var watchers: [Watcher] = []
    private(set) var beaconStatus = "disabled"
    private(set) var responderStatus = "disabled"
    private(set) var scanStatus = "disabled"
    private var frontend = frontendPrefix
    private var counters: [String: Counter] = [:]
    private var counts: [String: Int] = [:]
    private var book: LanRoomBook
    /// RANS replies per source address: a RetroArch LAN scan sends one RANQ per refresh.
    private var replyLimiter = RateLimiter<UInt32>(ratePerSecond: LanDiscovery.repliesPerSecondPerSource,
                                                   burst: LanDiscovery.replyBurstPerSource)
    /// RANS replies in all, against queries with spoofed, ever-changing source addresses.
    private var totalReplyLimiter = RateLimiter<Int>(ratePerSecond: LanDiscovery.repliesPerSecond, burst: LanDiscovery.repliesPerSecond * 2)
    /// The LAN room the last RANS advertised: the next advertises the one after it.
    private var lastAdvertised = ""
    private var localAddresses: Set<UInt32> = []
    private var localAddressesAt: UInt64?

    /// LAN rooms one source address may hold (beacon and RetroArch rooms).
    static let maxRoomsPerSource = 4
    /// LAN rooms held in all.
    static let maxRooms = 256
    /// RANS replies per second to one source address, and their burst.
    static let repliesPerSecondPerSource = 1.0
    static let replyBurstPerSource = 3.0
    /// RANS replies per second in all.
    static let repliesPerSecond = 50.0

    init(configuration: DiscoveryConfiguration) {
        self.configuration = configuration
        book = LanRoomBook(maxPerSource: Self.maxRoomsPerSource, maxTotal: Self.maxRooms)
    }

    /// A UDP socket bound on `host:port` that the reactor watches (`onReadable`), and its status
    /// ("`working` ADDRESS"); nil and "unavailable (...)", with `warning` logged, when it cannot be bound.
    private func openWatched(_ runtime: ServiceRuntime, host: String, port: UInt16, working: String, warning: String,
                             onReadable: @escaping (ServiceRuntime) -> Void) -> (UDPSocket?, String) {
        do {
            let socket = try UDPSocket(host: host, port: port)
            watchers.append(runtime.watch(fileDescriptor: socket.fileDescriptor, onReadable: onReadable))
            return (socket, "\(working) \(socket.localAddress)")
        } catch {
            runtime.logger.warning("\(warning)", metadata: ["error": "\(error)"])
            return (nil, "unavailable (\(error))")
        }
    }

    func start(runtime: ServiceRuntime, delegate: DiscoveryService) {
        service = delegate
        frontend = "\(Self.frontendPrefix) \(runtime.configuration.instance)"
        for (name, help) in [("beacons", "LAN beacons accepted."), ("queries", "RetroArch RANQ queries answered."),
                             ("advertisements", "RetroArch RANS replies received from hosts."),
                             ("dropped", "LAN datagrams dropped (malformed, rate-limited, not from a LAN address, not naming their sender)."),
                             ("evicted", "LAN rooms evicted to keep the per-source and total bounds.")] {
            counters[name] = runtime.metrics.counter("netplay_discovery_lan_\(name)_total", help: help)
        }
        if let port = configuration.beaconPort {
            (beaconSocket, beaconStatus) = openWatched(runtime, host: configuration.beaconBind, port: port, working: "listening on",
                                                       warning: "LAN beacon listener disabled") { [weak self] runtime in
                self?.drainBeacons(runtime)
            }
        }
        if let port = configuration.retroArchPort {
            (responderSocket, responderStatus) = openWatched(runtime, host: configuration.retroArchBind, port: port,
                                                             working: "answering on",
                                                             warning: "RetroArch LAN responder disabled") { [weak self] runtime in
                self?.drainQueries(runtime)
            }
        }
        if configuration.retroArchScanIntervalSeconds > 0 {
            do {
                let socket = try UDPSocket(host: configuration.retroArchBind, port: 0, broadcast: true)
                scanSocket = socket
                scanStatus = "every \(configuration.retroArchScanIntervalSeconds) s from \(socket.localAddress)"
                watchers.append(runtime.watch(fileDescriptor: socket.fileDescriptor) { [weak self] runtime in
                    self?.drainAdvertisements(runtime)
                })
                scan(runtime)
                runtime.every(seconds: configuration.retroArchScanIntervalSeconds) { [weak self] runtime in self?.scan(runtime) }
            } catch {
                scanStatus = "unavailable (\(error))"
                runtime.logger.warning("RetroArch LAN scanner disabled", metadata: ["error": "\(error)"])
            }
        }
    }

    func stop(runtime: ServiceRuntime) {
        for watcher in watchers { runtime.unwatch(watcher) }
        watchers.removeAll()
        beaconSocket?.close()
        responderSocket?.close()
        scanSocket?.close()
    }

    func introspect() -> JSONValue {
        [
            "beacon": .string(beaconStatus), "retroarch_responder": .string(responderStatus),
            "retroarch_scan": .string(scanStatus),
            "lan_rooms": .number(book.count), "max_lan_rooms": .number(book.maxTotal),
            "max_lan_rooms_per_source": .number(book.maxPerSource),
            "counts": .object(counts.mapValues { .number($0) }),
        ]
    }

    private func count(_ name: String) {
        counters[name]?.increment()
        counts[name, default: 0] += 1
    }

    // MARK: Beacons

    private func drainBeacons(_ runtime: ServiceRuntime) {
        guard let socket = beaconSocket, let service else { return }
        for _ in 0..<256 {
            guard let (datagram, from) = socket.receive() else { return }
            guard service.allowLan(from: from), let beacon = LanBeaconCodec.decode(datagram) else {
                count("dropped")
                continue
            }
            accept(beacon, from: from, runtime: runtime, service: service)
        }
    }

    private func accept(_ beacon: LanBeacon, from: UDPAddress, runtime: ServiceRuntime, service: DiscoveryService) {
        let roomId = LanBeaconCodec.roomId(beaconId: beacon.beaconId, from: from)
        let announcer = "lan:\(from.host)"
        if beacon.goodbye {
            if service.registry.announcer(of: roomId) == announcer {
                service.publish(service.registry.evict(roomId: roomId, reason: .lanLost), runtime)
                book.forget(roomId)
            }
            count("beacons")
            return
        }
        guard let heard = beacon.room else {
            count("dropped")
            return
        }
        var room = LanBeaconCodec.believable(heard)
        room.roomId = roomId
        if room.hostEndpoint.isEmpty {
            room.hostEndpoint = "udp://\(from.host)"  // the protocol's way to say "where this came from"
        } else if let problem = LanBeaconCodec.hostEndpointProblem(room.hostEndpoint, from: from,
                                                                  localAddresses: { localAddressSet(service) }) {
            count("dropped")
            runtime.logger.debug("LAN beacon refused", metadata: ["from": "\(from)", "error": "\(problem)"])
            return
        }
        // Checked before anything is evicted to make room for it: an invalid beacon from an
        // address holding no rooms evicted the oldest room, and a stream of them flushed all.
        do { try RoomRegistry.validate(room) } catch {
            count("dropped")
            runtime.logger.debug("LAN beacon refused", metadata: ["from": "\(from)", "error": "\(error.message)"])
            return
        }
        guard admit(roomId, announcer: announcer, from: from, runtime: runtime, service: service) else { return }
        do {
            let (_, change) = try service.registry.announce(room, announcerId: announcer,
                                                            ttlMs: LanBeaconCodec.ttlMs(intervalMs: beacon.intervalMs),
                                                            source: .lanBeacon, at: service.now)
            service.publish(change, runtime)
            count("beacons")
        } catch {
            if service.registry.announcer(of: roomId) != announcer { book.forget(roomId) }
            count("dropped")
            runtime.logger.debug("LAN beacon refused", metadata: ["from": "\(from)", "error": "\(error.message)"])
        }
    }

    /// This machine's interface addresses, looked up at most every 10 s.
    private func localAddressSet(_ service: DiscoveryService) -> Set<UInt32> {
        let now = service.now.monotonicMs
        if localAddressesAt.map({ now - $0 > 10_000 }) ?? true {
            localAddresses = UDPSocket.interfaceAddresses()
            localAddressesAt = now
        }
        return localAddresses
    }

    /// Books `roomId` (announced as `announcer`) for `from`, evicting what the bounds require
    /// first. False when the room id is another announcer's (the registry would refuse it).
    private func admit(_ roomId: String, announcer: String, from: UDPAddress, runtime: ServiceRuntime, service: DiscoveryService) -> Bool {
        let registry = service.registry
        if let owner = registry.announcer(of: roomId), owner != announcer {
            count("dropped")
            runtime.logger.debug("LAN room refused", metadata: ["from": "\(from)", "room": "\(roomId)", "error": "another sender's room"])
            return false
        }
        for evicted in book.admit(roomId, from: from.ip, isLive: { registry.room($0) != nil }) {
            count("evicted")
            runtime.logger.info("LAN room evicted to keep the bounds", metadata: [
                "room": "\(evicted)", "for": "\(roomId)", "from": "\(from.host)",
                "max_per_source": "\(book.maxPerSource)", "max_total": "\(book.maxTotal)",
            ])
            service.publish(registry.evict(roomId: evicted, reason: .evicted), runtime)
        }
        return true
    }

    // MARK: RetroArch responder

    private func drainQueries(_ runtime: ServiceRuntime) {
        guard let socket = responderSocket, let service else { return }
        for _ in 0..<256 {
            guard let (datagram, from) = socket.receive() else { return }
            // Like RetroArch: only exact queries from LAN addresses get an answer.
            let fromLan = from.isPrivate || (configuration.answerLoopbackQueries && from.isLoopback)
            guard RetroArchLAN.isQuery(datagram), fromLan, service.allowLan(from: from) else {
                count("dropped")
                continue
            }
            count("queries")
            // One RANS per query at most (RetroArch answers one too): a 4-byte query never
            // turns into more than one 688-byte reply, and a reply needs tokens of the
            // source's bucket and of the shared one. The tokens come first: only a query they
            // admit looks at the registry (one walk, no copy), whatever the rate of queries.
            let seconds = Double(service.now.monotonicMs) / 1000
            guard case .allowed = replyLimiter.take(from.ip, now: seconds), case .allowed = totalReplyLimiter.take(0, now: seconds) else {
                count("dropped")
                continue
            }
            // Each answer advertises the next room a RetroArch client can join at this reply's
            // source address: RetroArch takes the host from the datagram, not from the RANS.
            let local = localAddressSet(service)
            guard let room = service.registry.nextRoom(after: lastAdvertised, where: {
                Self.joinableByRetroArch($0, askedFrom: from, localAddresses: local)
            }) else { continue }
            lastAdvertised = room.roomId
            let advertisement = RetroArchAdvertisement.advertising(room, frontend: frontend, version: NetplayVersion.current)
            socket.send(advertisement.encoded(), to: from)
            runtime.logger.debug("answered RANQ", metadata: ["from": "\(from)", "room": "\(room.roomId)"])
        }
    }

    /// Whether a RetroArch client that heard `room` in a RANS from this machine could join it:
    /// the room's host endpoint is `retroarch://IP:PORT` (a RetroArch relay session's own port;
    /// our other rooms speak ZeroMQ, which RetroArch cannot) on one of this machine's addresses,
    /// a loopback one only for a query from loopback. RetroArch hosts found by scanning answer
    /// for themselves.
    static func joinableByRetroArch(_ room: Room, askedFrom source: UDPAddress, localAddresses: Set<UInt32>) -> Bool {
        guard room.source != .retroarchLan, room.hostEndpoint.hasPrefix("retroarch://"),
              RetroArchAdvertisement.endpointPort(room.hostEndpoint) != nil,
              let host = UDPSocket.endpointHost(room.hostEndpoint), let ip = UDPAddress.parseIP(host) else { return false }
        if UDPAddress(ip: ip, port: 0).isLoopback { return source.isLoopback }
        return localAddresses.contains(ip)
    }

    // MARK: RetroArch scanner

    private func scan(_ runtime: ServiceRuntime) {
        guard let socket = scanSocket else { return }
        let targets = configuration.retroArchScanTargets ?? UDPSocket.interfaceBroadcastAddresses(port: RetroArchLAN.port)
        for target in targets where !socket.send(RetroArchLAN.query, to: target) {
            runtime.logger.debug("RANQ not sent", metadata: ["target": "\(target)"])
        }
    }

    /// Whether an answer to our scans may come from `source`: the LAN (a private, loopback,
    /// link-local or carrier-NAT address) or a target named by address, or its /24. The scan
    /// socket's port is open to anyone: any internet host could otherwise put "RetroArch" rooms
    /// into the public lobby, and from 64 addresses push every real LAN room out.
    static func mayAnswerScan(_ source: UDPAddress, targets: [UDPAddress]?) -> Bool {
        let linkLocal = source.ip & 0xFFFF_0000 == 0xA9FE_0000       // 169.254/16: two machines on a cable
        let sharedSpace = source.ip & 0xFFC0_0000 == 0x6440_0000     // 100.64/10: a carrier's NAT
        // A target named by address, or a host in its /24 (a broadcast target's answers come
        // from the hosts of its network, never from the broadcast address itself).
        let targeted = targets?.contains { $0.ip == source.ip || $0.ip & 0xFFFF_FF00 == source.ip & 0xFFFF_FF00 } ?? false
        return source.isPrivate || source.isLoopback || linkLocal || sharedSpace || targeted
    }

    private func drainAdvertisements(_ runtime: ServiceRuntime) {
        guard let socket = scanSocket, let service else { return }
        for _ in 0..<256 {
            guard let (datagram, from) = socket.receive() else { return }
            guard Self.mayAnswerScan(from, targets: configuration.retroArchScanTargets), service.allowLan(from: from),
                  let advertisement = RetroArchAdvertisement(decoding: datagram) else {
                count("dropped")
                continue
            }
            if advertisement.frontend.hasPrefix(Self.frontendPrefix) { continue }  // one of ours
            count("advertisements")
            let ttl = UInt32(max(3, configuration.retroArchScanIntervalSeconds * 3) * 1000)
            let room = advertisement.room(from: from)
            guard admit(room.roomId, announcer: Self.retroArchAnnouncer, from: from, runtime: runtime, service: service) else { continue }
            do {
                let (_, change) = try service.registry.announce(room, announcerId: Self.retroArchAnnouncer,
                                                                ttlMs: ttl, source: .retroarchLan, at: service.now)
                if change != nil {
                    runtime.logger.info("RetroArch host found", metadata: ["host": "\(from)", "nick": "\(advertisement.nick)",
                                                                          "core": "\(advertisement.core)", "content": "\(advertisement.content)"])
                }
                service.publish(change, runtime)
            } catch {
                if service.registry.room(room.roomId) == nil { book.forget(room.roomId) }
                runtime.logger.debug("RetroArch advertisement refused", metadata: ["from": "\(from)", "error": "\(error.message)"])
            }
        }
    }
}
