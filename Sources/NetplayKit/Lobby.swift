import Foundation
import NetplayService
import NetplayWire
import Synchronization

/// The control plane as a frontend sees it: browse rooms (lobby and LAN), host a relay room
/// through the coordinator, join or spectate a room, start and leave. Every call is a short
/// request/reply on a connection the lobby keeps open to that service (one per concurrent call,
/// closed after ``idleConnectionSeconds`` unused), so a `NetplayLobby` can be used from any thread; the `async` variants run the call off the
/// caller's executor. A reply is waited for up to ``tries`` timeouts, and a request that is safe
/// to repeat is sent again after each: a lossy path can hold a request past one.
///
/// In a CurveZMQ-encrypted cluster (services started with `--curve-secret-key`) pass the
/// cluster's public key as `serverKey`: discovery and coordinator requests are then encrypted,
/// and so are the matches ``NetplayClient`` opens for lobby rooms (relay link, ticket renewal).
/// LAN rooms are never encrypted (the host's in-process relay is plain).
public struct NetplayLobby: Sendable {
    /// The discovery service (room list), or nil for LAN-only use.
    public var discoveryEndpoint: String?
    /// Discovery's events (PUB) endpoint a room watch subscribes to; nil: the default cluster's
    /// for the default discovery endpoint, else the discovery port + 1.
    public var discoveryEventsEndpoint: String?
    /// The coordinator (sessions, tickets), or nil for LAN-only use.
    public var coordinatorEndpoint: String?
    /// UDP port LAN beacons are heard on.
    public var lanBeaconPort: UInt16
    /// Seconds a request waits for its reply before it counts as one unanswered try.
    public var timeout: Double
    /// How many timeouts a request waits for its reply before the call fails UNAVAILABLE (at
    /// least 1). A request that is safe to repeat is sent again after each.
    public var tries = defaultTries
    /// ``tries`` unless set: also what a match's own coordinator requests (ticket renewal,
    /// leave) wait.
    public static let defaultTries = 3
    /// The cluster's CurveZMQ public key (32 bytes) when its services encrypt, nil for a plain
    /// cluster. Used for discovery and coordinator requests, not for LAN hosts.
    public var serverKey: [UInt8]?
    /// Whether ``host(settings:content:inputSize:hostName:)`` and joins as a player first measure
    /// the round trip to each of the cluster's relays (``measureRelays(timeoutMs:)``) and report
    /// it, so the coordinator runs the session on the relay nearest its players.
    public var measuresRelays = true
    /// How long a join to a room whose host approves joiners waits for the host's decision
    /// before it gives up (TIMEOUT); see ``NetplaySettings/approveJoiners``.
    public var approvalWaitSeconds: Double = 60
    /// How long a connection to a cluster service stays open unused after a call before it is
    /// closed (the next call opens a new one); see ``LobbyConnections``. Infinity keeps it for
    /// the lobby's life.
    public var idleConnectionSeconds: Double = 30
    /// The open connections every copy of this lobby shares.
    let connections = LobbyConnections()

    /// A lobby over the cluster at these endpoints (defaults: the local cluster, unencrypted).
    public init(discovery: String? = ServiceDefaults.discoveryEndpoint,
                coordinator: String? = ServiceDefaults.coordinatorEndpoint,
                lanBeaconPort: UInt16 = LanBeacon.defaultPort, timeout: Double = 2, serverKey: [UInt8]? = nil,
                discoveryEvents: String? = nil) {
        discoveryEndpoint = discovery
        discoveryEventsEndpoint = discoveryEvents
        coordinatorEndpoint = coordinator
        self.lanBeaconPort = lanBeaconPort
        self.timeout = timeout
        self.serverKey = serverKey
    }

