import NetplayLAN

/// What netplay-discovery does beyond the common service options: registry limits, rate limits,
/// the watch heartbeat, and the two LAN protocols.
public struct DiscoveryConfiguration: Sendable {
    /// Registry limits (TTLs, capacity).
    public var limits = RoomRegistryLimits()
    /// Announce, refresh and withdraw requests per second per announcer (0 = unlimited). A
    /// coordinator refreshes each of its rooms every third of the TTL, so this must exceed
    /// rooms / (TTL / 3): 2,000/s carries 40,000 rooms at the default 60 s TTL.
    public var announceRatePerSecond: Double = 2_000
    /// Burst of such requests per announcer.
    public var announceBurst: Double = 4_000
    /// Public reads (list, watch, get) per second per source address, in tokens: a get costs
    /// one, a page one per 100 rooms asked (0 = unlimited). Building a page of 500 rooms costs
    /// the reactor milliseconds, and a stranger pipelining thousands held everyone else up.
    public var readRatePerSecond: Double = 50
    /// Burst of such tokens per source address.
    public var readBurst: Double = 150
    /// Seconds between `rooms.sync` events (0 = none).
    public var syncIntervalSeconds: Double = 1
    /// Seconds between expiry sweeps (the precision of TTLs).
    public var sweepIntervalSeconds: Double = 0.1

    /// Address the LAN beacon listener binds.
    public var beaconBind = "0.0.0.0"
    /// UDP port of the LAN beacon listener (nil = disabled).
    public var beaconPort: UInt16? = LanBeaconCodec.defaultPort
    /// Address the RetroArch responder binds.
    public var retroArchBind = "0.0.0.0"
    /// UDP port of the RetroArch RANQ responder (nil = disabled).
    public var retroArchPort: UInt16? = RetroArchLAN.port
    /// Seconds between RANQ scans for RetroArch hosts (0 = no scanning).
    public var retroArchScanIntervalSeconds: Double = 0
    /// Where scans go (nil = the broadcast address of every up interface, port 55435).
    public var retroArchScanTargets: [UDPAddress]?
    /// Answer RANQ queries from loopback as well as from private ranges (RetroArch itself answers
    /// private ranges only; loopback is the same machine, so it is safe and lets tools test).
    public var answerLoopbackQueries = true
    /// LAN datagrams (beacons, queries) accepted per second per sender address.
    public var lanRatePerSecond: Double = 50
    /// Their burst.
    public var lanBurst: Double = 100

    /// The defaults.
    public init() {}
}
