import NetplayWire

/// Our own LAN beacon: one UDP datagram holding one `Envelope` with a `LanBeacon` body (at most
/// 1200 bytes), sent by a LAN host every `interval_ms` (default 1 s) to the beacon port (default
/// 7102) of its network's broadcast address. Listeners keep the room for three intervals.
///
/// The one definition of the beacon's port, size limit and version: NetplayKit's LAN hosts send
/// with it (``LanBeaconSender``), its browsers and netplay-discovery hear with it
/// (``LanBeaconListener``, ``decode(_:)``).
public enum LanBeaconCodec {
    /// The default beacon port.
    public static let defaultPort: UInt16 = 7102
    /// The largest datagram a beacon may be.
    public static let maxDatagram = 1200
    /// Beacon protocol version.
    public static let protocolVersion: UInt32 = 1

    /// The datagram for `beacon`; throws when the room does not validate or the datagram would
    /// exceed ``maxDatagram``.
    public static func encode(_ beacon: LanBeacon) throws(WireError) -> [UInt8] {
        let bytes = try Envelope(body: .lanBeacon(beacon)).encoded()
        guard bytes.count <= maxDatagram else { throw .oversized(size: bytes.count, limit: maxDatagram) }
        return bytes
    }

    /// The beacon in `datagram`, or nil when it is not a valid beacon datagram.
    public static func decode(_ datagram: [UInt8]) -> LanBeacon? {
        guard datagram.count <= maxDatagram,
              let envelope = try? Envelope(decoding: datagram),
              case .lanBeacon(let beacon) = envelope.body else { return nil }
        return beacon
    }

    /// How long a listener keeps a beacon's room: three intervals, at least 1.5 s.
    public static func ttlMs(intervalMs: UInt32) -> UInt32 {
        max(1_500, min(60_000, (intervalMs == 0 ? 1_000 : intervalMs) * 3))
    }
}