    /// One request to a cluster service (`encrypted`: with ``serverKey``) or a LAN host, on the
    /// lobby's connection to it. The reply is waited for up to ``tries`` timeouts; `repeatable`
    /// (a read, or a create or join with its idempotency key) sends the request again
    /// after each one that passes without it.
    /// Asks `what` at `endpoint`. `pacedRead`: a discovery read, which discovery rate-limits per
    /// address; a refusal for the rate is waited out (the wait it names, at most 1 s at a time
    /// and ``rateLimitPatienceMs`` in all) and the read asked again. No other call waits: a
    /// refused create or join says so at once.
    func call(_ endpoint: String?, _ what: String, _ body: Envelope.Body, encrypted: Bool = true,
              repeatable: Bool = false, pacedRead: Bool = false) throws -> Envelope.Body {
        guard let endpoint else { throw NetplayError(.unavailable, "No \(what) is configured.") }
        let key = encrypted ? serverKey : nil
        let client: BlockingClient
        do { client = try connections.take(endpoint, serverKey: key, timeout: timeout) } catch {
            throw NetplayError(.unavailable, "Cannot reach the \(what) at \(endpoint): \(error)")
        }
        func ask() throws -> Envelope {
            do {
                return try client.requestEnvelope(body, tries: tries, resending: repeatable)
            } catch .timeout(_, let seconds) {
                // An encrypted service drops a handshake with the wrong key (or none) without a word,
                // so silence is all a key mismatch looks like from here.
                let why = !encrypted ? "is it running?"
                    : key == nil ? "not running, or the cluster is encrypted and no CurveZMQ server key was given"
                    : "not running, or the CurveZMQ server key is not the cluster's"
                throw NetplayError(.unavailable, "The \(what) at \(endpoint) did not answer within \(Self.seconds(seconds)) s (\(why)).")
            } catch {
                throw NetplayError(.unavailable, "The \(what) at \(endpoint) did not answer: \(error)")
            }
        }
        // A room watch or listing of many pages outruns discovery's burst.
        let reply = pacedRead ? try BlockingClient.paced(patience: Double(Self.rateLimitPatienceMs) / 1000, ask) : try ask()
        // A LAN host's connection is not kept: the host goes away with its room, and a kept
        // socket would keep reconnecting to it for the lobby's life.
        if encrypted { connections.giveBack(client, serverKey: key, idleSeconds: idleConnectionSeconds) }
        if case .error(let error) = reply.body { throw NetplayError(error.code, error.message) }
        return reply.body
    }

    /// How long a repeatable read waits out a service's rate limit in all, milliseconds.
    static let rateLimitPatienceMs = 5_000

    private static func seconds(_ value: Double) -> String {
        let milliseconds = (value * 1000).rounded()
        return milliseconds.truncatingRemainder(dividingBy: 1000) == 0 ? String(Int(milliseconds / 1000)) : String(milliseconds / 1000)
    }

    // MARK: Browsing

    /// The most pages one listing or watch snapshot asks for.
    static let maxPages = 1_000

    /// The token of the page after one of `count` rooms: a discovery whose pages do not move on
    /// (an empty page with a token, a token sent before, pages past ``maxPages``) would be
    /// asked forever, so that ends the call with a reason.
    static func nextPage(_ walk: inout PageWalk, after count: Int, nextToken: String) throws -> String {
        do { return try walk.next(after: count, nextToken: nextToken) } catch {
            throw NetplayError(.internal, "The discovery service broke its paging: \(error).")
        }
    }

    /// Rooms listed in the lobby matching `filter` (in-progress rooms included by default).
    public func lobbyRooms(filter: RoomFilter = RoomFilter(includeInProgress: true), limit: Int = 500) throws -> [NetplayRoom] {
        var rooms: [NetplayRoom] = []
        var token = ""
        var walk = PageWalk(listing: "its room list", maxPages: Self.maxPages)
        repeat {
            let body = try call(discoveryEndpoint, "discovery service",
                                .listRoomsRequest(ListRoomsRequest(filter: filter, pageSize: 100, pageToken: token)),
                                repeatable: true, pacedRead: true)
            guard case .listRoomsResponse(let page) = body else {
                throw NetplayError(.internal, "The discovery service answered \(body.name) to a room list.")
            }
            rooms += page.rooms.map(NetplayRoom.init)
            token = try Self.nextPage(&walk, after: page.rooms.count, nextToken: page.nextPageToken)
        } while !token.isEmpty && rooms.count < limit
        return Array(rooms.prefix(limit))
    }

