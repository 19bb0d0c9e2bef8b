import ArgumentParser
import NetplayKit
import NetplayLAN
@testable import PeerCommand
import NetplayTestSupport
import Testing

/// `host` (Foundation has a `Host` of its own).
typealias PeerHost = PeerCommand.Host

/// netplay-peer's flags: each has a `NETPLAY_*` fallback its `--help` names with the default
/// the code uses, flags win over variables, and a bad value is one line naming its flag.
@Suite("netplay-peer options", .ownThread)
struct PeerOptionsTests {
    static let secret = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

    func host(_ arguments: [String], _ environment: [String: String] = [:]) throws -> PeerHost.Resolved {
        try PeerHost.parse(arguments).resolve(environment: environment)
    }

    @Test func withNothingSetEveryValueIsTheDefaultTheHelpStates() throws {
        let host = try host([])
        let peer = host.peer
        #expect(peer.discovery == "tcp://127.0.0.1:7100" && peer.coordinator == "tcp://127.0.0.1:7200")
        #expect(peer.serverKey == nil && peer.paths == 3 && peer.pathsOnLoss == 4 && peer.measuresRelays)
        #expect(peer.name == nil && peer.room == "netplay-peer room" && peer.game == .arena)
        #expect(peer.core == nil && peer.content == nil && peer.buttons == nil && peer.coreInput == .joypad)
        #expect(peer.frames == 3000 && peer.inputs == .random && peer.inputSeed == 7)
        #expect(peer.rtt == 0 && peer.jitter == 0 && peer.loss == 0)
        #expect(peer.lagAt == nil && peer.lagMs == 1500 && peer.outageAt == nil && peer.outageMs == 2500 && peer.desyncAt == nil)
        #expect(peer.hudEvery == 0 && peer.renderEvery == 0 && peer.timeout == 300 && peer.pacing == .frameRate)
        #expect(peer.lanListenMs == 0 && peer.lanPort == LanBeacon.defaultPort)
        #expect(host.players == 2 && host.frameDelay == nil && host.predictionWindow == 12 && host.lagTolerance == 12)
        #expect(host.checksumInterval == 60 && host.spectatorDelay == 0 && host.maxSpectators == 4 && host.frameRate == nil)
        #expect(host.password == nil && host.seed == 1 && !host.lan && host.beaconHost == "255.255.255.255")
        #expect(host.beaconPort == LanBeacon.defaultPort && host.lanAddress == nil)
        #expect(host.start.warmupFrames == 0 && !host.start.fromHostState && host.start.restartAt == nil)
    }

    @Test func theEnvironmentSetsWhatNoFlagGivesAndAFlagWins() throws {
        let environment = ["NETPLAY_ROOM": "friday night", "NETPLAY_NAME": "ada", "NETPLAY_GAME": "pd", "NETPLAY_FRAMES": "600",
                           "NETPLAY_INPUTS": "defect", "NETPLAY_RTT": "110", "NETPLAY_LOSS": "0.02", "NETPLAY_LAG_AT": "90",
                           "NETPLAY_PEER_TIMEOUT": "30", "NETPLAY_PACING": "whole-frames", "NETPLAY_LAN_PORT": "7999",
                           "NETPLAY_PLAYERS": "2", "NETPLAY_FRAME_DELAY": "3", "NETPLAY_PASSWORD": "hunter2", "NETPLAY_LAN": "1",
                           "NETPLAY_LAN_BEACON": "10.77.0.255:7998", "NETPLAY_CHECKSUM_INTERVAL": "30", "NETPLAY_SEED": "9"]
        let host = try host(["--room", "saturday", "--rtt", "40"], environment)
        #expect(host.peer.room == "saturday" && host.peer.rtt == 40)
        #expect(host.peer.name == "ada" && host.peer.game == .pd && host.peer.frames == 600 && host.peer.inputs == .defect)
        #expect(host.peer.loss == 0.02 && host.peer.lagAt == 90 && host.peer.timeout == 30 && host.peer.pacing == .wholeFrames)
        #expect(host.peer.lanPort == 7999 && host.frameDelay == 3 && host.password == "hunter2" && host.lan && host.seed == 9)
        #expect(host.beaconHost == "10.77.0.255" && host.beaconPort == 7998 && host.checksumInterval == 30)
        // The beacon port, when --lan-beacon names none, is --lan-port's.
        #expect(try self.host([], ["NETPLAY_LAN_PORT": "7999"]).beaconPort == 7999)
    }

