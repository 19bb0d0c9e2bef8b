import Foundation
import NetplayService
import NetplayTestSupport
import NetplayWire
import Synchronization
import Testing
@testable import NetplayKit

/// A path to a real coordinator that loses the answers to creates and joins (or the answers
/// `loses` names) while ``losing`` is set (the requests go through): what a player on a bad link
/// sees when the coordinator did what it was asked and only its reply went missing.
final class AnswerLosingPath: Sendable {
    let losing = Atomic<Bool>(true)
    /// Answers thrown away so far.
    let lost = Atomic<Int>(0)
    private let path = Mutex<InterceptingPath?>(nil)

    var endpoint: String { path.withLock { $0!.endpoint } }

    init(to coordinator: String, loses: @escaping @Sendable (Envelope.Body) -> Bool = \.isCreateOrJoinAnswer) throws {
        let intercepting = try InterceptingPath(to: coordinator, toClient: { [weak self] _, envelope in
            guard let self, losing.load(ordering: .relaxed), let envelope, loses(envelope.body) else { return .forward }
            lost.add(1, ordering: .relaxed)
            return .drop
        })
        path.withLock { $0 = intercepting }
    }

    func stop() { path.withLock { $0?.stop() } }
}

extension Envelope.Body {
    /// A create's or join's answer (what ``AnswerLosingPath`` loses unless told otherwise).
    var isCreateOrJoinAnswer: Bool {
        switch self {
        case .createSessionResponse, .joinSessionResponse: true
        default: false
        }
    }
}

@Suite("NetplayKit: a retried create or join whose answer was lost", .ownThread)
struct RetryKeysTests {
    struct Unanswered: Error {}

    func unanswered() -> NetplayError { NetplayError(.unavailable, "did not answer") }

