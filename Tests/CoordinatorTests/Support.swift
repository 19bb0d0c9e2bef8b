@testable import Coordinator
import Foundation
import NetplayTestSupport
import NetplayAuth
import NetplayService
import NetplayWire

let testKeys = try! TicketKeyRing(secret: Array(repeating: 3, count: 32))
let smb = ContentInfo(gameName: "Super Mario Bros.", crc32: 0x3337_EC46, md5: Array(repeating: 0x11, count: 16), coreId: "nestopia",
                      coreVersion: "1.52.0", system: "nes")

func t(_ ms: UInt64) -> CoordinatorTime { CoordinatorTime(monotonicMs: ms, unixMs: 1_800_000_000_000 + ms) }

/// A coordinator over a fresh SQLite file, with one live relay registered.
final class Harness {
    let directory: String
    var store: SessionStore
    var core: SessionCoordinator
    var now: UInt64 = 1_000

    init(settings: CoordinatorSettings = Harness.settings(), relays: [String] = ["sync-0"]) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("coordinator-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        store = try SessionStore(path: directory + "/c.sqlite")
        core = try SessionCoordinator(store: store, keyRing: testKeys, settings: settings, at: t(now))
        for relay in relays { try register(relay) }
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    static func settings() -> CoordinatorSettings {
        var settings = CoordinatorSettings()
        settings.passwordHasher = .testing
        settings.relayTTLMs = 3_000
        settings.passwordAttemptsPerMinute = 3
        return settings
    }

    var time: CoordinatorTime { t(now) }

    /// Closes and reopens the store, as a restarted coordinator does.
    func restart() throws {
        store.close()
        store = try SessionStore(path: directory + "/c.sqlite")
        core = try SessionCoordinator(store: store, keyRing: testKeys, settings: core.settings, at: time)
    }

    @discardableResult
    func register(_ relay: String, load: RelayLoad = RelayLoad(), region: String = "", sessions: [String] = []) throws -> Outcome {
        try core.registerRelay(RegisterRelayRequest(relay: RelayInfo(relayId: relay, endpoint: Self.endpoint(of: relay),
                                                                     region: region, load: load), sessionIds: sessions), at: time)
    }

    /// The endpoint `register` gives relay `relay`.
    static func endpoint(of relay: String) -> String { "tcp://\(relay).relays.test:7300" }

    func create(maxPlayers: UInt32 = 2, spectators: UInt32 = 2, password: String = "", spectatePassword: String = "",
                transport: Transport = .relay, key: String = "", region: String = "", source: String = "",
                rtts: [String: UInt32] = [:], approveJoiners: Bool = false, hostName: String = "alice") throws -> CreateSessionResponse {
        var settings = SessionSettings(roomName: "room", content: smb, region: region, transport: transport,
                                       lanEndpoint: transport == .lan ? "tcp://10.0.0.2:7300" : "", maxPlayers: maxPlayers,
                                       spectatorsAllowed: spectators > 0, maxSpectators: spectators,
                                       playPassword: password, spectatePassword: spectatePassword)
        settings.approveJoiners = approveJoiners
        let request = CreateSessionRequest(settings: settings, hostName: hostName, idempotencyKey: key, relayRtts: Self.rtts(rtts))
        try core.precheckCreate(request, source: source, at: time)
        let hasher = core.settings.passwordHasher
        let outcome = try core.create(request, source: source, playHash: password.isEmpty ? nil : hasher.hash(password),
                                      spectateHash: spectatePassword.isEmpty ? nil : hasher.hash(spectatePassword), at: time)
        guard case .createSessionResponse(let response) = outcome.reply else { throw HarnessFailure("no create reply") }
        return response
    }

    /// Joins the way the service does: plan (reserving a password attempt), verify the password
    /// against the hashes, settle.
    func join(_ sessionId: String, name: String, role: Role = .player, password: String = "", content: ContentInfo = smb,
              slot: UInt32 = 0, key: String = "", source: String = "", rtts: [String: UInt32] = [:]) throws(ServiceError) -> JoinSessionResponse {
        try joinOutcome(sessionId, name: name, role: role, password: password, content: content, slot: slot, key: key, source: source,
                        rtts: rtts).response
    }

    /// ``join(_:name:role:password:content:slot:key:source:rtts:)`` with the whole outcome.
    func joinOutcome(_ sessionId: String, name: String, role: Role = .player, password: String = "", content: ContentInfo = smb,
                     slot: UInt32 = 0, key: String = "", source: String = "",
                     rtts: [String: UInt32] = [:]) throws(ServiceError) -> (response: JoinSessionResponse, outcome: Outcome) {
        let request = JoinSessionRequest(sessionId: sessionId, role: role, name: name, password: password, content: content,
                                         preferredSlot: slot, idempotencyKey: key, relayRtts: Self.rtts(rtts))
        let plan = try core.planJoin(request, source: source, at: time)
        var match = PasswordMatch.notNeeded
        if !plan.open {
            match = plan.candidates.first { PasswordHasher.verify(password, against: $0.hash) }?.match ?? PasswordMatch.none
        }
        let outcome = try core.settleJoin(request, source: source, plan: plan, match: match, at: time)
        guard case .joinSessionResponse(let response) = outcome.reply else { fatalError("no join reply") }
        return (response, outcome)
    }

    /// Round trips (relay id -> ms) as a client reports them.
    static func rtts(_ milliseconds: [String: UInt32]) -> [RelayRtt] {
        milliseconds.sorted { $0.key < $1.key }.map { RelayRtt(relayId: $0.key, rttUs: $0.value * 1000) }
    }

    func session(_ id: String) -> SessionRecord { core.sessions[id]! }
}

struct HarnessFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}


