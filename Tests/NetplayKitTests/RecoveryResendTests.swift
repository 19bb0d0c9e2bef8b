import Foundation
import Games
import InputSync
import Logging
import NetplayService
import NetplayTestSupport
import NetplayWire
import Synchronization
import Testing
@testable import NetplayKit

/// A path that loses a player's first resend to a rebuilt relay of the inputs the dead relay
/// had acknowledged and nobody confirmed: once armed with those frames, from the rebuilt
/// relay's first recovering attach answer on, every batch carrying one is lost for 150 ms (the
/// link may carry a batch on several paths; a repeat comes 250 ms later).
final class LostOwnResendPath: Sendable {
    private struct State {
        var unconfirmed: Range<Int>?
        var recoveringSinceMs: UInt64?
        var dropped = 0
    }
    private let state = Mutex(State())
    private let path = Mutex<InterceptingPath?>(nil)

    var endpoint: String { path.withLock { $0!.endpoint } }
    /// Batches carrying the unconfirmed inputs that were lost.
    var dropped: Int { state.withLock { $0.dropped } }

    init(to relay: String) throws {
        let intercepting = try InterceptingPath(to: relay, toService: { [weak self] _, envelope in
            guard let self, case .inputBatch(let batch)? = envelope?.body, batch.inputSize > 0, !batch.inputs.isEmpty else { return .forward }
            let now = UnixTime.nowMs()
            let frames = Int(batch.startFrame) ..< Int(batch.startFrame) + batch.inputs.count / Int(batch.inputSize)
            return state.withLock { state in
                guard let unconfirmed = state.unconfirmed, let since = state.recoveringSinceMs, frames.overlaps(unconfirmed),
                      now &- since < 150 else { return .forward }
                state.dropped += 1
                return .drop
            }
        }, toClient: { [weak self] _, envelope in
            guard let self, case .attachResponse(let response)? = envelope?.body, response.recovering else { return .forward }
            let now = UnixTime.nowMs()
            state.withLock { state in
                if state.unconfirmed != nil, state.recoveringSinceMs == nil { state.recoveringSinceMs = now }
            }
            return .forward
        })
        path.withLock { $0 = intercepting }
    }

    /// From now on, loses the first resend of `frames`.
    func loseFirstResend(of frames: Range<Int>) { state.withLock { $0.unconfirmed = frames } }

    func stop() { path.withLock { $0?.stop() } }
}

extension NetplayKitTests {
    /// The relay goes down while the host stalls: the joiner played on to its prediction
    /// window, and the dead relay acknowledged those inputs, so its engine never sends them
    /// again. The relay comes back empty on the same endpoint and rebuilds the match; the
    /// joiner's one resend of its own inputs is lost on the way. It repeats them from the frame
    /// the relay's broadcasts await until the relay has them, so nothing of the joiner's is
    /// substituted and the match agrees. (Sent once only, the gap held the match until the
    /// relay forfeited the joiner's frames.)
    @Test func aPlayersLostOwnInputResendToARebuiltRelayIsRepeated() throws {
        let port = UInt16(TestPorts.free())
        // Lag tolerance of a second: the relay does not substitute the stalled host meanwhile, so
        // the joiner's inputs it acknowledges stay unconfirmed.
        let host = try LanHost(settings: { var room = settings("kit-resend"); room.lagTolerance = 120; return room }(),
                               content: content, inputSize: Arena.inputSize, hostName: "alice", bindAddress: "127.0.0.1",
                               advertiseAddress: "127.0.0.1", beaconHost: "127.0.0.1", beaconPort: port, beaconIntervalMs: 200)
        defer { host.stop() }
        let path = try LostOwnResendPath(to: host.endpoint)
        defer { path.stop() }
        let lobby = NetplayLobby(discovery: nil, coordinator: nil, lanBeaconPort: port)
        let room = try #require(try lobby.lanRooms(listeningFor: 1_000).first)
        let joined = try lobby.join(room, name: "bob", content: content)
        let hostMatch = try NetplayMatch(game: Arena(playerCount: 2), admission: host.admission)
        let joinMatch = try NetplayMatch(game: Arena(playerCount: 2),
                                         admission: Admission(ticket: joined.ticket, relayEndpoint: path.endpoint))
        hostMatch.start()
        joinMatch.start()
        #expect(drive([hostMatch, joinMatch], seconds: 20, until: { hostMatch.currentFrame >= 240 }))
        // The host stalls: the joiner runs its prediction window ahead, and the relay takes and
        // acknowledges its inputs without confirming them.
        _ = drive([joinMatch], seconds: 0.4, until: { false })
        let unconfirmed = joinMatch.confirmedFrames ..< joinMatch.ownNewest + 1
        #expect(unconfirmed.count >= 8, "the joiner should have run ahead of the stalled host: \(unconfirmed)")

        // The relay stops and a new one, knowing nothing of the match, takes its endpoint.
        host.stop()
        path.loseFirstResend(of: unconfirmed)
        var relayConfiguration = RelayConfiguration(relayId: "", advertisedEndpoint: host.endpoint)
        relayConfiguration.maxSessions = 1
        let relayPort = try #require(host.endpoint.split(separator: ":").last.flatMap { Int($0) })
        let service = ServiceConfiguration(kind: "sync", instance: "lan-restarted", endpoint: "tcp://127.0.0.1:\(relayPort)", logLevel: .warning,
                                           dataDirectory: FileManager.default.temporaryDirectory.appendingPathComponent("netplay-resend-\(port)"))
        var logger = Logger(label: "netplay.lan-relay")
        logger.logLevel = .warning
        let (keyRing, admission, configuration) = (host.keyRing, host.lanAdmission, relayConfiguration)
        let restarted = try ServiceHost.start(configuration: service, logger: logger) {
            RelayService(configuration: configuration, keyRing: keyRing, lanAdmission: admission)
        }
        defer { restarted.stop() }

        let finished = drive([hostMatch, joinMatch], seconds: 40, until: {
            hostMatch.reportedChecksums[1_200] != nil && joinMatch.reportedChecksums[1_200] != nil
        })
        #expect(path.dropped >= 1, "the joiner's first resend of its own inputs was never seen")
        #expect(finished, "host \(hostMatch.currentFrame) \(hostMatch.state), joiner \(joinMatch.currentFrame) \(joinMatch.state)")
        #expect(joinMatch.ownInputsSubstituted == 0 && hostMatch.substitutedInputsSeen == 0,
                "the joiner's inputs were substituted: its own count \(joinMatch.ownInputsSubstituted), the host saw \(hostMatch.substitutedInputsSeen)")
        #expect(joinMatch.reportedChecksums[1_200] == hostMatch.reportedChecksums[1_200])
        #expect(joinMatch.events.contains { if case .reconnected = $0 { true } else { false } }, "\(joinMatch.events)")
        hostMatch.leave()
        joinMatch.leave()
    }
}
