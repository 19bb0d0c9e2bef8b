import Foundation
import Games
import InputSync
import NetplayService
import NetplayTestSupport
import NetplayWire
import Rollback
import Testing
@testable import NetplayKit

/// Several connections per match carrying the same inputs (``NetplayMatchOptions/paths``).
extension NetplayKitTests {
    /// A LAN pair whose matches use `options` (each with its own loss draws), both started.
    func startedPair(_ host: LanHost, port: UInt16, options: NetplayMatchOptions, seed: UInt64) throws
        -> (host: NetplayMatch<Arena>, join: NetplayMatch<Arena>) {
        let lobby = NetplayLobby(discovery: nil, coordinator: nil, lanBeaconPort: port)
        let room = try #require(try lobby.lanRooms(listeningFor: 1_000).first)
        var hostOptions = options, joinOptions = options
        hostOptions.conditions.seed = seed
        joinOptions.conditions.seed = seed &+ 1
        let hostMatch = try NetplayMatch(game: Arena(playerCount: 2), admission: host.admission, options: hostOptions)
        let joinMatch = try NetplayMatch(game: Arena(playerCount: 2), admission: try lobby.join(room, name: "bob", content: content),
                                         options: joinOptions)
        hostMatch.start()
        joinMatch.start()
        return (hostMatch, joinMatch)
    }

