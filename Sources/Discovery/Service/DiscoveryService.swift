import Foundation
import NetplayAuth
import NetplayLAN
import NetplayService
import NetplayWire

/// netplay-discovery's logic on the shared runtime: the room registry behind requests (announce,
/// refresh, withdraw, get, list, watch), `rooms.*` events, TTL expiry, per-announcer rate limits,
/// and the LAN protocols (our beacon listener, RetroArch's RANQ responder and scanner).
public final class DiscoveryService: Service {
    /// The registry (reactor thread only).
    public let registry: RoomRegistry
    private let configuration: DiscoveryConfiguration
    private var announceLimiter: RateLimiter<String>
    private var lanLimiter: RateLimiter<UInt32>
    private var readLimiter: RateLimiter<String>
    private let origin = ContinuousClock.now
    private let lan: LanDiscovery

    private var roomsGauge: Gauge?
    private var changesTotal: Counter?
    private var rateLimitedTotal: Counter?

    /// Creates the service; sockets open in ``start(runtime:)``.
    public init(configuration: DiscoveryConfiguration = DiscoveryConfiguration()) {
        self.configuration = configuration
        registry = RoomRegistry(limits: configuration.limits)
        announceLimiter = RateLimiter(ratePerSecond: configuration.announceRatePerSecond, burst: configuration.announceBurst)
        lanLimiter = RateLimiter(ratePerSecond: configuration.lanRatePerSecond, burst: configuration.lanBurst)
        readLimiter = RateLimiter(ratePerSecond: configuration.readRatePerSecond, burst: configuration.readBurst)
        lan = LanDiscovery(configuration: configuration)
    }

    /// Now, for the registry.
    public var now: RegistryTime { .now(since: origin) }

    private var nowSeconds: Double { Double(now.monotonicMs) / 1000 }

    // MARK: Service

    public func start(runtime: ServiceRuntime) throws {
        roomsGauge = runtime.metrics.gauge("netplay_discovery_rooms", help: "Rooms in the registry.")
        changesTotal = runtime.metrics.counter("netplay_discovery_room_changes_total", help: "Registry changes published (added, updated, removed).")
        rateLimitedTotal = runtime.metrics.counter("netplay_discovery_rate_limited_total", help: "Requests refused by a rate limit.")
        runtime.every(seconds: configuration.sweepIntervalSeconds) { [weak self] runtime in self?.sweep(runtime) }
        if configuration.syncIntervalSeconds > 0 {
            runtime.every(seconds: configuration.syncIntervalSeconds) { [weak self] runtime in self?.publishSync(runtime) }
        }
        runtime.every(seconds: 30) { [weak self] _ in
            guard let self else { return }
            announceLimiter.prune(now: nowSeconds)
            lanLimiter.prune(now: nowSeconds)
            readLimiter.prune(now: nowSeconds)
        }
        lan.start(runtime: runtime, delegate: self)
        runtime.logger.info("discovery ready", metadata: [
            "default_ttl_ms": "\(configuration.limits.defaultTTLMs)",
            "beacon": "\(lan.beaconStatus)", "retroarch_responder": "\(lan.responderStatus)",
            "retroarch_scan": "\(lan.scanStatus)",
        ])
    }

    /// Who announces: the cluster member whose key sent the request. The `announcer_id` a
    /// request carries is ignored: an identity is never self-asserted.
    static func announcer(of request: Request) throws(ServiceError) -> String {
        guard let instance = request.caller.clusterInstance else {
            throw ServiceError(.permissionDenied, "Only cluster members announce rooms.")
        }
        return instance
    }

    public func handle(_ request: Request, runtime: ServiceRuntime) throws(ServiceError) -> HandlerOutcome {
        switch request.body {
        case .announceRoomRequest(let announce):
            let announcer = try Self.announcer(of: request)
            try limit(announcer)
            // An announcer speaks for the lobby; a RetroArch host on a relay is a lobby room of its
            // own kind. LAN sources are discovery's own to set.
            let source: RoomSource = announce.room.source == .retroarchRelay ? .retroarchRelay : .lobby
            let (response, change) = try registry.announce(announce.room, announcerId: announcer, ttlMs: announce.ttlMs, source: source, at: now)
            publish(change, runtime)
            return .reply(.announceRoomResponse(response))
        case .refreshRoomRequest(var refresh):
            refresh.announcerId = try Self.announcer(of: request)
            try limit(refresh.announcerId)
            let (response, change) = try registry.refresh(refresh, at: now)
            publish(change, runtime)
            return .reply(.refreshRoomResponse(response))
        case .withdrawRoomRequest(let withdraw):
            let announcer = try Self.announcer(of: request)
            try limit(announcer)
            let (response, change) = try registry.withdraw(roomId: withdraw.roomId, announcerId: announcer)
            publish(change, runtime)
            return .reply(.withdrawRoomResponse(response))
        case .getRoomRequest(let get):
            try limitRead(request, cost: 1)
            guard let room = registry.room(get.roomId) else {
                throw ServiceError(.notFound, "No room '\(get.roomId)'.", field: "GetRoomRequest.room_id")
            }
            return .reply(.getRoomResponse(GetRoomResponse(room: room)))
        case .listRoomsRequest(let list):
            let page = try readPage(request, list.filter, size: list.pageSize == 0 ? 100 : Int(list.pageSize), token: list.pageToken,
                                    tokenField: "ListRoomsRequest.page_token")
            return .reply(.listRoomsResponse(ListRoomsResponse(rooms: page.rooms, nextPageToken: page.next,
                                                               totalMatching: UInt32(clamping: page.total),
                                                               sequence: registry.sequence)))
        case .watchRoomsRequest(let watch):
            let page = try readPage(request, watch.filter, size: watch.pageSize == 0 ? 500 : Int(watch.pageSize), token: watch.pageToken,
                                    tokenField: "WatchRoomsRequest.page_token")
            return .reply(.watchRoomsSnapshot(WatchRoomsSnapshot(sequence: registry.sequence, rooms: page.rooms,
                                                                 nextPageToken: page.next, topicPrefix: RoomTopics.prefix)))
        default:
            throw ServiceError(.unknownRequest, "Discovery does not handle \(request.body.name).")
        }
    }

