import NetplayWire

// What a LAN beacon may be believed about, the same for netplay-discovery and NetplayKit's room
// browser: anyone on the LAN can send one, so a room belongs to the address that sent it.
extension LanBeaconCodec {
    /// The room id of a beacon's room as heard from `source`: `lan:`, the sender's address and
    /// the beacon id (cut between characters to fit 64 bytes). The sender's address is part of
    /// it, so a stranger sending another host's beacon id names another room: it can neither
    /// take that host's room over nor hide it. Nor can a beacon's room stand for a lobby room.
    public static func roomId(beaconId: String, from source: UDPAddress) -> String {
        let prefix = "lan:\(source.host):"
        var id = Substring(beaconId)
        while prefix.utf8.count + id.utf8.count > 64 { id = id.dropLast() }
        return prefix + id
    }

    /// Why a beacon's claimed host endpoint cannot be believed, or nil when it names the
    /// datagram's source. A beacon from loopback comes from this machine, so it may name any of
    /// this machine's own addresses (`localAddresses`, asked only then): a host that sends its
    /// beacon to 127.0.0.1.
    public static func hostEndpointProblem(_ endpoint: String, from source: UDPAddress,
                                           localAddresses: () -> Set<UInt32>) -> String? {
        guard let host = UDPSocket.endpointHost(endpoint), let claimed = UDPAddress.parseIP(host) else {
            return "host endpoint '\(endpoint.prefix(80))' does not name an IPv4 address"
        }
        if claimed == source.ip { return nil }
        if source.isLoopback && (UDPAddress(ip: claimed, port: 0).isLoopback || localAddresses().contains(claimed)) { return nil }
        return "host endpoint '\(endpoint.prefix(80))' names another address than the sender \(source.host)"
    }
}
