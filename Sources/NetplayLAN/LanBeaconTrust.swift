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

    /// Why a beacon's claimed host endpoint cannot be believed, or nil when it is
    /// `tcp://A.B.C.D:PORT` naming the datagram's source (a dotted quad in its one plain form,
    /// a port from 1 to 65535, nothing after it). A beacon from loopback comes from this machine,
    /// so it may name any of this machine's own addresses (`localAddresses`, asked only then): a
    /// host that sends its beacon to 127.0.0.1.
    public static func hostEndpointProblem(_ endpoint: String, from source: UDPAddress,
                                           localAddresses: () -> Set<UInt32>) -> String? {
        let shown = endpoint.prefix(80)
        // The colon is looked for after the scheme: the scheme's own one ("tcp://x") made the
        // host a range running backwards, a trap that one datagram from anyone on the LAN set off.
        guard endpoint.hasPrefix("tcp://"), case let address = endpoint.dropFirst(6), let colon = address.lastIndex(of: ":") else {
            return "host endpoint '\(shown)' is not tcp://A.B.C.D:PORT"
        }
        let host = address[..<colon]
        let port = address[address.index(after: colon)...]
        // One plain form: libzmq resolves through getaddrinfo, which reads "012" as octal 10,
        // so a zero-padded octet names another address than the one compared here.
        guard host.split(separator: ".").allSatisfy({ $0 == "0" || $0.first != "0" }),
              let claimed = UDPAddress.parseIP(String(host)) else {
            return "host endpoint '\(shown)' does not name an IPv4 address"
        }
        guard !port.isEmpty, port.count <= 5, UDPAddress.isDecimal(port), let number = Int(port), (1...65535).contains(number) else {
            return "host endpoint '\(shown)' has no port from 1 to 65535"
        }
        if claimed == source.ip { return nil }
        if source.isLoopback && (UDPAddress(ip: claimed, port: 0).isLoopback || localAddresses().contains(claimed)) { return nil }
        return "host endpoint '\(shown)' names another address than the sender \(source.host)"
    }

    /// What of a beacon's room may be believed: what a LAN host says of itself (names, content,
    /// counts, flags, its endpoint and session id); never a relay endpoint, a RetroArch join
    /// line, a region, slots, a source or times, which only discovery's own sources fill (a
    /// stranger's `retroarch_join` was shown by netplayctl as a command to paste). The room id is
    /// the caller's (``roomId(beaconId:from:)``).
    public static func believable(_ room: Room) -> Room {
        Room(sessionId: room.sessionId, hostName: room.hostName, roomName: room.roomName, content: room.content,
             maxPlayers: room.maxPlayers, currentPlayers: room.currentPlayers, spectatorsAllowed: room.spectatorsAllowed,
             maxSpectators: room.maxSpectators, currentSpectators: room.currentSpectators, hasPassword: room.hasPassword,
             hasSpectatePassword: room.hasSpectatePassword, inProgress: room.inProgress, frameDelay: room.frameDelay,
             transport: .lan, hostEndpoint: room.hostEndpoint, source: .lanBeacon, hostVersion: room.hostVersion)
    }
}
