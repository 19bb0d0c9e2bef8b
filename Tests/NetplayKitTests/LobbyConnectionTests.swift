import Foundation
import NetplayService
import NetplayTestSupport
import NetplayWire
import Synchronization
import Testing
import ZeroMQ
@testable import NetplayKit

/// A service that answers room lists as its script says: it records each request's connection
/// (the DEALER's routing id) and request id, and answers a copy, delays its answer or stays
/// silent. It stands in for a coordinator or discovery behind a path that loses packets.
final class ScriptedService: Sendable {
    /// What the service does with the `copy`-th arrival (1-based) of one request id.
    enum Answer: Sendable {
        case reply
        case replyAfter(milliseconds: Int)
        case replyError(ErrorCode)
        case silence
        /// This body as the answer.
        case replyWith(Envelope.Body)
    }

    struct Arrival: Sendable {
        let connection: [UInt8]
        let requestId: UInt64
    }

    private final class State: Sendable {
        let arrivals = Mutex<[Arrival]>([])
        let stopped = Atomic<Bool>(false)
        let finished = DispatchSemaphore(value: 0)
    }

    let endpoint: String
    private let state = State()

    init(_ script: @escaping @Sendable (_ copy: Int) -> Answer) throws {
        let ready = DispatchSemaphore(value: 0)
        let bound = Mutex<Result<String, any Error>?>(nil)
        let state = self.state
        Thread.detachNewThread {
            defer { state.finished.signal() }
            let router: Socket
            do {
                router = try Context.shared.socket(.router)
                try router.set(.receiveTimeout(milliseconds: 50))
                try router.bind("tcp://127.0.0.1:*")
                let endpoint = try router.lastEndpoint
                bound.withLock { $0 = .success(endpoint) }
            } catch {
                bound.withLock { $0 = .failure(error) }
                ready.signal()
                return
            }
            ready.signal()
            var delayed: [(due: ContinuousClock.Instant, frames: [[UInt8]])] = []
            while !state.stopped.load(ordering: .relaxed) {
                let now = ContinuousClock.now
                for reply in delayed where reply.due <= now { _ = try? router.sendMultipart(reply.frames) }
                delayed.removeAll { $0.due <= now }
                guard let frames = try? router.receiveMultipart(), frames.count == 2,
                      let request = try? Envelope(decoding: frames[1]) else { continue }
                let copy = state.arrivals.withLock { log in
                    log.append(Arrival(connection: frames[0], requestId: request.requestId))
                    return log.filter { $0.requestId == request.requestId }.count
                }
                let body: Envelope.Body
                var wait = 0
                switch script(copy) {
                case .silence: continue
                case .reply: body = .listRoomsResponse(ListRoomsResponse())
                case .replyAfter(let milliseconds): body = .listRoomsResponse(ListRoomsResponse()); wait = milliseconds
                case .replyError(let code): body = .error(ErrorReply(code: code, message: "scripted"))
                case .replyWith(let scripted): body = scripted
                }
                guard let payload = try? Envelope(requestId: request.requestId, body: body).encoded() else { continue }
                delayed.append((.now + .milliseconds(wait), [frames[0], payload]))
            }
        }
        ready.wait()
        endpoint = try bound.withLock { $0! }.get()
    }

    var log: [Arrival] { state.arrivals.withLock { $0 } }

    func stop() {
        state.stopped.store(true, ordering: .relaxed)
        state.finished.wait()
    }
}

@Suite("NetplayLobby keeps its connections and outlasts a lost request", .ownThread)
struct LobbyConnectionTests {
    func lobby(_ service: ScriptedService, timeout: Double = 0.3) -> NetplayLobby {
        var lobby = NetplayLobby(discovery: service.endpoint, coordinator: service.endpoint, timeout: timeout)
        lobby.measuresRelays = false
        return lobby
    }

