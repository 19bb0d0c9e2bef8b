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

    /// An offset that makes every design port free (TCP) and the beacon's UDP port free.
    public static func freeOffset() -> Int {
        for _ in 0..<200 {
            let offset = Int.random(in: 100...230) * 100  // ports stay below the ephemeral range (32768+)
            if designPorts.allSatisfy({ FreePort.isFree($0 + offset) })
                && FreePort.isFree(beaconPort + offset, on: "0.0.0.0", udp: true) {
                return offset
            }
        }
        return 30000
    }
}
