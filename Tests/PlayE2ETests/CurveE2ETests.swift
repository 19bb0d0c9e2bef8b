import Foundation
import NetplayService
import NetplayTestSupport
import Testing

/// A match through a CurveZMQ-encrypted cluster: discovery, coordinator and relay started with
/// a cluster secret key from `netplayctl keygen`; netplay-peer processes given the public key
/// (each of the three ways: flag, NETPLAY_CURVE_SERVER_KEY, derived from NETPLAY_CURVE_SECRET_KEY)
/// play and watch a match and agree; peers without the key, with another cluster's key or with a
/// malformed one fail with one line instead of hanging.
@Suite("Play through an encrypted cluster", .ownThread)
struct CurveE2ETests {
    @Test(.timeLimit(.minutes(3)))
    func peersWithTheServerKeyPlayAndPeersWithoutItFailWithOneLine() throws {
        let keys = try Self.keygen()
        let other = try Self.keygen()
        let cluster = try PlayCluster(curveSecretKey: keys.secret)
        let room = "curve"
        let frames = 1200
        let host = try cluster.peer("host", ["--players", "2", "--curve-server-key=\(keys.public)"] + Match.host
                                    + Match.common(room: room, frames: frames, seed: 1))
        #expect(host.waitFor("session s-", within: 30), "host did not get a session: \(host.log)")
        let join = try cluster.peer("join", Match.common(room: room, frames: frames, seed: 2),
                                    environment: ["NETPLAY_CURVE_SERVER_KEY": keys.public])
        #expect(host.waitFor("match running", within: 60), "the match did not start: \(host.log)\n\(join.log)")
        let spectator = try cluster.peer("spectate", ["--room", room, "--frames", "\(frames)", "--timeout", "60"],
                                         environment: ["NETPLAY_CURVE_SECRET_KEY": keys.secret])

        // Meanwhile: no key, another cluster's key. Each gives up within its short timeout.
        let keylessJoin = try cluster.peer("join", ["--room", room, "--timeout", "3"])
        let keylessHost = try cluster.peer("host", ["--room", "keyless", "--timeout", "3"])
        let wrongKey = try cluster.peer("join", ["--room", room, "--timeout", "3", "--curve-server-key=\(other.public)"])
        let refusals: [(ServiceProcess, String)] = [
            (keylessJoin, "no CurveZMQ server key was given"),
            (keylessHost, "no CurveZMQ server key was given"),
            (wrongKey, "the CurveZMQ server key is not the cluster's"),
        ]
        for (process, reason) in refusals {
            let status = process.waitForExit(seconds: 20)
            #expect(status != nil && status != 0, "\(process.name) did not fail in time: \(process.log)")
            let lines = process.log.split(separator: "\n")
            #expect(lines.count == 1 && lines[0].hasPrefix("netplay-peer: ") && lines[0].contains(reason),
                    "expected one line saying '\(reason)': \(process.log)")
        }

        expectSameResults([host, join, spectator], frames: frames)
    }

    @Test func aMalformedKeyIsRefusedAtOnceAndHelpListsTheFlag() throws {
        let cases: [([String], [String: String], String)] = [
            (["--curve-server-key", "nope"], [:], "--curve-server-key must be a 40-character Z85 public key"),
            ([], ["NETPLAY_CURVE_SERVER_KEY": "short"], "NETPLAY_CURVE_SERVER_KEY must be a 40-character Z85 public key"),
            ([], ["NETPLAY_CURVE_SECRET_KEY": String(repeating: "~", count: 40)], "NETPLAY_CURVE_SECRET_KEY must be a 40-character Z85 secret key"),
        ]
        for (arguments, environment, message) in cases {
            for command in ["host", "join", "spectate", "demo"] {
                let timeout = command == "demo" ? [] : ["--timeout", "3"]  // in case the key got through
                let peer = try ServiceProcess("netplay-peer", [command] + arguments + timeout, environment: environment)
                #expect(peer.waitForExit(seconds: 10) == 2, "\(command) \(arguments) \(environment): \(peer.log)")
                #expect(peer.log == "netplay-peer: \(message)\n", "\(command) \(arguments) \(environment): \(peer.log)")
            }
        }
        let help = try ServiceProcess("netplay-peer", ["join", "--help"])
        #expect(help.waitForExit(seconds: 10) == 0)
        #expect(help.log.contains("--curve-server-key <z85>") && help.log.contains("NETPLAY_CURVE_SERVER_KEY"), "\(help.log)")
    }

    /// A fresh cluster key pair from `netplayctl keygen`.
    static func keygen() throws -> (public: String, secret: String) {
        let keygen = try ServiceProcess("netplayctl", ["keygen"])
        #expect(keygen.waitForExit(seconds: 10) == 0, "keygen: \(keygen.log)")
        let lines = keygen.log.split(separator: "\n")
        let publicKey = try #require(lines.first { $0.hasPrefix("public: ") }).dropFirst(8)
        let secretKey = try #require(lines.first { $0.hasPrefix("secret: ") }).dropFirst(8)
        return (String(publicKey), String(secretKey))
    }
}
