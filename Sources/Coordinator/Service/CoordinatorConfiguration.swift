import NetplayAuth

/// What netplay-coordinator does beyond the common service options.
public struct CoordinatorConfiguration: Sendable {
    /// Session rules and limits.
    public var settings = CoordinatorSettings()
    /// Discovery's request endpoint (nil: rooms are not announced).
    public var discovery: String? = "tcp://127.0.0.1:7100"
    /// The cluster secret that signs tickets (nil: generated on first start and kept in the data
    /// directory as `cluster-secret`, for single-node development).
    public var keyRing: TicketKeyRing?
    /// TTL asked for announced rooms, milliseconds.
    public var roomTTLMs: UInt32 = 60_000
    /// How hard SQLite syncs.
    public var durability: SessionStore.Durability = .normal
    /// Database file name inside the data directory.
    public var databaseName = "coordinator.sqlite"

    /// The defaults.
    public init() {}
}
