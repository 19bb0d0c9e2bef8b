import Foundation

/// RetroArch's relay ("MITM tunnel") protocol, as RetroArch 1.14 speaks it: every message on the
/// control connection is a 4-byte ASCII magic (big-endian) followed by a 12-byte id; RATA replies
/// also carry a 16-byte IPv6 address. See docs/retroarch.md.
public enum TunnelWire {
    /// "RATS": a host asks for a session (id all zero) and the relay answers with its id; a client
    /// names the session it joins.
    public static let session: UInt32 = 0x5241_5453
    /// "RATL": the relay tells the host a client waits on a link; the host's new connection
    /// claims that link.
    public static let link: UInt32 = 0x5241_544C
    /// "RATA": the host asks for a linked client's address; the relay answers with it.
    public static let address: UInt32 = 0x5241_5441
    /// "RATP": the relay's ping on the control connection, 4 bytes alone; the host echoes them.
    public static let ping: UInt32 = 0x5241_5450
    /// "RANP": the start of a RetroArch netplay connection header (a client that did not come
    /// through the tunnel protocol).
    public static let netplayHeader: UInt32 = 0x5241_4E50
    /// The ping as sent.
    public static let pingMessage: [UInt8] = [0x52, 0x41, 0x54, 0x50]
    /// A 24-byte netplay header with protocol 0: a RetroArch client reads it as "the server is
    /// out of date" (what the official tunnel server answers a plain client).
    public static let outdatedHeader: [UInt8] = [0x52, 0x41, 0x4E, 0x50] + [UInt8](repeating: 0, count: 20)
    /// Magic plus id: the size of every prefix and control message but a RATA reply.
    public static let idMessageSize = 16
    /// A RATA reply: magic, link id, IPv6 address.
    public static let addressReplySize = 32

    /// The magic at the start of `bytes` (which holds at least four).
    public static func magic(_ bytes: some Collection<UInt8>) -> UInt32 {
        bytes.prefix(4).reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// `magic` followed by `id`.
    public static func message(_ magic: UInt32, _ id: TunnelID) -> [UInt8] {
        [UInt8(magic >> 24), UInt8(magic >> 16 & 0xFF), UInt8(magic >> 8 & 0xFF), UInt8(magic & 0xFF)] + id.bytes
    }

    /// A RATA reply for `link`: the client's address as 16 IPv6 bytes (IPv4 as `::ffff:a.b.c.d`).
    public static func addressReply(_ link: TunnelID, address: [UInt8]) -> [UInt8] {
        message(Self.address, link) + ipv6Bytes(address)
    }

    /// The 16-byte IPv6 form of a 4- or 16-byte address (anything else: `::`).
    public static func ipv6Bytes(_ address: [UInt8]) -> [UInt8] {
        switch address.count {
        case 16: return address
        case 4: return [UInt8](repeating: 0, count: 10) + [0xFF, 0xFF] + address
        default: return [UInt8](repeating: 0, count: 16)
        }
    }
}

/// A 12-byte tunnel id (a session's or a link's). The all-zero id means "none" (a host asking for
/// a new session sends it).
public struct TunnelID: Hashable, Sendable, CustomStringConvertible {
    /// The twelve bytes.
    public let bytes: [UInt8]

    /// The id made of `bytes`, which must be 12 bytes long.
    public init?(_ bytes: some Collection<UInt8>) {
        guard bytes.count == 12 else { return nil }
        self.bytes = Array(bytes)
    }

    /// A random id, never all zero.
    public static func random<G: RandomNumberGenerator>(using generator: inout G) -> TunnelID {
        while true {
            let bytes = (0..<12).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if bytes.contains(where: { $0 != 0 }) { return TunnelID(bytes)! }
        }
    }

    /// The all-zero id.
    public static let zero = TunnelID([UInt8](repeating: 0, count: 12))!

    /// True for the all-zero id.
    public var isZero: Bool { !bytes.contains { $0 != 0 } }

    /// The id as RetroArch shows and parses it: standard base64 (16 characters).
    public var base64: String { Data(bytes).base64EncodedString() }

    /// The id written as `base64`, or nil when it does not decode to 12 bytes.
    public init?(base64 text: String) {
        guard let data = Data(base64Encoded: text), let id = TunnelID(data) else { return nil }
        self = id
    }

    public var description: String { base64 }
}
