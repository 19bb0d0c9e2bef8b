import Foundation
import Games
import NetplayService
import NetplayTestSupport
import NetplayWire
import Synchronization
import Testing
@testable import NetplayKit

/// A real relay made to look like one of sync protocol 1 (before paced state transfers): an
/// attach naming a later version is refused `UNSUPPORTED_VERSION`, as such a relay refused it,
/// and its attach replies name no version. Everything else passes through unchanged.
final class OlderRelayPath: Sendable {
    /// The versions of the attaches that came through, refused ones included, in order.
    let attachVersions = Mutex<[UInt32]>([])
    /// Acknowledgements of transfer progress (neither loaded nor failed) the clients sent: a
    /// relay of protocol 1 read each as a failed load.
    let progressAcknowledgements = Atomic<Int>(0)
    private let path = Mutex<InterceptingPath?>(nil)

    var endpoint: String { path.withLock { $0!.endpoint } }

    init(to relay: String) throws {
        let intercepting = try InterceptingPath(to: relay, toService: { [weak self] _, envelope in
            guard let self else { return .forward }
            switch envelope?.body {
            case .attachRequest(let request)?:
                attachVersions.withLock { $0.append(request.protocolVersion) }
                guard request.protocolVersion > 1, let envelope else { return .forward }
                let refusal = envelope.reply(.error(ErrorReply(code: .unsupportedVersion,
                                                               message: "This relay speaks sync protocol 1 to 1, not \(request.protocolVersion).")))
                return (try? refusal.encoded()).map { .answer($0) } ?? .drop
            case .stateTransferAck(let ack)? where !ack.loaded && ack.error.isEmpty:
                progressAcknowledgements.add(1, ordering: .relaxed)
                return .forward
            default:
                return .forward
            }
        }, toClient: { _, envelope in
            guard var envelope, case .attachResponse(var response) = envelope.body else { return .forward }
            response.protocolVersion = 0  // a relay of protocol 1 never set it
            envelope.body = .attachResponse(response)
            return (try? envelope.encoded()).map { .replace($0) } ?? .forward
        })
        path.withLock { $0 = intercepting }
    }

    func stop() { path.withLock { $0?.stop() } }
}

extension NetplayKitTests {
    /// A client of this version meets a relay from before paced state transfers (as during a
    /// rolling upgrade): its attach of protocol 2 is refused, it attaches again at once with
    /// protocol 1, and it plays; joining late, it gets the state whole and acknowledges only
    /// its load, as that relay expects.
    @Test func aClientAttachesToAnOlderRelayWithTheProtocolItSpeaks() throws {
        let port = UInt16(TestPorts.free())
        // Chunks of 128 bytes: the arena's 344-byte state comes in three.
        let host = try lanHost("kit-older-relay", port: port) { $0.transferWindowBytes = 512 }
        defer { host.stop() }
        let older = try OlderRelayPath(to: host.admission.relayEndpoint)
        defer { older.stop() }
        let (lobby, room, hostMatch, joinMatch) = try startedPair(host, port: port)
        #expect(drive([hostMatch, joinMatch], seconds: 20, until: { hostMatch.currentFrame >= 300 }))
        let joined = try lobby.join(room, name: "watcher", role: .spectator)
        var options = NetplayMatchOptions()
        options.stopAtFrame = 900
        let spectator = try NetplayMatch(game: Arena(playerCount: 2),
                                         admission: Admission(ticket: joined.ticket, relayEndpoint: older.endpoint), options: options)
        spectator.start()
        // Once watching, its link goes dark for 2 s: it reconnects, trying the current version
        // first again (the relay might have been upgraded meanwhile).
        var outage = false
        let finished = drive([hostMatch, joinMatch, spectator], seconds: 40, each: {
            if !outage, spectator.currentFrame >= 500 {
                outage = true
                spectator.simulateOutage(milliseconds: 2_000)
            }
        }, until: {
            hostMatch.reportedChecksums[900] != nil && spectator.currentFrame >= 900
        })
        #expect(finished, "spectator \(spectator.currentFrame) \(spectator.state), events \(spectator.events)")
        // Refused, then the primary and every additional path attach with protocol 1; after the
        // outage the same again.
        let versions = older.attachVersions.withLock { $0 }
        let refusals = versions.indices.filter { versions[$0] == SyncProtocol.current }
        #expect(refusals.count == 2 && refusals.first == 0 && versions.filter { $0 != SyncProtocol.current }.allSatisfy { $0 == 1 },
                "\(versions) \(spectator.events)")
        #expect(refusals.allSatisfy { $0 + 1 < versions.count && versions[$0 + 1] == 1 }, "\(versions)")
        #expect(spectator.events.contains { if case .reconnected = $0 { true } else { false } }, "\(spectator.events)")
        #expect(spectator.startFrame > 0, "it started from a transferred state")
        #expect(spectator.game.checksum() == hostMatch.reportedChecksums[900])
        #expect(older.progressAcknowledgements.load(ordering: .relaxed) == 0)
        hostMatch.leave()
        joinMatch.leave()
        spectator.leave()
    }
}
