import Foundation
import NetplayTestSupport
import Testing

/// The C API from C: a frontend compiled by the test against libNetplayC (netplay.h only)
/// plays nestopia through a real cluster against netplay-peer, and every bad argument gets an
/// error instead of a crash.
@Suite(.serialized, .ownThread)
struct CAPITests {
    /// NULL, freed and wrong-kind handles, wrong sizes, missing callbacks, bad settings and
    /// unreachable services return their NP_ERR_* with a reason; a game whose save fails ends
    /// its (one-player LAN) match with NP_ERR_GAME instead of crashing; the helpers give the
    /// values the Swift side uses (CRC32, MD5, core id, state hash); a call on a match from a
    /// second thread while the first is inside one is refused.
    @Test(.timeLimit(.minutes(2)))
    func errorPathsReturnErrors() throws {
        let program = try CFrontend.compile("np_errors")
        let nowhere = TestPorts.endpoint()
        let run = try ServiceProcess(program, [nowhere, "\(TestPorts.free())"])
        let status = run.waitForExit(seconds: 60)
        #expect(status == 0, "np_errors failed: \(run.log)")
        #expect(run.log.contains("ERRORS OK"), "\(run.log)")
        #expect(!run.log.contains("FAILED"), "\(run.log)")
    }

    /// A C program hosts nestopia through the cluster with netplay.h; netplay-peer joins with
    /// its own nestopia. Both start from the same state and report the same checksum at frame
    /// 600 (each process's heap differs: only the deterministic load makes them agree). A C
    /// joiner with other content is refused with CONTENT_MISMATCH (60).
    @Test(.timeLimit(.minutes(3)))
    func cHostAndSwiftJoinerAgree() throws {
        let program = try CFrontend.compile("np_nestopia")
        let rom = try LibretroFixtures.testROM()
        let core = try LibretroFixtures.nestopiaCore()
        var options = TestCluster.Options(secret: String(repeating: "c4", count: 32))
        options.name = "capi"
        options.coordinatorArguments = ["--password-cost", "minimum", "--relay-refresh-interval", "0.5"]
        let cluster = try TestCluster(options)
        let room = "capi-\(UUID().uuidString.prefix(8))"
        let frames = 600
        func heap(_ seed: Int) -> [String: String] { ["MALLOC_PERTURB_": "\(seed * 67 % 255 + 1)"] }
        func cArguments(_ role: String, content: String, seed: Int) -> [String] {
            [role, core, content, cluster.discoveryEndpoint, cluster.coordinatorEndpoint, room, "\(frames)", "120", "\(seed)"]
        }

        let host = try ServiceProcess(program, cArguments("host", content: rom, seed: 1), environment: heap(1))
        defer { host.kill9() }
        #expect(host.waitFor("initial state", within: 30), "the C host did not host: \(host.log)")

        // Other content (one byte changed): the coordinator refuses the C joiner.
        var other = try [UInt8](Data(contentsOf: URL(fileURLWithPath: rom)))
        other[other.count - 7] ^= 0x01
        let otherPath = try LibretroFixtures.scratchDirectory() + "/other.nes"
        try Data(other).write(to: URL(fileURLWithPath: otherPath))
        let refused = try ServiceProcess(program, cArguments("join", content: otherPath, seed: 3))
        defer { refused.kill9() }
        #expect(refused.waitForExit(seconds: 30) == 1, "\(refused.log)")
        #expect(refused.log.contains("REFUSED code=60"), "a joiner with other content was not refused: \(refused.log)")

        let joiner = try cluster.peer("join", ["--room", room, "--frames", "\(frames)", "--timeout", "90", "--input-seed", "2",
                                               "--core", core, "--content", rom], environment: heap(2))
        guard let joined = joiner.result(within: 100) else {
            Issue.record("netplay-peer failed: \(joiner.log)\nC host: \(host.log)")
            return
        }
        guard let hosted = host.result(within: 30) else {
            Issue.record("the C host failed: \(host.log)\nnetplay-peer: \(joiner.log)")
            return
        }
        #expect(hosted.fields["initial"] == joined.fields["initial"], "initial states differ: \(hosted) / \(joined)")
        #expect(hosted.checksum == joined.checksum, "checksums differ: C \(hosted) / Swift \(joined)\n\(host.log)\n\(joiner.log)")
        #expect(hosted.frames == frames && joined.frames == frames)
        #expect(hosted.int("slot") == 1 && joined.int("slot") == 2, "\(hosted) / \(joined)")
        #expect(joined.int("desync_notices") == 0 && joined.int("states_loaded") == 0, "\(joined)")
    }
}