    /// A discovery that answers every page with a next one (an empty page with a token, or a
    /// page naming itself as the next) no longer keeps a listing asking forever.
    @Test(arguments: [(0, "more", 1), (1, "again", 2)])
    func aListingEndsOnAnEmptyPageOrOneThatRepeats(rooms: Int, token: String, requests: Int) throws {
        let page = ListRoomsResponse(rooms: Array(repeating: Room(roomId: "r", sessionId: "r", roomName: "r"), count: rooms),
                                     nextPageToken: token)
        let service = try ScriptedService { _ in .replyWith(.listRoomsResponse(page)) }
        defer { service.stop() }
        let listed = try lobby(service).lobbyRooms()
        #expect(service.log.count == requests, "\(service.log.count) pages asked for")
        #expect(listed.count == rooms * requests)
    }

    @Test func callsShareOneConnectionInsteadOfAHandshakeEach() throws {
        let service = try ScriptedService { _ in .reply }
        defer { service.stop() }
        let lobby = lobby(service)
        for _ in 0 ..< 5 { _ = try lobby.lobbyRooms() }
        let copy = lobby
        _ = try copy.lobbyRooms()
        #expect(service.log.count == 6)
        #expect(Set(service.log.map(\.connection)).count == 1, "one connection for every call, copies of the lobby included")
        #expect(lobby.connections.idleCount == 1)
    }

    @Test func aRequestSafeToRepeatIsSentAgainWhenItsReplyDoesNotCome() throws {
        // The first copy of every request is lost; the second is answered.
        let service = try ScriptedService { copy in copy == 1 ? .silence : .reply }
        defer { service.stop() }
        let rooms = try lobby(service).lobbyRooms()
        #expect(rooms.isEmpty)
        let log = service.log
        #expect(log.count == 2 && Set(log.map(\.requestId)).count == 1, "the same request, sent twice: \(log.count) arrivals")
    }

    @Test func aResentCopyRefusedWhileTheFirstIsServedDoesNotHideItsSuccess() throws {
        // The first copy is served slowly (past one timeout); the resent copy is refused at
        // once, as a coordinator's rate limit refuses a repeated create. The call succeeds.
        let service = try ScriptedService { copy in copy == 1 ? .replyAfter(milliseconds: 700) : .replyError(.rateLimited) }
        defer { service.stop() }
        let rooms = try lobby(service).lobbyRooms()
        #expect(rooms.isEmpty)
        #expect(service.log.count == 2, "sent once, resent once after the first timeout: \(service.log.count)")
    }

    @Test func everyCopyRefusedIsTheServicesWordNotATimeout() throws {
        let service = try ScriptedService { copy in copy == 1 ? .silence : .replyError(.rateLimited) }
        defer { service.stop() }
        var lobby = lobby(service, timeout: 0.2)
        lobby.tries = 2
        let error = #expect(throws: NetplayError.self) { try lobby.lobbyRooms() }
        #expect(error?.code == .rateLimited, "the held refusal, once the time is up: \(String(describing: error))")
    }

    @Test func anyOtherRequestIsSentOnceAndWaitedForLonger() throws {
        // The answer comes after two timeouts: within the three tries a call waits.
        let service = try ScriptedService { _ in .replyAfter(milliseconds: 700) }
        defer { service.stop() }
        let lobby = lobby(service)
        let body = try lobby.call(lobby.coordinatorEndpoint, "coordinator", .startSessionRequest(StartSessionRequest(
            sessionId: "s-1", participantId: "host-1", participantToken: [1, 2, 3])))
        guard case .listRoomsResponse = body else { Issue.record("answered \(body.name)"); return }
        #expect(service.log.count == 1, "a request that is not safe to repeat went out \(service.log.count) times")
    }