    /// One lobby room by id (a session id, e.g. from an invite link); NOT_FOUND when discovery
    /// does not list it.
    public func lobbyRoom(id: String) throws -> NetplayRoom {
        let body = try call(discoveryEndpoint, "discovery service", .getRoomRequest(GetRoomRequest(roomId: id)), repeatable: true,
                            pacedRead: true)
        guard case .getRoomResponse(let found) = body else {
            throw NetplayError(.internal, "The discovery service answered \(body.name) to a room lookup.")
        }
        guard found.room.roomId == id else {
            throw NetplayError(.internal, "The discovery service answered a lookup of room \(id) with another room.")
        }
        return NetplayRoom(found.room)
    }

    /// Rooms heard on the LAN within `milliseconds`.
    public func lanRooms(listeningFor milliseconds: Int = 1_200) throws -> [NetplayRoom] {
        try LanBeacon.listen(port: lanBeaconPort, milliseconds: milliseconds)
    }

    /// The most distinct endpoints one ``measurePings(_:timeoutMs:)`` measures.
    public static let maxPingedEndpoints = 64

    /// Lobby and LAN rooms together (the room browser's two sections), each with its ping (see
    /// ``measurePings(_:timeoutMs:)``); a part that cannot be reached is left out.
    public func browse(filter: RoomFilter = RoomFilter(includeInProgress: true), lanMilliseconds: Int = 1_200) -> [NetplayRoom] {
        let lan = (try? lanRooms(listeningFor: lanMilliseconds)) ?? []
        let lobby = discoveryEndpoint == nil ? [] : ((try? lobbyRooms(filter: filter)) ?? [])
        var seen = Set<String>()
        return measurePings((lan + lobby).filter { seen.insert($0.id).inserted })
    }

    /// `rooms` with ``NetplayRoom/pingMs`` set: the round trip of a `Ping` to each room's
    /// endpoint (a LAN host's relay, or a lobby room's relay, encrypted like the cluster) on a
    /// connection already set up by a first ping, all endpoints at once, each request waiting at
    /// most `timeoutMs`; nil where none came back. The first ``maxPingedEndpoints`` tcp://
    /// endpoints are measured, within twice `timeoutMs` in all: a listing naming hundreds of
    /// endpoints that do not answer took a request timeout each, a few at a time (a minute and
    /// more), and had the app connect to every host a discovery chose.
    public func measurePings(_ rooms: [NetplayRoom], timeoutMs: Int = 500) -> [NetplayRoom] {
        var distinct = Set<String>()
        let endpoints = Array(rooms.map(\.endpoint).filter { $0.hasPrefix("tcp://") && distinct.insert($0).inserted }
            .prefix(Self.maxPingedEndpoints))
        let pings = roundTrips(to: endpoints.map { endpoint in (endpoint, rooms.contains { $0.endpoint == endpoint && $0.isLAN }) },
                               pings: 1, timeoutMs: timeoutMs)
        return rooms.map { room in
            var room = room
            room.pingMs = pings[room.endpoint].map { Int($0 / 1000) }
            return room
        }
    }

    /// The round trip to each live relay of the cluster that takes sessions (the coordinator's
    /// relay list, at most 32): the best of three `Ping`s on the relay's public endpoint after a
    /// first one that sets the connection up, all relays at once, each request waiting at most
    /// `timeoutMs`. Relays that did not answer are left out; no coordinator, no relays.
    public func measureRelays(timeoutMs: Int = 500) -> [RelayRtt] {
        guard case .listRelaysResponse(let list)? = try? call(coordinatorEndpoint, "coordinator", .listRelaysRequest(ListRelaysRequest()),
                                                              repeatable: true) else {
            return []
        }
        let relays = list.relays.filter { !$0.draining && !$0.endpoint.isEmpty }.prefix(32)
        let measured = roundTrips(to: relays.map { ($0.endpoint, false) }, pings: 3, timeoutMs: timeoutMs)
        return relays.compactMap { relay in
            measured[relay.endpoint].map { RelayRtt(relayId: relay.relayId, rttUs: UInt32(clamping: max($0, 1))) }
        }
    }

