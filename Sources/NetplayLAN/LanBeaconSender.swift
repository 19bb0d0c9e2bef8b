import NetplayWire

/// The sending side of our LAN beacon, for a host that runs its relay in-process (NetplayKit):
/// it numbers beacons, encodes them and sends each to every target (normally the broadcast
/// addresses of the host's interfaces, port 7102). The host calls ``send(goodbye:)`` on its own
/// timer every ``intervalMs``; the last beacon, with `goodbye`, removes the room at once.
public final class LanBeaconSender {
    /// The random id of this host process.
    public let beaconId: String
    /// The room advertised (update it when occupancy changes).
    public var room: Room
    /// The interval the host promises between beacons.
    public let intervalMs: UInt32
    /// Where beacons go.
    public let targets: [UDPAddress]
    private let socket: UDPSocket
    private var sequence: UInt64 = 0

    /// Opens a broadcast-capable socket on an ephemeral port. With no `targets`, beacons go to the
    /// broadcast address of every up IPv4 interface, port 7102.
    public init(room: Room, intervalMs: UInt32 = 1_000, targets: [UDPAddress]? = nil,
                beaconId: String = LanBeaconSender.randomId()) throws(UDPError) {
        self.beaconId = beaconId
        self.room = room
        self.intervalMs = intervalMs
        self.targets = targets ?? UDPSocket.interfaceBroadcastAddresses(port: LanBeaconCodec.defaultPort)
        socket = try UDPSocket(port: 0, broadcast: true)
    }

    /// The next beacon (numbered).
    public func nextBeacon(goodbye: Bool = false) -> LanBeacon {
        sequence += 1
        return LanBeacon(protocolVersion: LanBeaconCodec.protocolVersion, beaconId: beaconId, sequence: sequence,
                         intervalMs: intervalMs, room: room, goodbye: goodbye)
    }

    /// Sends one beacon to every target; returns how many sends the kernel accepted.
    @discardableResult
    public func send(goodbye: Bool = false) throws(WireError) -> Int {
        let datagram = try LanBeaconCodec.encode(nextBeacon(goodbye: goodbye))
        return targets.reduce(0) { $0 + (socket.send(datagram, to: $1) ? 1 : 0) }
    }

    /// A random 16-hex-digit id.
    public static func randomId() -> String {
        Hex.encode((0..<8).map { _ in UInt8.random(in: 0...255) })
    }
}
