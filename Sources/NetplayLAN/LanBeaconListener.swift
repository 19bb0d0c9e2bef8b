import Foundation
import NetplayWire

/// The hearing side of our LAN beacon for a room browser (NetplayKit's `NetplayLobby.lanRooms`):
/// listens on the beacon port for a while and keeps the newest beacon of each host. The port is
/// bound shared, so several browsers on one machine (and netplay-discovery) can listen at once.
/// netplay-discovery hears beacons on its own reactor instead and decodes them with the same
/// ``LanBeaconCodec``.
public enum LanBeaconListener {
    /// The most hosts one listen keeps (discovery keeps at most 256 LAN rooms in all).
    public static let maxHosts = 256
    /// The most rooms one sender's address gets in one listen: a flood of made-up beacons from
    /// one machine cannot take every place.
    public static let maxPerSource = 8

    /// Listens on `port` for `milliseconds` and returns the newest beacon of each host that sent
    /// one with a room, leaving out hosts whose newest beacon said goodbye. A beacon older than
    /// one already heard from its host (lower sequence) is ignored.
    ///
    /// Anyone on the LAN can send a beacon, so a room belongs to the address that sent it, as in
    /// netplay-discovery: its host endpoint must name that address (else the beacon is
    /// ignored), its room id becomes ``LanBeaconCodec/roomId(beaconId:from:)`` and its transport
    /// LAN. A stranger repeating another host's beacon id (a goodbye, another endpoint) names a
    /// room of its own, and no beacon's room can stand in for a lobby room of the same id.
    public static func listen(port: UInt16 = LanBeaconCodec.defaultPort, milliseconds: Int) throws(UDPError) -> [LanBeacon] {
        let socket = try UDPSocket(port: port, shared: true)
        var newest: [String: LanBeacon] = [:]
        var perSource: [UInt32: Int] = [:]
        var localAddresses: Set<UInt32>?
        let deadline = ContinuousClock.now + .milliseconds(milliseconds)
        while ContinuousClock.now < deadline {
            let left = deadline - ContinuousClock.now
            let waitMs = Int32(max(1, left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000))
            guard socket.waitReadable(milliseconds: waitMs) else { continue }
            // Drained until the deadline at most (a flood must not keep the browser listening),
            // and hosts kept up to the caps (a flood of made-up hosts must not grow it).
            while ContinuousClock.now < deadline, let (datagram, from) = socket.receive() {
                guard var beacon = LanBeaconCodec.decode(datagram), let heard = beacon.room else { continue }
                var room = LanBeaconCodec.believable(heard)
                guard LanBeaconCodec.hostEndpointProblem(room.hostEndpoint, from: from, localAddresses: {
                    if localAddresses == nil { localAddresses = UDPSocket.interfaceAddresses() }
                    return localAddresses ?? []
                }) == nil else { continue }
                let key = LanBeaconCodec.roomId(beaconId: beacon.beaconId, from: from)
                if let known = newest[key] {
                    if known.sequence > beacon.sequence { continue }
                } else {
                    guard newest.count < maxHosts, perSource[from.ip, default: 0] < maxPerSource else { continue }
                    perSource[from.ip, default: 0] += 1
                }
                room.roomId = key
                room.transport = .lan
                beacon.room = room
                newest[key] = beacon
            }
        }
        return newest.values.filter { !$0.goodbye }
    }
}
