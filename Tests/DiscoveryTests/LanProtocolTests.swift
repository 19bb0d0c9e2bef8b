@testable import Discovery
import Foundation
import NetplayLAN
import NetplayService
import NetplayWire
import Testing
import NetplayTestSupport

@Suite("LAN protocols: RetroArch RANQ/RANS and our beacon", .ownThread)
struct LanProtocolTests {
    let advertisement = RetroArchAdvertisement(contentCRC: 0x3337_EC46, port: 55435, hasPassword: true, hasSpectatePassword: false,
                                               nick: "alice", frontend: "linux x86_64", core: "Nestopia", coreVersion: "1.52.0",
                                               retroarchVersion: "1.14.0", content: "smb.nes", subsystemName: "N/A")

    @Test func theQueryIsFourBigEndianBytes() {
        #expect(RetroArchLAN.query == [0x52, 0x41, 0x4E, 0x51])  // "RANQ"
        #expect(RetroArchLAN.isQuery(Array("RANQ".utf8)))
        #expect(!RetroArchLAN.isQuery(Array("RANQ!".utf8)))
        #expect(!RetroArchLAN.isQuery(Array("RANS".utf8)))
    }

    @Test func advertisementsAre688BigEndianBytes() throws {
        let bytes = advertisement.encoded()
        #expect(bytes.count == 688)
        #expect(Array(bytes[0..<4]) == Array("RANS".utf8))
        #expect(Array(bytes[4..<8]) == [0x33, 0x37, 0xEC, 0x46])
        #expect(Array(bytes[8..<12]) == [0, 0, 0xD8, 0x8B])  // 55435
        #expect(Array(bytes[12..<16]) == [0, 0, 0, 1])
        #expect(Array(bytes[16..<21]) == Array("alice".utf8) && bytes[21] == 0)  // nick at 16, 32 bytes
        #expect(Array(bytes[48..<60]) == Array("linux x86_64".utf8))  // frontend at 48
        #expect(Array(bytes[80..<88]) == Array("Nestopia".utf8))  // core at 80
        #expect(Array(bytes[112..<118]) == Array("1.52.0".utf8))  // core version at 112
        #expect(Array(bytes[144..<150]) == Array("1.14.0".utf8))  // RetroArch version at 144
        #expect(Array(bytes[176..<183]) == Array("smb.nes".utf8))  // content at 176, 256 bytes
        #expect(Array(bytes[432..<435]) == Array("N/A".utf8))  // subsystem at 432, 256 bytes
        #expect(RetroArchAdvertisement(decoding: bytes) == advertisement)
    }

    @Test func malformedAdvertisementsAreRejected() {
        var bytes = advertisement.encoded()
        #expect(RetroArchAdvertisement(decoding: Array(bytes.dropLast())) == nil)
        #expect(RetroArchAdvertisement(decoding: bytes + [0]) == nil)
        bytes[3] = UInt8(ascii: "Q")
        #expect(RetroArchAdvertisement(decoding: bytes) == nil)
        #expect(RetroArchAdvertisement(decoding: []) == nil)
    }

    @Test func longStringsAreCutAtCharacterBoundariesWithATerminator() throws {
        var long = advertisement
        long.nick = String(repeating: "é", count: 40)  // 80 bytes in UTF-8
        long.content = String(repeating: "x", count: 300)
        let decoded = try #require(RetroArchAdvertisement(decoding: long.encoded()))
        #expect(decoded.nick == String(repeating: "é", count: 15))  // 30 bytes + NUL padding
        #expect(decoded.content.count == 255)
    }

    @Test func anAdvertisementBecomesARetroArchRoom() throws {
        let room = advertisement.room(from: UDPAddress(ip: 0x0A4D_0002, port: 55435))
        #expect(room.roomId == "retroarch:10.77.0.2:55435")
        #expect(room.source == .retroarchLan && room.transport == .lan)
        #expect(room.hostEndpoint == "retroarch://10.77.0.2:55435")
        #expect(room.contentInfo.crc32 == 0x3337_EC46 && room.contentInfo.coreId == "Nestopia" && room.contentInfo.gameName == "smb.nes")
        #expect(room.hasPassword && !room.hasSpectatePassword && room.hostVersion == "RetroArch 1.14.0")
        try RoomRegistry.validate(room)
        _ = try room.encoded()  // within every wire limit
    }

