import NetplayService
import NetplayWire

/// The LAN side of discovery, driven by the service reactor: the beacon listener (our own
/// protocol), the RetroArch RANQ responder (so RetroArch's LAN scan lists our LAN rooms) and the
/// RetroArch scanner (so real RetroArch hosts appear as rooms). Each part is optional; a port
/// that cannot be bound disables that part with a warning instead of stopping the service.
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

    init(configuration: DiscoveryConfiguration) {
        self.configuration = configuration
    }

    func start(runtime: ServiceRuntime, delegate: DiscoveryService) {
        service = delegate
        frontend = "\(Self.frontendPrefix) \(runtime.configuration.instance)"
        for (name, help) in [("beacons", "LAN beacons accepted."), ("queries", "RetroArch RANQ queries answered."),
                             ("advertisements", "RetroArch RANS replies received from hosts."),
                             ("dropped", "LAN datagrams dropped (malformed, rate-limited, not from a LAN address).")] {
            counters[name] = runtime.metrics.counter("netplay_discovery_lan_\(name)_total", help: help)
        }
        if let port = configuration.beaconPort {
            do {
                let socket = try UDPSocket(host: configuration.beaconBind, port: port)
                beaconSocket = socket
                beaconStatus = "listening on \(socket.localAddress)"
                watchers.append(runtime.watch(fileDescriptor: socket.fileDescriptor) { [weak self] runtime in
                    self?.drainBeacons(runtime)
                })
            } catch {
                beaconStatus = "unavailable (\(error))"
                runtime.logger.warning("LAN beacon listener disabled", metadata: ["error": "\(error)"])
            }
        }
        if let port = configuration.retroArchPort {
            do {
                let socket = try UDPSocket(host: configuration.retroArchBind, port: port)
                responderSocket = socket
                responderStatus = "answering on \(socket.localAddress)"
                watchers.append(runtime.watch(fileDescriptor: socket.fileDescriptor) { [weak self] runtime in
                    self?.drainQueries(runtime)
                })
            } catch {
                responderStatus = "unavailable (\(error))"
                runtime.logger.warning("RetroArch LAN responder disabled", metadata: ["error": "\(error)"])
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
        let roomId = LanBeaconCodec.roomId(beaconId: beacon.beaconId)
        let announcer = "lan:\(from.host)"
        if beacon.goodbye {
            if service.registry.announcer(of: roomId) == announcer {
                service.publish(service.registry.evict(roomId: roomId, reason: .lanLost), runtime)
            }
            count("beacons")
            return
        }
        guard var room = beacon.room else {
            count("dropped")
            return
        }
        room.roomId = roomId
        room.transport = .lan
        if room.hostEndpoint.isEmpty { room.hostEndpoint = "udp://\(from.host)" }
        do {
            let (_, change) = try service.registry.announce(room, announcerId: announcer,
                                                            ttlMs: LanBeaconCodec.ttlMs(intervalMs: beacon.intervalMs),
                                                            source: .lanBeacon, at: service.now)
            service.publish(change, runtime)
            count("beacons")
        } catch {
            count("dropped")
            runtime.logger.debug("LAN beacon refused", metadata: ["from": "\(from)", "error": "\(error.message)"])
        }
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
            let rooms = service.registry.allRooms.filter { $0.transport == .lan && $0.source != .retroarchLan }
            for room in rooms.prefix(configuration.maxAdvertisementsPerQuery) {
                let advertisement = RetroArchAdvertisement.advertising(room, frontend: frontend, version: NetplayVersion.current)
                socket.send(advertisement.encoded(), to: from)
            }
            runtime.logger.debug("answered RANQ", metadata: ["from": "\(from)", "rooms": "\(min(rooms.count, configuration.maxAdvertisementsPerQuery))"])
        }
    }

    // MARK: RetroArch scanner

    private func scan(_ runtime: ServiceRuntime) {
        guard let socket = scanSocket else { return }
        let targets = configuration.retroArchScanTargets ?? UDPSocket.interfaceBroadcastAddresses(port: RetroArchLAN.port)
        for target in targets where !socket.send(RetroArchLAN.query, to: target) {
            runtime.logger.debug("RANQ not sent", metadata: ["target": "\(target)"])
        }
    }

    private func drainAdvertisements(_ runtime: ServiceRuntime) {
        guard let socket = scanSocket, let service else { return }
        for _ in 0..<256 {
            guard let (datagram, from) = socket.receive() else { return }
            guard service.allowLan(from: from), let advertisement = RetroArchAdvertisement(decoding: datagram) else {
                count("dropped")
                continue
            }
            if advertisement.frontend.hasPrefix(Self.frontendPrefix) { continue }  // one of ours
            count("advertisements")
            let ttl = UInt32(max(3, configuration.retroArchScanIntervalSeconds * 3) * 1000)
            do {
                let (_, change) = try service.registry.announce(advertisement.room(from: from), announcerId: Self.retroArchAnnouncer,
                                                                ttlMs: ttl, source: .retroarchLan, at: service.now)
                if change != nil {
                    runtime.logger.info("RetroArch host found", metadata: ["host": "\(from)", "nick": "\(advertisement.nick)",
                                                                          "core": "\(advertisement.core)", "content": "\(advertisement.content)"])
                }
                service.publish(change, runtime)
            } catch {
                runtime.logger.debug("RetroArch advertisement refused", metadata: ["from": "\(from)", "error": "\(error.message)"])
            }
        }
    }
}