    /// The best of `pings` round trips (microseconds) to each endpoint (`plain`: a LAN host's,
    /// never encrypted), after one ping that pays for the connection's handshakes; endpoints
    /// that did not answer are missing.
    private func roundTrips(to endpoints: [(endpoint: String, plain: Bool)], pings: Int, timeoutMs: Int) -> [String: UInt64] {
        let measured = Mutex<[String: UInt64]>([:])
        let key = serverKey
        // Twice a request's timeout in all: an endpoint not begun by then is not measured.
        let deadline = ContinuousClock.now + .milliseconds(2 * timeoutMs)
        DispatchQueue.concurrentPerform(iterations: endpoints.count) { index in
            let (endpoint, plain) = endpoints[index]
            // Each request waits no longer than the time left.
            func left() -> Double {
                let remaining = ContinuousClock.now.duration(to: deadline)
                return min(Double(timeoutMs) / 1000, Double(remaining.components.seconds) + Double(remaining.components.attoseconds) / 1e18)
            }
            guard left() > 0,
                  let client = try? BlockingClient(endpoint: endpoint, timeout: left(), serverKey: plain ? nil : key),
                  case .pong? = try? client.request(.ping(Ping(nonce: 0))) else { return }
            var best: UInt64?
            for nonce in 1 ... UInt64(max(pings, 1)) where left() > 0 {
                client.timeout = left()
                let started = ContinuousClock.now
                guard case .pong? = try? client.request(.ping(Ping(nonce: nonce))) else { break }
                let elapsed = ContinuousClock.now - started
                let micros = UInt64(elapsed.components.seconds) * 1_000_000 + UInt64(elapsed.components.attoseconds / 1_000_000_000_000)
                best = min(best ?? .max, micros)
            }
            if let best { measured.withLock { $0[endpoint] = best } }
        }
        return measured.withLock { $0 }
    }

    /// Async form of ``browse(filter:lanMilliseconds:)``.
    public func browse(filter: RoomFilter = RoomFilter(includeInProgress: true), lanMilliseconds: Int = 1_200) async -> [NetplayRoom] {
        let lobby = self
        return await Task.detached { lobby.browse(filter: filter, lanMilliseconds: lanMilliseconds) }.value
    }

    // MARK: Sessions

    /// Hosts a relay room through the coordinator; the host takes ``NetplaySettings/hostSlot``.
    /// When a call fails UNAVAILABLE the room may still have been made (only the answer was
    /// lost): calling again with the same arguments (on any lobby of the process) asks under the
    /// same idempotency key and gets that room back rather than a second one (see ``RetryKeys``).
    public func host(settings: NetplaySettings, content: ContentInfo, inputSize: Int, hostName: String) throws -> Admission {
        if let problem = settings.validationError(inputSize: inputSize) { throw NetplayError(.badRequest, problem) }
        var request = CreateSessionRequest(settings: settings.sessionSettings(content: content, inputSize: inputSize),
                                           hostName: String(hostName.prefix(64)), preferredSlot: UInt32(settings.hostSlot))
        try NetplayError.requireWireFit(request, "room (its settings and content)")
        let rtts = measuresRelays ? measureRelays() : []
        let body = try withRetryKey(coordinatorEndpoint, request) { key in
            request.idempotencyKey = key
            request.relayRtts = rtts
            return try call(coordinatorEndpoint, "coordinator", .createSessionRequest(request), repeatable: true)
        }
        guard case .createSessionResponse(let response) = body, let ticket = response.ticket else {
            throw NetplayError(.internal, "The coordinator answered \(body.name) without a ticket.")
        }
        return Admission(ticket: ticket, relayEndpoint: ticket.relayEndpoint, participantToken: response.participantToken,
                         coordinatorEndpoint: coordinatorEndpoint)
    }

