import Foundation
import NetplayService
import NetplayTestSupport
import NetplayWire
import Testing

@Suite("netplayctl rooms, sessions and relays", .serialized, .ownThread)
struct NetplayctlTests {
    func run(_ arguments: [String], environment: [String: String] = [:], expect status: Int32 = 0) throws -> String {
        let process = try ServiceProcess("netplayctl", arguments, environment: environment)
        let exit = process.waitForExit(seconds: 20)
        let log = process.log
        #expect(exit == status, "netplayctl \(arguments.joined(separator: " ")): \(log)")
        return log
    }

    func value(_ key: String, in text: String) -> String {
        text.split(separator: "\n").first { $0.hasPrefix(key + ": ") }.map { String($0.dropFirst(key.count + 2).split(separator: " ")[0]) } ?? ""
    }

    /// Discovery and a coordinator with one (fake) relay registered, so sessions can be made.
    static func clusterWithRelay() throws -> (ControlPlane, FakeRelay) {
        let cluster = try ControlPlane()
        return (cluster, try FakeRelay("sync-0", cluster: cluster))
    }

    /// netplayctl's flags naming the cluster's coordinator, and its discovery with its events.
    static func targets(_ cluster: ControlPlane) -> (coordinator: [String], discovery: [String]) {
        (["--coordinator", cluster.coordinatorEndpoint], ["--discovery", cluster.discoveryEndpoint, "--events", cluster.discoveryEvents])
    }

    @Test func streamsRefuseNegativeLimitsWithOneLine() throws {
        for arguments in [["tap", "tcp://127.0.0.1:1", "--count=-1"], ["rooms", "watch", "--duration=-2"]] {
            let output = try run(arguments, expect: 2)
            #expect(output.contains("--count and --duration must not be negative"), "\(output)")
        }
    }

    /// `--all` over a listing whose pages never end: an empty page with a next-page token, or
    /// a token sent before, is one line and a non-zero exit instead of asking forever.
    @Test func listingsWhosePagesGoRoundInACircleAreRefused() throws {
        let rooms = try LyingService { served, _ in
            .listRoomsResponse(ListRoomsResponse(rooms: [Room(roomId: "r\(served)", maxPlayers: 2)], nextPageToken: "t\(served % 3)",
                                                 totalMatching: 9))
        }
        defer { rooms.stop() }
        let circle = try run(["rooms", "list", "--all", "--discovery", rooms.requests], expect: 1)
        #expect(circle.contains("a next-page token it had sent before"), "\(circle)")
        let sessions = try LyingService { _, _ in .listSessionsResponse(ListSessionsResponse(nextPageToken: "more")) }
        defer { sessions.stop() }
        let empty = try run(["sessions", "list", "--all", "--coordinator", sessions.requests], expect: 1)
        #expect(empty.contains("the sessions listing sent an empty page with a next-page token"), "\(empty)")
        // Without --all, the first page is all there is to ask for.
        _ = try run(["sessions", "list", "--coordinator", sessions.requests])
    }

    /// A mistyped trust store used to send netplayctl to the public endpoint in silence (a tap on
    /// an operator-only endpoint then printed nothing, forever); now it is one line. The public
    /// plane and discovery's events endpoint take their variables like every other flag.
    @Test func connectionVariablesAreReadAndAMissingKeyDirectoryIsNamed() throws {
        let flag = try run(["tap", "tcp://127.0.0.1:1", "--keys-dir", "/nonexistent/netplay-keys"], expect: 2)
        #expect(flag.split(separator: "\n").count == 1 && flag.contains("--keys-dir names no directory: /nonexistent/netplay-keys"), "\(flag)")
        let variable = try run(["health", "tcp://127.0.0.1:1"], environment: ["NETPLAY_KEYS_DIR": "/nonexistent/netplay-keys"], expect: 2)
        #expect(variable.contains("NETPLAY_KEYS_DIR names no directory"), "\(variable)")
        let events = try run(["rooms", "watch", "--duration", "1"], environment: ["NETPLAY_DISCOVERY_EVENTS": "udp://bogus"], expect: 2)
        #expect(events.contains("udp://bogus"), "\(events)")

        // With the operator's key at hand, introspect goes to the control plane; on the public
        // plane (flag or variable) a service does not answer it.
        let cluster = try ControlPlane()
        _ = try cluster.keys.operatorKeys()
        let keys = ["NETPLAY_KEYS_DIR": cluster.dataRoot + "/keys"]
        _ = try run(["introspect", cluster.discoveryEndpoint], environment: keys)
        let flagged = try run(["introspect", cluster.discoveryEndpoint, "--public-plane"], environment: keys, expect: 1)
        let viaVariable = try run(["introspect", cluster.discoveryEndpoint], environment: keys.merging(["NETPLAY_PUBLIC_PLANE": "1"]) { $1 }, expect: 1)
        #expect(flagged.split(separator: "\n").last == viaVariable.split(separator: "\n").last, "\(flagged)\n\(viaVariable)")
        _ = try run(["introspect", cluster.discoveryEndpoint], environment: keys.merging(["NETPLAY_PUBLIC_PLANE": "maybe"]) { $1 }, expect: 2)
    }

