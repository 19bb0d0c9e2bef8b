import MemberwiseInit
import NetplayLAN
import NetplayService
import NetplayWire

/// RetroArch's LAN discovery protocol (as of RetroArch 1.14), spoken on UDP port 55435:
/// a client broadcasts the 4-byte query `RANQ` (big-endian magic 0x52414E51); every hosting
/// RetroArch answers the sender, if the sender's address is in a private range, with one 688-byte
/// `RANS` advertisement (big-endian integers, NUL-padded fixed-size strings).
public enum RetroArchLAN {
    /// The discovery port (also RetroArch's default netplay TCP port).
    public static let port: UInt16 = 55435
    /// "RANQ".
    public static let queryMagic: UInt32 = 0x5241_4E51
    /// "RANS".
    public static let responseMagic: UInt32 = 0x5241_4E53
    /// The advertisement's size in bytes.
    public static let advertisementSize = 688
    /// The query datagram.
    public static let query: [UInt8] = bigEndian(queryMagic)

    /// True when `datagram` is exactly a RANQ query.
    public static func isQuery(_ datagram: [UInt8]) -> Bool {
        datagram == query
    }

    static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }
}

/// One RANS advertisement: what a RetroArch host says about itself.
///
/// Layout (688 bytes): magic, content CRC32, TCP port, password flags (bit 0 play, bit 1
/// spectate), each a big-endian 32-bit word; then NUL-padded strings: nick (32), frontend (32),
/// core name (32), core version (32), RetroArch version (32), content (256), subsystem (256).
@PublicMemberwiseInit
public struct RetroArchAdvertisement: Sendable, Equatable {
    /// CRC32 of the loaded content (0 with a subsystem).
    public var contentCRC: UInt32
    /// The host's netplay TCP port.
    public var port: UInt32
    /// A play password is set.
    public var hasPassword: Bool = false
    /// A spectate password is set.
    public var hasSpectatePassword: Bool = false
    /// The host's nickname.
    public var nick: String
    /// Frontend identification, e.g. "linux x86_64".
    public var frontend: String
    /// Core (library) name, e.g. "Nestopia".
    public var core: String
    /// Core version.
    public var coreVersion: String
    /// RetroArch version, e.g. "1.14.0".
    public var retroarchVersion: String
    /// Content file name (or "a|b" for subsystems).
    public var content: String
    /// Subsystem name, "N/A" without one.
    public var subsystemName: String = "N/A"

    static let stringFields = [32, 32, 32, 32, 32, 256, 256]

    /// Decodes a RANS datagram; nil unless it is exactly 688 bytes with the RANS magic.
    public init?(decoding bytes: [UInt8]) {
        guard bytes.count == RetroArchLAN.advertisementSize else { return nil }
        func word(_ offset: Int) -> UInt32 {
            UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
        }
        guard word(0) == RetroArchLAN.responseMagic else { return nil }
        contentCRC = word(4)
        port = word(8)
        let flags = word(12)
        hasPassword = flags & 1 != 0
        hasSpectatePassword = flags & 2 != 0
        var offset = 16
        var strings: [String] = []
        for size in Self.stringFields {
            let field = bytes[offset..<offset + size]
            let text = field.prefix { $0 != 0 }
            strings.append(String(decoding: text, as: UTF8.self))
            offset += size
        }
        (nick, frontend, core, coreVersion, retroarchVersion, content, subsystemName) =
            (strings[0], strings[1], strings[2], strings[3], strings[4], strings[5], strings[6])
    }

    /// The 688-byte datagram. Strings longer than their field are cut at a character boundary,
    /// always leaving a terminating NUL.
    public func encoded() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(RetroArchLAN.advertisementSize)
        out += RetroArchLAN.bigEndian(RetroArchLAN.responseMagic)
        out += RetroArchLAN.bigEndian(contentCRC)
        out += RetroArchLAN.bigEndian(port)
        out += RetroArchLAN.bigEndian((hasPassword ? 1 : 0) | (hasSpectatePassword ? 2 : 0))
        let strings = [nick, frontend, core, coreVersion, retroarchVersion, content, subsystemName]
        for (text, size) in zip(strings, Self.stringFields) {
            let bytes = Self.truncated(text, to: size - 1)
            out += bytes
            out += [UInt8](repeating: 0, count: size - bytes.count)
        }
        return out
    }

    /// `text`'s UTF-8 bytes, at most `limit`, cut at a character boundary, without NULs.
    static func truncated(_ text: String, to limit: Int) -> [UInt8] {
        var out: [UInt8] = []
        for character in text where character != "\0" {
            let bytes = Array(String(character).utf8)
            if out.count + bytes.count > limit { break }
            out += bytes
        }
        return out
    }

    /// The registry room for this host, heard from `address` (the reply's source).
    public func room(from address: UDPAddress) -> Room {
        let port = self.port == 0 || self.port > 65535 ? UInt32(RetroArchLAN.port) : self.port
        let game = content.isEmpty || content == "N/A" ? "" : content
        return Room(
            roomId: "retroarch:\(address.host):\(port)",
            hostName: String(decoding: Self.truncated(nick, to: 64), as: UTF8.self),
            roomName: String(decoding: Self.truncated(nick.isEmpty ? "RetroArch" : "\(nick) (RetroArch)", to: 128), as: UTF8.self),
            content: ContentInfo(gameName: String(decoding: Self.truncated(game, to: 128), as: UTF8.self), crc32: contentCRC,
                                 coreId: String(decoding: Self.truncated(core, to: 64), as: UTF8.self),
                                 coreVersion: String(decoding: Self.truncated(coreVersion, to: 64), as: UTF8.self)),
            maxPlayers: 0, currentPlayers: 1, spectatorsAllowed: true, maxSpectators: 0,
            hasPassword: hasPassword, hasSpectatePassword: hasSpectatePassword,
            transport: .lan, hostEndpoint: "retroarch://\(address.host):\(port)", source: .retroarchLan,
            hostVersion: String(decoding: Self.truncated("RetroArch \(retroarchVersion)", to: 64), as: UTF8.self))
    }

    /// The advertisement discovery sends for one of its own LAN rooms, so RetroArch's LAN scan
    /// lists it. The port is the room's host endpoint's port (RetroArch takes the host address
    /// from the datagram's source).
    public static func advertising(_ room: Room, frontend: String, version: String) -> RetroArchAdvertisement {
        RetroArchAdvertisement(contentCRC: room.contentInfo.crc32, port: UInt32(endpointPort(room.hostEndpoint) ?? RetroArchLAN.port),
                               hasPassword: room.hasPassword, hasSpectatePassword: room.hasSpectatePassword,
                               nick: room.hostName.isEmpty ? room.roomName : room.hostName, frontend: frontend,
                               core: room.contentInfo.coreId, coreVersion: room.contentInfo.coreVersion,
                               retroarchVersion: version,
                               content: room.contentInfo.gameName.isEmpty ? "N/A" : room.contentInfo.gameName)
    }

    /// The port of `tcp://host:port`-like endpoints.
    static func endpointPort(_ endpoint: String) -> UInt16? {
        EndpointPorts.port(of: endpoint).flatMap { UInt16(exactly: $0) }
    }
}