    @Test func addressRanges() {
        #expect(UDPAddress("10.1.2.3:1")!.isPrivate)
        #expect(UDPAddress("172.16.0.1:1")!.isPrivate && UDPAddress("172.31.255.1:1")!.isPrivate)
        #expect(!UDPAddress("172.32.0.1:1")!.isPrivate)
        #expect(UDPAddress("192.168.1.1:1")!.isPrivate)
        #expect(!UDPAddress("8.8.8.8:1")!.isPrivate && UDPAddress("127.0.0.1:1")!.isLoopback)
        #expect(UDPAddress("1.2.3.4", defaultPort: 9)?.port == 9)
        #expect(UDPAddress("1.2.3") == nil && UDPAddress("1.2.3.256:1") == nil && UDPAddress("1.2.3.4:70000") == nil)
        // A beacon's endpoint in its one plain form: getaddrinfo reads "012" as octal 10.
        let sender = UDPAddress("192.168.1.12:9")!
        #expect(LanBeaconCodec.hostEndpointProblem("tcp://192.168.1.012:7300", from: sender, localAddresses: { [] }) != nil)
        #expect(LanBeaconCodec.hostEndpointProblem("tcp://192.168.1.12:7300", from: sender, localAddresses: { [] }) == nil)
        #expect(LanBeaconCodec.hostEndpointProblem("tcp://10.0.0.0:7300", from: UDPAddress("10.0.0.0:9")!, localAddresses: { [] }) == nil)
        // No colon after the scheme: the scheme's own colon made the host's range run backwards,
        // a trap (the process ended) that one datagram from anyone on the LAN set off.
        for endpoint in ["tcp://", "tcp://x", "tcp://192.168.1.12", "tcp:", "tcp://:", "tcp://:7300", "tcp://192.168.1.12:"] {
            #expect(LanBeaconCodec.hostEndpointProblem(endpoint, from: sender, localAddresses: { [] }) != nil, "\(endpoint)")
        }
        // Signed octets are no address (UInt8("+12") is 12): libzmq handed such a host to the resolver.
        #expect(LanBeaconCodec.hostEndpointProblem("tcp://+192.+168.+1.+12:7300", from: sender, localAddresses: { [] }) != nil)
        #expect(UDPAddress.parseIP("192.168.-0.12") == nil && UDPAddress.parseIP("+1.2.3.4") == nil && UDPAddress("1.2.3.4:+9") == nil)
    }