    public var status: String {
        "ok: \(registry.count) rooms; beacon \(lan.beaconStatus); retroarch \(lan.responderStatus), scan \(lan.scanStatus)"
    }

    public var healthDetails: [(key: String, value: String)] {
        [("rooms", "\(registry.count)"), ("lan_beacon", lan.beaconStatus), ("retroarch_responder", lan.responderStatus),
         ("retroarch_scan", lan.scanStatus)]
    }

    public func introspect(section: String) -> JSONValue {
        var document: [String: JSONValue] = [
            "rooms_total": .number(registry.count),
            "sequence": .number(registry.sequence),
            "announcers": .object(registry.announcerCounts.mapValues { .number($0) }),
            "limits": [
                "default_ttl_ms": .number(configuration.limits.defaultTTLMs),
                "max_ttl_ms": .number(configuration.limits.maxTTLMs),
                "max_rooms": .number(configuration.limits.maxRooms),
                "max_rooms_per_announcer": .number(configuration.limits.maxRoomsPerAnnouncer),
                "announce_rate_per_second": .double(configuration.announceRatePerSecond),
                "announce_burst": .double(configuration.announceBurst),
            ],
            "lan": lan.introspect(),
        ]
        if section == "" || section == "rooms" {
            document["rooms"] = .array(registry.allRooms.prefix(1000).map { room in
                [
                    "room_id": .string(room.roomId), "game": .string(room.contentInfo.gameName),
                    "host": .string(room.hostName), "players": .string("\(room.currentPlayers)/\(room.maxPlayers)"),
                    "source": .string(room.source.protoName), "transport": .string(room.transport.protoName),
                    "revision": .number(room.revision), "expires_at_unix_ms": .number(room.expiresAtUnixMs),
                ]
            })
        }
        return .object(document)
    }

    public func stop(runtime: ServiceRuntime) {
        lan.stop(runtime: runtime)
    }

    // MARK: Internals

    private func limit(_ announcerId: String) throws(ServiceError) {
        if case .limited(let retry) = announceLimiter.take(announcerId, now: nowSeconds) {
            rateLimitedTotal?.increment()
            throw ServiceError(.rateLimited, "Announcer '\(announcerId)' sends too many requests; retry in \(retry) ms.",
                               retryAfterMs: retry)
        }
    }

    /// One page of rooms for a list or watch request, its read cost spent first (a token per
    /// 100 rooms asked).
    private func readPage(_ request: Request, _ filter: RoomFilter?, size: Int, token: String,
                          tokenField: String) throws(ServiceError) -> (rooms: [Room], next: String, total: Int) {
        try limitRead(request, cost: Double((size + 99) / 100))
        return try registry.page(filter: filter ?? RoomFilter(), pageSize: size, pageToken: token, tokenField: tokenField)
    }

    /// Spends `cost` read tokens of an anonymous request's source address (cluster members,
    /// operators and sources with no address, this machine's ipc, are not limited).
    private func limitRead(_ request: Request, cost: Double) throws(ServiceError) {
        guard request.caller == .anonymous, !request.source.isEmpty else { return }
        if case .limited(let retry) = readLimiter.take(request.source, cost: cost, now: nowSeconds) {
            rateLimitedTotal?.increment()
            throw ServiceError(.rateLimited, "Too many room reads from this address; retry in \(retry) ms.", retryAfterMs: retry)
        }
    }

    func publish(_ change: RoomChange?, _ runtime: ServiceRuntime) {
        guard let change else { return }
        changesTotal?.increment()
        roomsGauge?.set(Double(registry.count))
        runtime.publish(topic: change.topic, change.body)
    }

    private func sweep(_ runtime: ServiceRuntime) {
        for change in registry.expire(at: now) {
            if case .removed(let removed) = change {
                runtime.logger.debug("room expired", metadata: ["room": "\(removed.roomId)", "reason": "\(removed.reason.protoName)"])
            }
            publish(change, runtime)
        }
    }

    private func publishSync(_ runtime: ServiceRuntime) {
        runtime.publish(topic: RoomTopics.sync, .roomsSync(RoomsSync(sequence: registry.sequence,
                                                                       roomCount: UInt32(clamping: registry.count),
                                                                       timestampUnixMs: now.unixMs)))
    }

    /// Whether a LAN datagram from `address` may be processed now (per-sender rate limit).
    func allowLan(from address: UDPAddress) -> Bool {
        if case .limited = lanLimiter.take(address.ip, now: nowSeconds) {
            rateLimitedTotal?.increment()
            return false
        }
        return true
    }
}
