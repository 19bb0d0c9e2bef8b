import NetplayService

/// Which session and participant each attached connection is. The table holds them strongly
/// (that keeps them alive while a connection maps to them) and keeps an unmanaged twin of
/// every entry, so the per-message lookup reads both references without retaining them. Both
/// maps change only together, through this type's methods. A class held in a `let`: the
/// per-message lookup then reads the table in place (a struct in the core's `var` was copied for
/// each lookup, retaining and releasing both dictionaries' storage every message).
final class PeerRoutes {
    /// One connection's session and participant.
    typealias Entry = (session: RelaySession, participant: RelayPeer)
    /// The same, without ownership (valid while the entry is in the table).
    typealias Route = (session: Unmanaged<RelaySession>, participant: Unmanaged<RelayPeer>)

    // Reactor thread only; no access overlaps another.
    @exclusivity(unchecked) private var owned: [PeerAddress: Entry] = [:]
    @exclusivity(unchecked) private var routes: [PeerAddress: Route] = [:]

    /// Connections mapped.
    var count: Int { owned.count }

    /// The entry of `peer`, retained (for everything but the per-message path).
    subscript(peer: PeerAddress) -> Entry? { owned[peer] }

    /// The entry of `peer` without retains; the references stay valid until the entry is
    /// removed, which the caller must not do while it uses them.
    @inline(__always)
    func route(_ peer: PeerAddress) -> Route? { routes[peer] }

    func set(_ peer: PeerAddress, session: RelaySession, participant: RelayPeer) {
        owned[peer] = (session, participant)
        routes[peer] = (Unmanaged.passUnretained(session), Unmanaged.passUnretained(participant))
    }

    func remove(_ peer: PeerAddress) {
        owned.removeValue(forKey: peer)
        routes.removeValue(forKey: peer)
    }

    /// Clears every route of `participant` (its primary and additional paths) and its paths.
    func forget(_ participant: RelayPeer) {
        if let address = participant.address { remove(address) }
        dropExtraPaths(of: participant)
    }

    /// Ends every additional path of `participant` (routes and list); the primary stays.
    func dropExtraPaths(of participant: RelayPeer) {
        guard participant.hasExtraPaths else { return }
        for path in participant.extraPaths { remove(path) }
        participant.extraPaths.removeAll()
    }

    /// Ends one additional path of `participant` (it detached).
    func dropPath(_ peer: PeerAddress, of participant: RelayPeer) {
        remove(peer)
        participant.extraPaths.removeAll { $0 == peer }
    }

    func removeAll() {
        owned.removeAll()
        routes.removeAll()
    }

    /// Drops entries of connections that are no longer one of their participant's paths (it
    /// moved to another connection, went silent, or dropped its additional paths).
    func pruneStale() {
        owned = owned.filter { $0.value.participant.isPath($0.key) }
        routes = routes.filter { owned[$0.key] != nil }
    }
}
