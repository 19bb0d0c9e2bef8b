import Synchronization

/// Port offsets that make the design's whole endpoint table free, so a cluster on shifted ports
/// (NETPLAY_PORT_OFFSET: a test's, a benchmark's) never meets a developer's `make up` or another
/// test's cluster.
public enum ClusterPorts {
    /// Design ports (TCP) a cluster binds, with room for three sync replicas.
    public static let designPorts = [7000, 7005, 7100, 7101, 7105, 7200, 7201, 7205, 7300, 7301, 7305, 7310, 7311, 7315,
                                     7320, 7321, 7325, 7400, 7401, 7402, 7405, 9400, 7306, 7316, 7326]

    /// The LAN beacon's UDP port (NetplayLAN's `LanBeaconCodec.defaultPort`, held equal by
    /// discovery's tests), bound on every address.
    public static let beaconPort = 7102

    /// An offset that makes every design port free (TCP) and the beacon's UDP port free, and
    /// whose ports no offset handed out in this process (and not released) uses: offsets 200
    /// apart share ports, and a port free only because its service is down for a moment (a test
    /// kills it to watch the restart) would otherwise go to a second cluster, and the first
    /// one's service could never bind it again. Give it back with ``release(_:)``.
    public static func freeOffset() -> Int {
        for attempt in 0..<400 {
            let offset = Int.random(in: 100...230) * 100  // ports stay below the ephemeral range (32768+)
            let ports = self.ports(of: offset)
            // Checked and claimed under one lock, so two clusters set up at once cannot both
            // take it; after 200 tries, any offset free right now (more clusters than fit apart).
            let taken = claims.withLock { claimed -> Bool in
                guard attempt >= 200 || claimed.allSatisfy({ self.ports(of: $0).isDisjoint(with: ports) }),
                      designPorts.allSatisfy({ FreePort.isFree($0 + offset) }),
                      FreePort.isFree(beaconPort + offset, on: "0.0.0.0", udp: true) else { return false }
                claimed.append(offset)
                return true
            }
            if taken { return offset }
        }
        return 30000
    }

    /// Gives back an offset from ``freeOffset()`` (once for each time it was handed out): its
    /// cluster is stopped.
    public static func release(_ offset: Int) {
        claims.withLock { claimed in
            if let index = claimed.firstIndex(of: offset) { claimed.remove(at: index) }
        }
    }

    /// The ports a cluster at `offset` binds.
    public static func ports(of offset: Int) -> Set<Int> {
        Set(designPorts.map { $0 + offset } + [beaconPort + offset])
    }

    /// Offsets handed out and not released (one entry each time).
    private static let claims = Mutex<[Int]>([])
}