    /// Names are anyone's: a host may call a room `ESC ] 0 ; … BEL`, a C1 control sequence
    /// introducer, or a line break followed by a forged player. netplayctl shows them escaped
    /// (one line stays one line, no terminal escape reaches the screen), and its JSON stays JSON.
    @Test func namesFromOthersNeverReachTheTerminalAsControlCharacters() throws {
        let (cluster, relay) = try Self.clusterWithRelay()
        defer { relay.stop() }
        let (c, d) = Self.targets(cluster)
        let hostile = "\u{1B}]0;pwned\u{07}\u{9B}31m\n  P2: admin"
        let created = try run(["sessions", "create"] + c + ["--game", hostile, "--crc", "1", "--name", hostile, "--room-name", hostile])
        let session = value("session", in: created)
        #expect(session.hasPrefix("s-"), "\(created)")
        var outputs = [try run(["sessions", "show", session] + c), try run(["sessions", "list"] + c)]
        #expect(eventually(within: 5) { ((try? run(["rooms", "list"] + d)) ?? "").contains("1 of 1 matching rooms") })
        outputs.append(try run(["rooms", "list"] + d))
        for output in outputs {
            #expect(!output.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 || $0.value == 0x9B }, "\(output)")
            #expect(!output.split(separator: "\n").contains { $0.hasPrefix("  P2: admin") }, "\(output)")
            #expect(output.contains("\\u{1b}]0;pwned"), "\(output)")
        }
        for json in [try run(["sessions", "show", session] + c + ["--json"]), try run(["rooms", "list"] + d + ["--json"])] {
            #expect(!json.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 || $0.value == 0x9B }, "\(json)")
            let line = try #require(json.split(separator: "\n").first)
            // A JSON reader gets the name back exactly.
            #expect(Self.strings(in: try JSONSerialization.jsonObject(with: Data(line.utf8))).contains(hostile), "\(json)")
        }
    }

    /// Every string value in a decoded JSON document.
    static func strings(in object: Any) -> [String] {
        if let text = object as? String { return [text] }
        if let array = object as? [Any] { return array.flatMap { strings(in: $0) } }
        if let dictionary = object as? [String: Any] { return dictionary.values.flatMap { strings(in: $0) } }
        return []
    }