    /// Answers to our RetroArch scans come from the LAN or a target named by address: the scan
    /// socket is open to anyone, and an internet host's made-up answers became lobby rooms.
    @Test func scanAnswersComeFromTheLanOrANamedTarget() {
        #expect(LanDiscovery.mayAnswerScan(UDPAddress("192.168.1.20:55435")!, targets: nil))
        #expect(LanDiscovery.mayAnswerScan(UDPAddress("127.0.0.1:55435")!, targets: nil))
        #expect(!LanDiscovery.mayAnswerScan(UDPAddress("203.0.113.9:55435")!, targets: nil))
        #expect(LanDiscovery.mayAnswerScan(UDPAddress("203.0.113.9:40000")!, targets: [UDPAddress("203.0.113.9:55435")!]))
        #expect(!LanDiscovery.mayAnswerScan(UDPAddress("198.51.100.10:55435")!, targets: [UDPAddress("203.0.113.9:55435")!]))
        #expect(LanDiscovery.mayAnswerScan(UDPAddress("203.0.113.10:55435")!, targets: [UDPAddress("203.0.113.255:55435")!]),
                "a host answering a broadcast target's scan")
        #expect(LanDiscovery.mayAnswerScan(UDPAddress("169.254.3.4:55435")!, targets: nil)
                && LanDiscovery.mayAnswerScan(UDPAddress("100.64.1.2:55435")!, targets: nil))
    }

    @Test func theClusterPortTableFreesTheBeaconsPort() {
        #expect(ClusterPorts.beaconPort == Int(LanBeaconCodec.defaultPort))
    }

    @Test func beaconsRoundTripWithinOneDatagram() throws {
        let beacon = LanBeacon(protocolVersion: 1, beaconId: "abc", sequence: 7, intervalMs: 1000,
                               room: makeRoom("x", transport: .lan))
        let datagram = try LanBeaconCodec.encode(beacon)
        #expect(datagram.count <= 1200)
        #expect(LanBeaconCodec.decode(datagram) == beacon)
        #expect(LanBeaconCodec.decode(Array(datagram.dropLast())) == nil)
        #expect(LanBeaconCodec.decode(Array("hello".utf8)) == nil)
        #expect(LanBeaconCodec.decode(RetroArchLAN.query) == nil)
        #expect(LanBeaconCodec.ttlMs(intervalMs: 1000) == 3000)
        #expect(LanBeaconCodec.ttlMs(intervalMs: 0) == 3000)
        let source = UDPAddress(ip: 0xC0A8_0105, port: 7102)
        #expect(LanBeaconCodec.roomId(beaconId: "abc", from: source) == "lan:192.168.1.5:abc")
        #expect(LanBeaconCodec.roomId(beaconId: String(repeating: "z", count: 64), from: source).utf8.count == 64)
        #expect(LanBeaconCodec.roomId(beaconId: String(repeating: "\u{3042}", count: 30), from: source).utf8.count <= 64)
    }

    @Test func udpSocketsTalkOverLoopback() throws {
        let a = try UDPSocket(host: "127.0.0.1", port: 0)
        let b = try UDPSocket(host: "127.0.0.1", port: 0)
        #expect(a.localAddress.port != 0)
        #expect(a.send([1, 2, 3], to: b.localAddress))
        var received: (bytes: [UInt8], from: UDPAddress)?
        for _ in 0..<100 where received == nil {
            received = b.receive()
            if received == nil { usleep(5_000) }
        }
        #expect(received?.bytes == [1, 2, 3] && received?.from == a.localAddress)
        #expect(b.receive() == nil)
        #expect(throws: UDPError.self) { try UDPSocket(host: "127.0.0.1", port: a.localAddress.port) }
        #expect(throws: UDPError.self) { try UDPSocket(host: "not-an-ip", port: 0) }
        // Zero-padded octets are the address the flags have always taken.
        #expect(try UDPSocket(host: "127.000.000.001", port: 0).localAddress.host == "127.0.0.1")
    }

    @Test func aRANSAdvertisesOnlyRoomsRetroArchCanJoinAtThisMachinesAddress() {
        let lanAddress = UDPAddress.parseIP("192.168.7.10")!
        let local: Set<UInt32> = [0x7F00_0001, lanAddress]
        let fromLan = UDPAddress("192.168.7.20:40000")!, fromLoopback = UDPAddress("127.0.0.1:40000")!
        func room(_ endpoint: String, source: RoomSource = .lobby) -> Room {
            Room(roomId: "r", hostEndpoint: endpoint, source: source)
        }
        func joinable(_ room: Room, _ from: UDPAddress) -> Bool {
            LanDiscovery.joinableByRetroArch(room, askedFrom: from, localAddresses: local)
        }
        #expect(joinable(room("retroarch://192.168.7.10:40001"), fromLan))
        #expect(joinable(room("retroarch://192.168.7.10:40001"), fromLoopback))
        #expect(joinable(room("retroarch://127.0.0.1:40001"), fromLoopback))
        // A loopback port is not reachable from another host.
        #expect(!joinable(room("retroarch://127.0.0.1:40001"), fromLan))
        // Another host's room: RetroArch would connect to this machine instead.
        #expect(!joinable(room("retroarch://192.168.7.99:40001"), fromLan))
        // Our ZeroMQ hosts, rooms without a port or an address, and RetroArch hosts found by a scan.
        #expect(!joinable(room("tcp://192.168.7.10:7310"), fromLan))
        #expect(!joinable(room(""), fromLan))
        #expect(!joinable(room("retroarch://192.168.7.10"), fromLan))
        #expect(!joinable(room("retroarch://relay.example.org:40001"), fromLan))
        #expect(!joinable(room("retroarch://192.168.7.10:40001", source: .retroarchLan), fromLan))
    }
}
