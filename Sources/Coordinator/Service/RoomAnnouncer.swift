import NetplayService
import NetplayWire

/// Keeps discovery's lobby in step with the coordinator's sessions: announces a room when a
/// listed session opens or changes (occupancy, started), refreshes it within its TTL, withdraws
/// it when the session closes. Changes are coalesced per session and sent a bounded number at a
/// time; when discovery is down, rate-limits or restarts (refresh answers NOT_FOUND), rooms are
/// simply announced again later. The coordinator never waits for discovery.
final class RoomAnnouncer {
    /// The client to discovery's control endpoint, made once discovery's key is known.
    private var client: ServiceClient?
    private let makeClient: () -> ServiceClient?
    private let announcerId: String
    private let ttlMs: UInt32
    private let endpoint: String
    private var desired: [String: Room] = [:]
    private var announced: [String: UInt64] = [:]  // room id -> monotonic ms of the last announce/refresh
    private var queue: [String] = []
    private var queued: Set<String> = []
    private var inFlight = 0
    private var pausedUntilMs: UInt64 = 0
    private var notBefore: [String: UInt64] = [:]  // rooms refused for now (another announcer holds the id)
    private(set) var reachable: Bool?
    private let maxInFlight = 256

    /// An announcer to discovery at `endpoint` through the client `makeClient` returns (asked
    /// again until it returns one).
    init(endpoint: String, announcerId: String, ttlMs: UInt32, makeClient: @escaping () -> ServiceClient?) {
        self.makeClient = makeClient
        self.announcerId = announcerId
        self.ttlMs = ttlMs
        self.endpoint = endpoint
    }

    /// Rooms discovery is believed to hold.
    var announcedCount: Int { announced.count }
    /// Rooms waiting to be announced or withdrawn.
    var backlog: Int { queue.count }

    /// The room `sessionId` should have in the lobby (nil: none).
    func set(_ sessionId: String, room: Room?) {
        if let room { desired[sessionId] = room } else { desired[sessionId] = nil }
        if queued.insert(sessionId).inserted { queue.append(sessionId) }
    }

    /// Sends what is due. Called by a reactor timer.
    func tick(runtime: ServiceRuntime, nowMs: UInt64) {
        guard nowMs >= pausedUntilMs else { return }
        var sent = 0
        var postponed: [String] = []
        while inFlight < maxInFlight, !queue.isEmpty, sent < maxInFlight {
            let id = queue.removeFirst()
            queued.remove(id)
            if let at = notBefore[id] {
                if nowMs < at {
                    postponed.append(id)
                    continue
                }
                notBefore[id] = nil
            }
            if let room = desired[id] {
                send(.announceRoomRequest(AnnounceRoomRequest(room: room, ttlMs: ttlMs, announcerId: announcerId)), id: id,
                     runtime: runtime, nowMs: nowMs)
            } else if announced[id] != nil {
                send(.withdrawRoomRequest(WithdrawRoomRequest(roomId: id, announcerId: announcerId)), id: id,
                     runtime: runtime, nowMs: nowMs)
            }
            sent += 1
        }
        for id in postponed where queued.insert(id).inserted { queue.append(id) }
    }

    /// Refreshes rooms whose last announce or refresh is a third of the TTL old.
    func refreshDue(runtime: ServiceRuntime, nowMs: UInt64) {
        guard nowMs >= pausedUntilMs else { return }
        let due = announced.filter { id, at in nowMs >= at + UInt64(ttlMs / 3) && desired[id] != nil && !queued.contains(id) }
        for (id, _) in due.prefix(max(0, maxInFlight - inFlight)) {
            announced[id] = nowMs
            send(.refreshRoomRequest(RefreshRoomRequest(roomId: id, announcerId: announcerId)), id: id, runtime: runtime, nowMs: nowMs)
        }
    }

    private func send(_ body: Envelope.Body, id: String, runtime: ServiceRuntime, nowMs: UInt64) {
        if client == nil { client = makeClient() }
        guard let client else {
            noteReachable(false, runtime: runtime, error: "discovery's key is not in the trust store yet")
            pausedUntilMs = nowMs + 1_000
            retry(id)
            return
        }
        inFlight += 1
        client.request(body, timeout: 2) { [weak self] result in
            guard let self else { return }
            inFlight -= 1
            switch result {
            case .success(let reply):
                noteReachable(true, runtime: runtime)
                switch reply {
                case .announceRoomResponse, .refreshRoomResponse: announced[id] = nowMs
                case .withdrawRoomResponse: announced[id] = nil
                default: break
                }
            case .failure(.remote(let error)):
                noteReachable(true, runtime: runtime)
                switch error.code {
                case .notFound:
                    announced[id] = nil
                    retry(id)
                case .rateLimited, .overloaded, .shuttingDown, .unavailable:
                    pausedUntilMs = nowMs + UInt64(max(error.retryAfterMs, 200))
                    retry(id)
                case .permissionDenied:
                    // Another announcer holds the id (a previous coordinator with another
                    // identity): try again once its entry has expired.
                    notBefore[id] = nowMs + UInt64(ttlMs / 2)
                    retry(id)
                    runtime.logger.notice("room id held by another announcer; retrying later", metadata: ["room": "\(id)"])
                default:
                    runtime.logger.warning("discovery refused a room", metadata: ["room": "\(id)", "error": "\(error.message)"])
                }
            case .failure(let error):
                noteReachable(false, runtime: runtime, error: "\(error)")
                pausedUntilMs = nowMs + 1_000
                retry(id)
            }
        }
    }

    private func retry(_ id: String) {
        if queued.insert(id).inserted { queue.append(id) }
    }

    private func noteReachable(_ now: Bool, runtime: ServiceRuntime, error: String = "") {
        guard reachable != now else { return }
        let first = reachable == nil
        reachable = now
        if now {
            runtime.logger.info(first ? "discovery reachable" : "discovery reachable again; announcing rooms",
                                metadata: ["discovery": "\(endpoint)"])
            // After an outage discovery may have restarted empty: announce everything again.
            if !first { for id in desired.keys { retry(id) } }
        } else {
            runtime.logger.warning("discovery unreachable; sessions keep working, rooms will be announced when it is back",
                                   metadata: ["discovery": "\(endpoint)", "error": "\(error)"])
        }
    }
}