    @Test func everyVerbAgainstRealServices() throws {
        let (cluster, relay) = try Self.clusterWithRelay()
        defer { relay.stop() }
        let (c, d) = Self.targets(cluster)
        let game = ["--game", "Super Mario Bros.", "--crc", "3337EC46", "--core", "nestopia", "--core-version", "1.52.0"]
        let watch = try ServiceProcess("netplayctl", ["rooms", "watch"] + d + ["--json", "--count", "3", "--duration", "20"])
        // The coordinator's events admit trust-store keys only: the tap uses the operator key.
        _ = try cluster.keys.operatorKeys()
        let tap = try ServiceProcess("netplayctl", ["tap", cluster.coordinatorEvents, "--topic", "sessions.started", "--count", "1",
                                                    "--duration", "30"], environment: ["NETPLAY_KEYS_DIR": cluster.dataRoot + "/keys"])
        Thread.sleep(forTimeInterval: 1)
        let created = try run(["sessions", "create"] + c + game + ["--name", "alice", "--max-players", "3", "--spectators", "1"])
        let session = value("session", in: created)
        let hostId = value("participant", in: created)
        let hostToken = value("token", in: created)
        #expect(session.hasPrefix("s-") && hostToken.count == 64 && created.contains("ticket: relay sync-0"))
        let joined = try run(["sessions", "join", session] + c + game + ["--name", "bob"])
        let bob = value("participant", in: joined)
        #expect(joined.contains("slot 2"))
        let mismatch = try run(["sessions", "join", session] + c + ["--game", "x", "--crc", "1", "--name", "eve"], expect: 1)
        #expect(mismatch.contains("ERROR_CODE_CONTENT_MISMATCH"))
        _ = try run(["sessions", "join", session] + c + game + ["--name", "carol", "--spectate"])
        let shown = try run(["sessions", "show", session] + c)
        #expect(shown.contains("P1: alice") && shown.contains("P2: bob") && shown.contains("spectator: carol"))
        #expect(try run(["sessions", "list"] + c).contains("1 of 1 matching sessions"))
        #expect(eventually(within: 5) { ((try? run(["rooms", "list"] + d)) ?? "").contains("players 2/3") })
        #expect(try run(["rooms", "list"] + d + ["--game", "zelda"]).contains("0 of 0 matching rooms"))
        let json = try run(["rooms", "list"] + d + ["--json"])
        #expect((try? JSONSerialization.jsonObject(with: Data(json.split(separator: "\n")[0].utf8))) != nil)
        _ = try run(["sessions", "kick", session] + c + ["--participant", hostId, "--token", hostToken, "--kick", bob, "--reason", "bye"])
        let notHost = try run(["sessions", "end", session] + c + ["--participant", bob, "--token", hostToken], expect: 1)
        #expect(notHost.contains("ERROR_CODE_UNAUTHENTICATED"))
        let relays = try run(["relays", "list"] + c)
        #expect(relays.contains("sync-0") && relays.contains("1 relays"))
        #expect(relays.contains("inputs/s ") && relays.contains("% "), "\(relays)")
        // When the relay last refreshed, as an age (it refreshes every few seconds), not epoch milliseconds.
        #expect(relays.range(of: #"  last seen [0-9]+(\.[0-9])? s ago\n"#, options: .regularExpression) != nil, "\(relays)")
        _ = try run(["sessions", "start", session] + c + ["--participant", hostId, "--token", hostToken])
        // The tap prints the start as one short line: time, topic, session, room, players, relay, who.
        #expect(tap.waitForExit(seconds: 15) == 0, "\(tap.log)")
        let tapped = tap.log.split(separator: "\n").filter { !$0.isEmpty }
        #expect(tapped.count == 1, "\(tapped)")
        let line = String(tapped.first ?? "")
        #expect(line.range(of: #"^[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3} sessions\.started "#, options: .regularExpression) != nil, "\(line)")
        #expect(line.hasSuffix(" sessions.started \(session) \"alice's room\" 1/3 relay sync-0 spectators 1 by \"alice\""), "\(line)")
        #expect(line.count < 160 && !line.contains("{"), "\(line)")
        _ = try run(["sessions", "end", session] + c + ["--participant", hostId, "--token", hostToken, "--reason", "over"])
        #expect(try run(["sessions", "list"] + c + ["--state", "ended"]).contains(session))
        #expect(watch.waitForExit(seconds: 15) == 0, "\(watch.log)")
        let watched = watch.log
        let changes = watched.split(separator: "\n").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }.compactMap { $0["change"] as? String }
        #expect(changes.first == "added" && changes.count == 3, "\(watched)")
        let leaveGhost = try run(["sessions", "leave", "s-ghost"] + c + ["--participant", "p", "--token", "00"], expect: 1)
        #expect(leaveGhost.contains("ERROR_CODE_NOT_FOUND"))
        let badFlag = try run(["rooms", "list", "--crc", "zz"] + d, expect: 2)
        #expect(badFlag.split(separator: "\n").count == 1)
    }
}
