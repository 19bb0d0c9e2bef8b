import Foundation
import NetplayTestSupport
import Testing

/// Two network namespaces joined by a veth pair on 10.77.0.0/24: a real headless RetroArch 1.14
/// host (null drivers, nestopia, a generated NES ROM) in one, netplay-discovery scanning for
/// RetroArch hosts in the other. Traffic never leaves the pair (no routes beyond the /24, DNS
/// pointed at the namespaces' own loopback). Everything made here is removed in every case.
@Suite("RetroArch LAN discovery in network namespaces", .serialized, .ownThread)
struct RetroArchLANTests {
    /// Why the test cannot run here, or nil when it can.
    static let skipReason: String? = {
        if let reason = NamespacePair.unavailableReason { return reason }
        return RetroArchFixture.unavailableReason
    }()

    @Test(.disabled(if: skipReason != nil, Comment(rawValue: "skipped: \(skipReason ?? "")")))
    func aRealHeadlessRetroArchHostIsListedAsARoom() throws {
        let lan = try NamespacePair()
        defer { lan.tearDown() }
        let work = lan.directory

        let fixture = try RetroArchFixture(directory: work)
        let rom = fixture.rom
        let config = try fixture.config("host", nick: "ra-host")
        let retroarch = try lan.launch(in: lan.b, Shell.which("retroarch")!, fixture.arguments(config: config, ["--host", "--nick", "ra-host"]),
                                       environment: fixture.environment("host"), log: work + "/retroarch.log")
        let binaries = BuildProducts.directory.path
        let discovery = try lan.launch(in: lan.a, binaries + "/netplay-discovery", [
            "--endpoint", "tcp://127.0.0.1:7100", "--events", "tcp://127.0.0.1:7101", "--data-dir", work + "/discovery",
            "--beacon-port", "0", "--retroarch-scan-interval", "1",  // targets: auto = the veth's broadcast address
        ], environment: ["NETPLAY_TELEMETRY": "none"], log: work + "/discovery.log")

        var room: [String: Any]?
        let deadline = Date().addingTimeInterval(45)
        while room == nil, Date() < deadline, retroarch.isRunning, discovery.isRunning {
            Thread.sleep(forTimeInterval: 0.5)
            let list = Shell.run(lan.ip, ["netns", "exec", lan.a, binaries + "/netplayctl", "rooms", "list",
                                          "--discovery", "tcp://127.0.0.1:7100", "--source", "retroarch", "--json",
                                          // not the operator keys a `make up` left in ./data/keys: this discovery knows none
                                          "--public-plane"])
            room = list.output.split(separator: "\n").compactMap {
                (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
            }.first
        }
        let log = { (try? String(contentsOfFile: work + "/retroarch.log", encoding: .utf8)) ?? "" }
        let found = try #require(room, "no RetroArch room; discovery log:\n\((try? String(contentsOfFile: work + "/discovery.log", encoding: .utf8)) ?? "")\nretroarch log:\n\(log())")
        #expect(found["roomId"] as? String == "retroarch:10.77.0.2:55435")
        #expect(found["hostName"] as? String == "ra-host")
        #expect(found["source"] as? String == "ROOM_SOURCE_RETROARCH_LAN" && found["transport"] as? String == "TRANSPORT_LAN")
        #expect((found["hostVersion"] as? String)?.hasPrefix("RetroArch 1.") == true)
        let content = found["content"] as? [String: Any]
        #expect(content?["coreId"] as? String == "Nestopia")
        #expect((content?["crc32"] as? NSNumber)?.uint32Value == RetroArchFixture.crc32(rom), "RetroArch reports the CRC32 of the whole file")
        #expect(content?["gameName"] as? String == "tiny")
        #expect(log().contains("Query received on LAN interface"))
    }
}
