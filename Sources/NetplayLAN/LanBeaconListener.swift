import Foundation
import NetplayWire

/// The hearing side of our LAN beacon for a room browser (NetplayKit's `NetplayLobby.lanRooms`):
/// listens on the beacon port for a while and keeps the newest beacon of each host. The port is
/// bound shared, so several browsers on one machine (and netplay-discovery) can listen at once.
/// netplay-discovery hears beacons on its own reactor instead and decodes them with the same
/// ``LanBeaconCodec``.
public enum LanBeaconListener {
    /// Listens on `port` for `milliseconds` and returns the newest beacon of each host that sent
    /// one with a room, leaving out hosts whose newest beacon said goodbye. A beacon older than
    /// one already heard from its host (lower sequence) is ignored.
    /// The most hosts one listen keeps (discovery keeps at most 256 LAN rooms in all).
    public static let maxHosts = 256

    public static func listen(port: UInt16 = LanBeaconCodec.defaultPort, milliseconds: Int) throws(UDPError) -> [LanBeacon] {
        let socket = try UDPSocket(port: port, shared: true)
        var newest: [String: LanBeacon] = [:]
        let deadline = ContinuousClock.now + .milliseconds(milliseconds)
        while ContinuousClock.now < deadline {
            let left = deadline - ContinuousClock.now
            let waitMs = Int32(max(1, left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000))
            guard socket.waitReadable(milliseconds: waitMs) else { continue }
            // Drained until the deadline at most (a flood must not keep the browser listening),
            // and hosts kept up to `maxHosts` (a flood of made-up hosts must not grow it).
            while ContinuousClock.now < deadline, let (datagram, _) = socket.receive() {
                guard let beacon = LanBeaconCodec.decode(datagram), beacon.room != nil else { continue }
                if let known = newest[beacon.beaconId] {
                    if known.sequence > beacon.sequence { continue }
                } else if newest.count >= maxHosts {
                    continue
                }
                newest[beacon.beaconId] = beacon
            }
        }
        return newest.values.filter { !$0.goodbye }
    }
}
