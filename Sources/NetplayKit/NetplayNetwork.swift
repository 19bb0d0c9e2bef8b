/// Where a hosted room's peers meet.
public enum NetplayNetwork: String, Sendable, Hashable, CaseIterable {
    /// On the local network: this host runs the relay in-process and announces it by LAN beacon.
    case lan
    /// Over the internet, through a relay of the cluster (assigned by the coordinator).
    case relay
}