    /// Joins `room` as a player (or spectator): through the coordinator for lobby rooms, through
    /// the host's relay for LAN rooms. Like ``host(settings:content:inputSize:hostName:)``, a
    /// call repeated after UNAVAILABLE (or a TIMEOUT waiting for the host's approval) with the
    /// same arguments asks under the first call's idempotency key: the seat it may have got, not
    /// a second one (a coordinator and a LAN host both answer a known key with its seat).
    public func join(_ room: NetplayRoom, name: String, role: Role = .player, password: String = "",
                     content: ContentInfo = ContentInfo(), preferredSlot: Int = 0) throws -> Admission {
        let measure = measuresRelays && role == .player && !room.isLAN
        var request = JoinSessionRequest(sessionId: room.sessionId, role: role, name: String(name.prefix(64)),
                                         password: password, content: content, preferredSlot: UInt32(preferredSlot))
        try NetplayError.requireWireFit(request, "join (its password and content)")
        let rtts = measure ? measureRelays() : []
        let endpoint = room.isLAN ? room.endpoint : coordinatorEndpoint
        let body = try withRetryKey(endpoint, request) { key in
            request.idempotencyKey = key
            request.relayRtts = rtts
            return try askUntilDecided { try call(endpoint, room.isLAN ? "LAN host" : "coordinator", .joinSessionRequest(request),
                                                  encrypted: !room.isLAN, repeatable: true) }
        }
        guard case .joinSessionResponse(let response) = body, let ticket = response.ticket else {
            throw NetplayError(.internal, "The join was answered with \(body.name) without a ticket.")
        }
        return Admission(ticket: ticket, relayEndpoint: room.isLAN ? room.endpoint : ticket.relayEndpoint,
                         participantToken: response.participantToken,
                         coordinatorEndpoint: room.isLAN ? nil : coordinatorEndpoint)
    }

    /// Joins the session `sessionId` without browsing (for a shared link, see
    /// ``NetplayInvite/join(name:role:password:content:preferredSlot:timeout:)``).
    public func join(sessionId: String, name: String, role: Role = .player, password: String = "",
                     content: ContentInfo = ContentInfo(), preferredSlot: Int = 0) throws -> Admission {
        var room = NetplayRoom(Room(roomId: sessionId, sessionId: sessionId))
        room.isLAN = false
        return try join(room, name: name, role: role, password: password, content: content, preferredSlot: preferredSlot)
    }

    /// Host: tells the coordinator the match started (the room shows "in progress").
    public func markStarted(_ admission: Admission) throws {
        guard admission.coordinatorEndpoint != nil else { return }
        _ = try call(admission.coordinatorEndpoint, "coordinator", .startSessionRequest(StartSessionRequest(
            sessionId: admission.sessionId, participantId: admission.ticket.participantId,
            participantToken: admission.participantToken)))
    }

    /// `send` with the idempotency key of an earlier unanswered `request` to `endpoint` (a user's
    /// retry of a create or join whose answer was lost), or a new key (always, for no endpoint);
    /// see ``RetryKeys``. `request` is passed without its key and measurements.
    private func withRetryKey<T>(_ endpoint: String?, _ request: some WireMessage, _ send: (String) throws -> T) throws -> T {
        guard let endpoint, let bytes = try? request.encoded() else { return try send(UUID().uuidString) }
        // One store for the process: a retry through another lobby (an invite's own) is known too.
        return try RetryKeys.shared.withKey(endpoint: endpoint, request: bytes, send)
    }

    /// Leaves the session at the coordinator (the host leaving ends it).
    public func leave(_ admission: Admission) throws {
        guard admission.coordinatorEndpoint != nil else { return }
        _ = try call(admission.coordinatorEndpoint, "coordinator", .leaveSessionRequest(LeaveSessionRequest(
            sessionId: admission.sessionId, participantId: admission.ticket.participantId,
            participantToken: admission.participantToken)))
    }
}
