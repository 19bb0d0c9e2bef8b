import Foundation
import NetplayService
import NetplayTestSupport
import Testing

/// Invite links end to end: `netplay-peer host` prints its room's `LINK netplay://join?...`, and
/// a joiner given only that link (no room name, no cluster endpoints, no key: the link carries
/// the encrypted cluster's) plays the match to the same checksum; a spectator takes it from
/// NETPLAY_JOIN_LINK. A malformed link is refused in one line before anything is contacted.
@Suite("Invite links", .ownThread)
struct InviteE2ETests {
    @Test(.timeLimit(.minutes(3)))
    func aJoinerWithOnlyTheHostsLinkPlaysTheMatchToTheSameChecksum() throws {
        let keys = try CurveE2ETests.keygen()
        let cluster = try PlayCluster(curveSecretKey: keys.secret)
        let frames = 600
        let host = try cluster.peer("host", ["--players", "2", "--curve-server-key=\(keys.public)"] + Match.host
                                    + Match.common(room: "invited", frames: frames, seed: 1))
        #expect(host.waitFor("LINK netplay://join?", within: 30), "host printed no link: \(host.log)")
        let line = try #require(host.log.split(separator: "\n").first { $0.hasPrefix("LINK ") })
        let link = String(line.dropFirst("LINK ".count))
        #expect(link.contains("session=s-") && link.contains("key="), "\(link)")

        // Plain processes, not cluster.peer: nothing but the link says where, or with which key.
        let join = try ServiceProcess("netplay-peer", ["join", "--link", link, "--room", "not-this-one", "--frames", "\(frames)",
                                                       "--timeout", "150", "--input-seed", "2"] + Match.network)
        #expect(host.waitFor("match running", within: 60), "the match did not start: \(host.log)\n\(join.log)")
        let spectator = try ServiceProcess("netplay-peer", ["spectate", "--frames", "\(frames)", "--timeout", "60"],
                                           environment: ["NETPLAY_JOIN_LINK": link])
        defer { join.kill9(); spectator.kill9() }

        expectSameResults([host, join, spectator], frames: frames)
    }

    @Test func aMalformedLinkIsRefusedInOneLine() throws {
        let cases: [([String], [String: String], String)] = [
            (["--link", "https://example.com/join?session=s-1"], [:], "--link: Not a netplay invite"),
            (["--link", "netplay://join?coordinator=tcp%3A%2F%2F127.0.0.1%3A7200"], [:], "--link: The invite has no session."),
            ([], ["NETPLAY_JOIN_LINK": "netplay://join?session=s-1&coordinator=tcp%3A%2F%2Fh%3A1&password=x"],
             "NETPLAY_JOIN_LINK: Invite links never carry a password"),
        ]
        for (arguments, environment, expected) in cases {
            let join = try ServiceProcess("netplay-peer", ["join"] + arguments, environment: environment)
            let status = join.waitForExit(seconds: 20)
            #expect(status != nil && status != 0, "\(arguments) \(environment) was accepted: \(join.log)")
            let lines = join.log.split(separator: "\n")
            #expect(lines.count == 1 && lines[0].hasPrefix("netplay-peer: ") && lines[0].contains(expected),
                    "expected one line saying '\(expected)': \(join.log)")
        }
        let help = try ServiceProcess("netplay-peer", ["join", "--help"])
        _ = help.waitForExit(seconds: 20)
        #expect(help.log.contains("--link") && help.log.contains("NETPLAY_JOIN_LINK"), "\(help.log)")
    }
}