    @Test func aMatchOverTwoPathsKeepsPlayingWhenOneFailsAndAttachesItAgain() throws {
        let port = UInt16(TestPorts.free())
        let host = try lanHost("kit-paths", port: port)
        defer { host.stop() }
        var options = NetplayMatchOptions()
        options.paths = 2
        // Two paths throughout: a copy held back on a busy machine must not widen the match to more.
        options.pathsOnLoss = 2
        let (hostMatch, joinMatch) = try startedPair(host, port: port, options: options, seed: 1)
        #expect(drive([hostMatch, joinMatch], seconds: 20, until: {
            hostMatch.currentFrame >= 300 && hostMatch.attachedPaths == 2 && joinMatch.attachedPaths == 2
        }), "paths \(hostMatch.attachedPaths) / \(joinMatch.attachedPaths), events \(joinMatch.events)")
        #expect(hostMatch.events.contains(.pathAttached(path: 2)) && joinMatch.events.contains(.pathAttached(path: 2)))
        // An additional path carries broadcasts, never a state: it holds far less than the
        // primary, so paths do not multiply what a relay can queue at a peer.
        #expect(joinMatch.link.receiveLimits(ofPath: 0).map { [Int64($0.messages), $0.bytes] } == [1_000, 320 << 10])
        #expect(joinMatch.link.receiveLimits(ofPath: 1).map { [Int64($0.messages), $0.bytes] } == [128, 160 << 10])
        // Both players' second connections die without a word (the relay keeps sending to them).
        hostMatch.link.failPath(1, now: hostMatch.nowMs)
        joinMatch.link.failPath(1, now: joinMatch.nowMs)
        #expect(joinMatch.attachedPaths == 1)
        let finished = drive([hostMatch, joinMatch], seconds: 30, until: {
            hostMatch.reportedChecksums[1_200] != nil && joinMatch.reportedChecksums[1_200] != nil
        })
        #expect(finished, "host \(hostMatch.currentFrame) \(hostMatch.state), joiner \(joinMatch.currentFrame) \(joinMatch.state)")
        #expect(hostMatch.reportedChecksums[1_200] == joinMatch.reportedChecksums[1_200])
        // Duplicated broadcasts count once, nothing was late enough to be substituted, and the
        // match never needed its primary to reconnect.
        #expect(hostMatch.substitutedInputsSeen == 0 && joinMatch.substitutedInputsSeen == 0)
        for match in [hostMatch, joinMatch] {
            #expect(!match.events.contains { if case .reconnecting = $0 { true } else { false } }, "\(match.events)")
            #expect(match.events.filter { $0 == .pathAttached(path: 2) }.count == 2, "the failed path attaches again: \(match.events)")
            #expect(match.attachedPaths == 2)
        }
        hostMatch.leave()
        joinMatch.leave()
    }

    @Test func anAdditionalPathTheRelayRefusesIsGivenUpAndTheMatchGoesOn() throws {
        let port = UInt16(TestPorts.free())
        // This relay takes one connection per participant: every additional path is refused.
        let host = try lanHost("kit-one-path", port: port) { $0.maxPathsPerParticipant = 1 }
        defer { host.stop() }
        var options = NetplayMatchOptions()
        options.paths = 3
        let (hostMatch, joinMatch) = try startedPair(host, port: port, options: options, seed: 1)
        let finished = drive([hostMatch, joinMatch], seconds: 30, until: {
            hostMatch.reportedChecksums[600] != nil && joinMatch.reportedChecksums[600] != nil
        })
        #expect(finished, "host \(hostMatch.currentFrame) \(hostMatch.state), joiner \(joinMatch.currentFrame) \(joinMatch.state)")
        #expect(hostMatch.reportedChecksums[600] == joinMatch.reportedChecksums[600])
        for match in [hostMatch, joinMatch] {
            let lost = match.events.compactMap { event -> Int? in if case .pathLost(let path, _) = event { path } else { nil } }
            #expect(Set(lost) == [2, 3], "\(match.events)")
            #expect(match.attachedPaths == 1)
        }
    }

    /// The simulator's loss is independent per path: at 5 % loss on each, an input is late only
    /// when both copies are lost. Late remote inputs show as rollbacks here: inputs change every
    /// frame, and with a frame of delay a loss-free link brings each in time (both matches tick
    /// in one loop, the relay forwards at once), while a lost copy waits for the next message.
    @Test func twoPathsOverALossyLinkBringFarFewerLateInputsThanOne() throws {
        func run(paths: Int) throws -> (rollbacks: Int, drops: Int) {
            let port = UInt16(TestPorts.free())
            var settings = settings("kit-lossy-\(paths)")
            settings.frameDelay = 1
            let host = try LanHost(settings: settings, content: content, inputSize: Arena.inputSize, hostName: "alice",
                                   bindAddress: "127.0.0.1", advertiseAddress: "127.0.0.1", beaconHost: "127.0.0.1",
                                   beaconPort: port, beaconIntervalMs: 200)
            defer { host.stop() }
            var options = NetplayMatchOptions()
            options.paths = paths
            options.conditions = NetworkConditions(loss: 0.05)
            let (hostMatch, joinMatch) = try startedPair(host, port: port, options: options, seed: 11)
            let finished = drive([hostMatch, joinMatch], seconds: 40,
                                 input: { slot, frame in GameInput(low: UInt64((frame * 7 + slot) & 0x1F)) },
                                 until: { hostMatch.reportedChecksums[1_200] != nil && joinMatch.reportedChecksums[1_200] != nil })
            #expect(finished, "\(paths) paths: host \(hostMatch.currentFrame), joiner \(joinMatch.currentFrame)")
            #expect(hostMatch.reportedChecksums[1_200] == joinMatch.reportedChecksums[1_200])
            defer {
                hostMatch.leave()
                joinMatch.leave()
            }
            return (hostMatch.hud.rollbacks + joinMatch.hud.rollbacks, hostMatch.link.simulatedDrops + joinMatch.link.simulatedDrops)
        }
        let one = try run(paths: 1)
        let two = try run(paths: 2)
        print("multipath at 5 % loss: 1 path \(one.rollbacks) rollbacks (\(one.drops) drops), 2 paths \(two.rollbacks) rollbacks (\(two.drops) drops)")
        #expect(one.drops > 0 && two.drops > one.drops, "both runs lose messages, two paths twice as many")
        #expect(two.rollbacks * 2 < one.rollbacks, "1 path: \(one.rollbacks) rollbacks, 2 paths: \(two.rollbacks)")
    }
}