    @Test func joinAndSpectateTakeTheirPasswordsFromTheirOwnVariables() throws {
        let environment = ["NETPLAY_PASSWORD": "play", "NETPLAY_SPECTATE_PASSWORD": "watch"]
        #expect(try Join.parse([]).resolve(environment: environment).password == "play")
        #expect(try Spectate.parse([]).resolve(environment: environment).password == "watch")
        #expect(try Spectate.parse(["--password", "flag"]).resolve(environment: environment).password == "flag")
        #expect(try Join.parse([]).resolve(environment: [:]).password == "")
    }

    @Test func replayAndDemoReadTheirVariables() throws {
        let replay = try Replay.parse(["x.replay"]).resolve(environment: ["NETPLAY_FRAMES": "120", "NETPLAY_CORE": "a.so",
                                                                          "NETPLAY_CONTENT": "b.nes"])
        #expect(replay.frames == 120 && replay.core == "a.so" && replay.content == "b.nes")
        #expect(try Replay.parse(["x.replay"]).resolve(environment: [:]).frames == nil)
        let demo = try Demo.parse([]).resolve(environment: ["NETPLAY_RTT": "200", "NETPLAY_OWN_CLUSTER": "yes"])
        #expect(demo.rtt == 200 && demo.ownCluster && demo.frames == 1200 && demo.jitter == 10 && demo.loss == 0.02)
        #expect(demo.renderEvery == 60)
    }

    @Test(arguments: [
        (["--frames", "0"], [:], "--frames"), ([], ["NETPLAY_FRAMES": "lots"], "--frames"),
        ([], ["NETPLAY_LOSS": "1.5"], "--loss"), (["--rtt=-5"], [:], "--rtt"), ([], ["NETPLAY_GAME": "chess"], "--game"),
        ([], ["NETPLAY_INPUTS": "mash"], "--inputs"), ([], ["NETPLAY_PACING": "vsync"], "--pacing"),
        ([], ["NETPLAY_LAN_PORT": "70000"], "--lan-port"), ([], ["NETPLAY_LAG_MS": "99999999"], "--lag-ms"),
        ([], ["NETPLAY_PEER_TIMEOUT": "0"], "--timeout"), ([], ["NETPLAY_DISCOVERY": "nowhere"], "--discovery"),
        ([], ["NETPLAY_PLAYERS": "9"], "--players"), ([], ["NETPLAY_FRAME_DELAY": "16"], "--frame-delay"),
        ([], ["NETPLAY_PREDICTION_WINDOW": "0"], "--prediction-window"), ([], ["NETPLAY_CHECKSUM_INTERVAL": "7"], "--checksum-interval"),
        ([], ["NETPLAY_FRAME_RATE": "0"], "--frame-rate"), ([], ["NETPLAY_LAN_BEACON": "10.0.0.1:x"], "--lan-beacon"),
        (["--game", "pd", "--players", "3"], [:], "prisoner's dilemma"), ([], ["NETPLAY_CORE": "a.so"], "--core and --content"),
        ([], ["NETPLAY_CURVE_SERVER_KEY": "short"], "NETPLAY_CURVE_SERVER_KEY"),
    ] as [([String], [String: String], String)])
    func aBadValueIsOneLineNamingWhatIsWrong(arguments: [String], environment: [String: String], says: String) {
        do {
            _ = try host(arguments, environment)
            Issue.record("\(arguments) \(environment) was accepted")
        } catch {
            // Parsing validates too (ArgumentParser wraps that error): the message is what is printed.
            let message = PeerHost.message(for: error)
            #expect(message.contains(says), "\(message)")
            #expect(!message.contains("\n"), "\(message)")
        }
    }

    @Test func everyHelpNamesWhatItsResolutionReadsWithTheSameDefaults() {
        let contracts: [(String, EnvironmentContract)] = [
            ("host", EnvironmentContract(help: [PeerHost.self], environments: [[:], ["NETPLAY_FRAME_RATE": "30"]]) {
                _ = try PeerHost.parse([]).resolve(environment: $0)
            }),
            ("join", EnvironmentContract(help: [Join.self]) { _ = try Join.parse([]).resolve(environment: $0) }),
            ("spectate", EnvironmentContract(help: [Spectate.self]) { _ = try Spectate.parse([]).resolve(environment: $0) }),
            ("replay", EnvironmentContract(help: [Replay.self]) { _ = try Replay.parse(["x"]).resolve(environment: $0) }),
            ("demo", EnvironmentContract(help: [Demo.self]) { _ = try Demo.parse([]).resolve(environment: $0) }),
        ]
        for (command, contract) in contracts {
            #expect(contract.namedButNotRead.isEmpty, "\(command): --help names variables nothing reads")
            #expect(contract.readButNotNamed.isEmpty, "\(command): variables read that --help does not name")
            #expect(contract.defaultsDisagreeing.isEmpty, "\(command): \(contract.defaultsDisagreeing)")
        }
    }
}