    @Test func aRetryOfAnUnansweredRequestCarriesItsKey() throws {
        let keys = RetryKeys()
        var first = ""
        #expect(throws: NetplayError.self) {
            try keys.withKey(endpoint: "tcp://c:1", request: [1, 2, 3]) { key -> Void in first = key; throw unanswered() }
        }
        let second = try keys.withKey(endpoint: "tcp://c:1", request: [1, 2, 3]) { $0 }
        #expect(!first.isEmpty && second == first)
        #expect(keys.count == 0, "an answered request's key is forgotten")
        let third = try keys.withKey(endpoint: "tcp://c:1", request: [1, 2, 3]) { $0 }
        #expect(third != first, "a new call after an answer is a new request")
    }

    @Test func aRefusalIsAnAnswerAndAnyOtherRequestOrPlaceGetsItsOwnKey() throws {
        let keys = RetryKeys()
        var first = ""
        _ = try? keys.withKey(endpoint: "tcp://c:1", request: [1]) { key -> Void in first = key; throw unanswered() }
        #expect(try keys.withKey(endpoint: "tcp://c:1", request: [2]) { $0 } != first, "another request")
        #expect(try keys.withKey(endpoint: "tcp://c:2", request: [1]) { $0 } != first, "another coordinator")
        #expect(keys.count == 1)
        _ = try? keys.withKey(endpoint: "tcp://c:1", request: [1]) { key -> Void in
            #expect(key == first)
            throw NetplayError(.permissionDenied, "wrong password")
        }
        #expect(keys.count == 0, "the service's refusal is its answer: the next try is a new request")
        // A TIMEOUT waiting for the host's approval keeps the key: the ask is on file there.
        _ = try? keys.withKey(endpoint: "tcp://c:1", request: [1]) { _ -> Void in throw NetplayError(.timeout, "no decision") }
        #expect(keys.count == 1)
        _ = try? keys.withKey(endpoint: "tcp://c:1", request: [1]) { _ -> Void in throw Unanswered() }
        #expect(keys.count == 0, "any other failure forgets it")
    }

    @Test func ofTwoUnansweredCallsAtOnceTheFirstKeyIsKept() throws {
        let keys = RetryKeys()
        var (first, second) = ("", "")
        _ = try? keys.withKey(endpoint: "tcp://c:1", request: [7]) { key -> Void in
            first = key
            // A second call of the same request, while the first is under way.
            _ = try? keys.withKey(endpoint: "tcp://c:1", request: [7]) { key -> Void in second = key; throw unanswered() }
            throw unanswered()
        }
        #expect(first != second && !second.isEmpty)
        #expect(try keys.withKey(endpoint: "tcp://c:1", request: [7]) { $0 } == second, "the key kept first is not replaced")
    }

    @Test func keysAreForgottenAfterTheirLifetimeAndBeyondTheLimit() throws {
        let keys = RetryKeys()
        let start = ContinuousClock.now
        var first = ""
        _ = try? keys.withKey(endpoint: "tcp://c:1", request: [0], now: start) { key -> Void in first = key; throw unanswered() }
        let late = try keys.withKey(endpoint: "tcp://c:1", request: [0], now: start + RetryKeys.lifetime) { $0 }
        #expect(late != first)
        for index in 0 ... RetryKeys.limit {
            _ = try? keys.withKey(endpoint: "tcp://c:1", request: [UInt8(index)], now: start + .seconds(index)) { _ -> Void in
                throw unanswered()
            }
        }
        #expect(keys.count == RetryKeys.limit, "the oldest is forgotten")
    }

    /// Against a real coordinator behind a path that loses its answers: the host's first try
    /// and a joiner's first try fail UNAVAILABLE though both went through; their retries get
    /// the same room and the same seat, and the lobby lists one room with two players.
    @Test(.timeLimit(.minutes(2)))
    func aRetriedHostAndJoinGetTheRoomAndSeatTheirLostAnswersGave() throws {
        let cluster = try TestCluster(TestCluster.Options(secret: String(repeating: "4b", count: 32)))
        let path = try AnswerLosingPath(to: cluster.coordinatorEndpoint)
        defer { path.stop() }
        var lobby = NetplayLobby(discovery: cluster.discoveryEndpoint, coordinator: path.endpoint, timeout: 0.4)
        lobby.measuresRelays = false
        lobby.tries = 2
        let content = ContentInfo(gameName: "Arena", crc32: 0xA7E7_A001, coreId: "netplay.games.arena", coreVersion: "1")
        var settings = NetplaySettings(roomName: "lost answers")
        settings.password = "sesame"

        let hostFailure = #expect(throws: NetplayError.self) {
            try lobby.host(settings: settings, content: content, inputSize: 1, hostName: "alice")
        }
        #expect(hostFailure?.code == .unavailable)
        // (The create may still be hashing its password when the lobby gives up.)
        #expect(eventually(within: 10) { path.lost.load(ordering: .relaxed) >= 1 }, "the answer was lost on the way")
        var room: NetplayRoom?
        #expect(eventually(within: 10) {
            room = try? lobby.lobbyRooms().first { $0.roomName == "lost answers" }
            return room != nil
        }, "the first create went through")
        let listed = try #require(room)

        let joinFailure = #expect(throws: NetplayError.self) {
            try lobby.join(listed, name: "bob", password: "sesame", content: content)
        }
        #expect(joinFailure?.code == .unavailable)

        path.losing.store(false, ordering: .relaxed)
        // The player's retries, through another lobby of the same app (a fresh one, as after
        // reopening the menu): the same requests.
        var again = NetplayLobby(discovery: cluster.discoveryEndpoint, coordinator: path.endpoint, timeout: 2)
        again.measuresRelays = false
        let host = try again.host(settings: settings, content: content, inputSize: 1, hostName: "alice")
        #expect(host.sessionId == listed.sessionId, "the retry got the room its lost answer made")
        let bob = try again.join(listed, name: "bob", password: "sesame", content: content)
        #expect(bob.sessionId == listed.sessionId && bob.slot == 2)

        #expect(eventually(within: 10) {
            let rooms = (try? again.lobbyRooms().filter { $0.roomName == "lost answers" }) ?? []
            return rooms.count == 1 && rooms[0].currentPlayers == 2
        }, "one room with alice and bob: \(String(describing: try? again.lobbyRooms().map { ($0.id, $0.currentPlayers) }))")
        // A new host of the same room, once the first was answered, is a new room.
        let second = try again.host(settings: settings, content: content, inputSize: 1, hostName: "alice")
        #expect(second.sessionId != listed.sessionId)
    }
    /// A mistyped password whose refusals were lost: the lobby sent the join again after each of
    /// its timeouts, each copy arriving after the first had been refused, and the player then
    /// tried again (the same request, under the kept key). The coordinator refused every copy as
    /// the first, and the room's budget of three attempts spent one on them all.
    @Test(.timeLimit(.minutes(2)))
    func aMistypedPasswordWhoseRefusalsWereLostSpendsOneAttempt() throws {
        var options = TestCluster.Options(secret: String(repeating: "4c", count: 32))
        // A cheap hash: each refusal is sent long before the lobby's next copy.
        options.coordinatorArguments = ["--password-attempts", "3", "--password-cost", "minimum"]
        let cluster = try TestCluster(options)
        let path = try AnswerLosingPath(to: cluster.coordinatorEndpoint) { body in
            if case .error(let error) = body { return error.code == .wrongPassword }
            return false
        }
        defer { path.stop() }
        let content = ContentInfo(gameName: "Arena", crc32: 0xA7E7_A001, coreId: "netplay.games.arena", coreVersion: "1")
        var settings = NetplaySettings(roomName: "lost refusals")
        settings.password = "sesame"
        var direct = NetplayLobby(discovery: cluster.discoveryEndpoint, coordinator: cluster.coordinatorEndpoint)
        direct.measuresRelays = false
        let host = try direct.host(settings: settings, content: content, inputSize: 1, hostName: "alice")
        var listed: NetplayRoom?
        #expect(eventually(within: 10) {
            listed = try? direct.lobbyRooms().first { $0.sessionId == host.sessionId }
            return listed != nil
        })
        let room = try #require(listed)
        var lobby = NetplayLobby(discovery: cluster.discoveryEndpoint, coordinator: path.endpoint, timeout: 0.4)
        lobby.measuresRelays = false
        lobby.tries = 3

        let lost = #expect(throws: NetplayError.self) { try lobby.join(room, name: "bob", password: "sesane", content: content) }
        #expect(lost?.code == .unavailable)
        #expect(eventually(within: 5) { path.lost.load(ordering: .relaxed) == 3 },
                "the join and its two copies were each refused, and each refusal lost")
        path.losing.store(false, ordering: .relaxed)
        let retried = #expect(throws: NetplayError.self) { try lobby.join(room, name: "bob", password: "sesane", content: content) }
        #expect(retried?.code == .wrongPassword, "the player's retry is told what the lost refusals said")

        // Four sends of one guess spent one attempt: two more guesses are checked, then the budget is out.
        for guess in ["sesam", "Sesame"] {
            let refused = #expect(throws: NetplayError.self) { try direct.join(room, name: "bob", password: guess, content: content) }
            #expect(refused?.code == .wrongPassword)
        }
        let limited = #expect(throws: NetplayError.self) { try direct.join(room, name: "bob", password: "sesame", content: content) }
        #expect(limited?.code == .rateLimited && limited?.message.contains("password attempts") == true, "\(String(describing: limited))")
    }

    /// The same against a LAN host (its in-process relay answers joins itself), behind the same
    /// kind of path.
    @Test(.timeLimit(.minutes(1)))
    func aRetriedLanJoinGetsTheSeatItsLostAnswerGave() throws {
        let content = ContentInfo(gameName: "Arena", crc32: 0xA7E7_A001, coreId: "netplay.games.arena", coreVersion: "1")
        var settings = NetplaySettings(roomName: "lan lost answers")
        settings.network = .lan
        settings.password = "pw"
        let host = try LanHost(settings: settings, content: content, inputSize: 1, hostName: "alice", bindAddress: "127.0.0.1",
                               advertiseAddress: "127.0.0.1", beaconHost: "127.0.0.1",
                               beaconPort: UInt16(FreePort.tcp() ?? 47_999), beaconIntervalMs: 1_000)
        defer { host.stop() }
        let path = try AnswerLosingPath(to: host.endpoint)
        defer { path.stop() }
        var room = NetplayRoom(host.room)
        room.isLAN = true
        room.endpoint = path.endpoint
        var lobby = NetplayLobby(discovery: nil, coordinator: nil, timeout: 0.4)
        lobby.tries = 2
        let failure = #expect(throws: NetplayError.self) { try lobby.join(room, name: "bob", password: "pw", content: content) }
        #expect(failure?.code == .unavailable)
        #expect(path.lost.load(ordering: .relaxed) == 2, "the join and its resent copy were both answered (and lost)")
        #expect(host.lanAdmission.occupancy.players == 2, "the first went through; its copy took no second place")

        path.losing.store(false, ordering: .relaxed)
        let bob = try NetplayLobby(discovery: nil, coordinator: nil).join(room, name: "bob", password: "pw", content: content)
        #expect(bob.slot == 2 && host.lanAdmission.occupancy.players == 2, "the retry got the seat, not ROOM_FULL")
    }
}
