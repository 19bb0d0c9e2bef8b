import Foundation
import NetplayTestSupport
import Testing

/// LAN play with a libretro core and no cluster, between two hosts of a LAN: network namespaces
/// joined by a veth pair (10.77.0.0/24). `netplay-peer host --lan` runs nestopia and its
/// in-process relay in one namespace and announces the room by beacon on the LAN's broadcast
/// address; `netplay-peer join` in the other finds the room by that beacon, joins through the
/// host's relay and plays the NES test program. Nothing listens at the discovery and coordinator
/// endpoints they are given. (Part of the serialized core suite: its processes and waits do not
/// run beside the other core matches.)
extension CoreMatchTests {
    // No time limit: Swift Testing counts one from when the test is scheduled, which in the full
    // suite can be minutes before it runs; its own waits are bounded (peers' --timeout, 90 s).
    @Test(.disabled(if: NamespacePair.unavailableReason != nil,
                    Comment(rawValue: "skipped: \(NamespacePair.unavailableReason ?? "")")))
    func aJoinerOnAnotherHostFindsTheRoomByItsBeaconAndBothAgree() throws {
        let rom = try LibretroFixtures.testROM()
        let core = try LibretroFixtures.nestopiaCore()
        let lan = try NamespacePair()
        defer { lan.tearDown() }
        let peer = BuildProducts.directory.path + "/netplay-peer"
        let frames = 600
        let common = ["--room", "nes-lan", "--frames", "\(frames)", "--timeout", "60", "--core", core, "--content", rom,
                      "--lan-port", "45987", "--discovery", "tcp://127.0.0.1:1", "--coordinator", "tcp://127.0.0.1:1"]
        let hostLog = lan.directory + "/host.log", joinLog = lan.directory + "/join.log"
        let host = try lan.launch(in: lan.b, peer, ["host", "--lan", "--lan-beacon", "10.77.0.255", "--lan-address", "10.77.0.2",
                                                    "--players", "2", "--frame-rate", "120", "--checksum-interval", "60",
                                                    "--input-seed", "1"] + common,
                                  environment: [:], log: hostLog)
        let join = try lan.launch(in: lan.a, peer, ["join", "--lan-listen-ms", "1500", "--input-seed", "2"] + common,
                                  environment: [:], log: joinLog)
        let log = { (path: String) in (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
        let exited = eventually(within: 90) { !host.isRunning && !join.isRunning }
        #expect(exited, "still running after 90 s\nhost:\n\(log(hostLog))\njoin:\n\(log(joinLog))")
        guard exited else { return }
        #expect(host.terminationStatus == 0 && join.terminationStatus == 0,
                "host exit \(host.terminationStatus):\n\(log(hostLog))\njoin exit \(join.terminationStatus):\n\(log(joinLog))")
        let hostResult = try #require(PeerResult(log: log(hostLog)), "host: \(log(hostLog))")
        let joinResult = try #require(PeerResult(log: log(joinLog)), "join: \(log(joinLog))")
        #expect(log(hostLog).contains("LAN room 'nes-lan' on tcp://10.77.0.2:"), "\(log(hostLog))")
        #expect(hostResult.frames == frames && joinResult.frames == frames, "\(hostResult)\n\(joinResult)")
        #expect(hostResult.checksum == joinResult.checksum, "\(hostResult)\n\(joinResult)")
        #expect(hostResult.fields["initial"] == joinResult.fields["initial"], "\(hostResult)\n\(joinResult)")
        #expect(joinResult.int("desync_notices") == 0, "\(joinResult)")
    }
}