    @Test func silenceFailsAfterEveryTryAndTheConnectionIsClosed() throws {
        let service = try ScriptedService { _ in .silence }
        defer { service.stop() }
        var lobby = lobby(service, timeout: 0.2)
        lobby.tries = 2
        let started = ContinuousClock.now
        let error = #expect(throws: NetplayError.self) { try lobby.lobbyRooms() }
        let waited = ContinuousClock.now - started
        #expect(error?.code == .unavailable)
        #expect(error?.message.contains("did not answer within 0.4 s") == true, "\(error?.message ?? "")")
        #expect(waited >= .milliseconds(390) && waited < .seconds(3), "waited \(waited)")
        #expect(service.log.count == 2, "one send and one resend, not \(service.log.count)")
        #expect(lobby.connections.idleCount == 0, "a connection that timed out is not kept")
        // The next call opens a fresh connection rather than one with a request still queued.
        _ = try? lobby.lobbyRooms()
        #expect(Set(service.log.map(\.connection)).count == 2)
    }

    @Test func aConnectionUnusedForItsIdleTimeIsClosedAtBothEnds() throws {
        let service = try ScriptedService { _ in .reply }
        defer { service.stop() }
        var lobby = lobby(service)
        lobby.idleConnectionSeconds = 3
        let port = try #require(service.endpoint.split(separator: ":").last.flatMap { Int($0) })
        // Each use starts the idle time again: one connection for calls 0.5 s apart, 2 s in all.
        for _ in 0 ..< 4 {
            _ = try lobby.lobbyRooms()
            Thread.sleep(forTimeInterval: 0.5)
        }
        #expect(Set(service.log.map(\.connection)).count == 1)
        #expect(lobby.connections.idleCount == 1 && establishedConnections(toPort: port) == 1)
        #expect(eventually(within: 8) { lobby.connections.idleCount == 0 }, "the lobby still keeps it")
        #expect(eventually(within: 5) { establishedConnections(toPort: port) == 0 }, "the service still holds it")
        // The next call opens a new one.
        _ = try lobby.lobbyRooms()
        #expect(Set(service.log.map(\.connection)).count == 2)
    }

    @Test func anEndlessIdleTimeKeepsTheConnectionAndNoTimeIsNoneAtAll() throws {
        let service = try ScriptedService { _ in .reply }
        defer { service.stop() }
        var lobby = lobby(service)
        lobby.idleConnectionSeconds = .infinity
        _ = try lobby.lobbyRooms()
        lobby.idleConnectionSeconds = .nan
        _ = try lobby.lobbyRooms()
        #expect(Set(service.log.map(\.connection)).count == 1)
        #expect(eventually(within: 5) { lobby.connections.idleCount == 0 }, "NaN is no idle time: closed at once")
        lobby.idleConnectionSeconds = 1e300
        _ = try lobby.lobbyRooms()
        Thread.sleep(forTimeInterval: 0.3)
        #expect(lobby.connections.idleCount == 1, "kept for the lobby's life")
    }

    /// Established TCP connections on this host whose local port is `port`: a service's side of
    /// its clients' connections.
    func establishedConnections(toPort port: Int) -> Int {
        // Read to the end: the file's size says 0, and a one-size read stops at the first page.
        guard let data = FileHandle(forReadingAtPath: "/proc/net/tcp")?.readDataToEndOfFile(),
              let table = String(data: data, encoding: .utf8) else { return -1 }
        let local = ":" + String(format: "%04X", port)
        return table.split(separator: "\n").dropFirst().filter { line in
            let fields = line.split(separator: " ")
            return fields.count > 3 && fields[1].hasSuffix(local) && fields[3] == "01"
        }.count
    }

    @Test func anErrorReplyIsTheServicesWordAndKeepsTheConnection() throws {
        let service = try ScriptedService { _ in .replyError(.notFound) }
        defer { service.stop() }
        let lobby = lobby(service)
        let error = #expect(throws: NetplayError.self) { try lobby.lobbyRoom(id: "nowhere") }
        #expect(error?.code == .notFound && error?.message == "scripted")
        #expect(service.log.count == 1, "an answered request is not repeated")
        #expect(lobby.connections.idleCount == 1)
    }
}
