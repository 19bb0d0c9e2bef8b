import Dispatch
import NetplayService
import Synchronization

/// The connections a ``NetplayLobby`` keeps open to the cluster's services (not LAN hosts) between
/// its calls, so the TCP, ZMTP and CurveZMQ handshakes are paid once for a run of requests rather
/// than on every one: on a 100 ms path that loses packets, a handshake alone can take a whole
/// timeout.
///
/// A call takes an idle connection to its endpoint (or opens one), uses it on its own thread and
/// gives it back when a reply came, an Error reply included. A connection that timed out or
/// failed is closed instead, so a request still queued on it never reaches the service later.
/// Every copy of a lobby shares one `LobbyConnections`; calls from several threads at once each
/// get a connection of their own.
///
/// A connection given back is closed once it has sat unused for the lobby's
/// ``NetplayLobby/idleConnectionSeconds``: an open connection PINGs its service every 2 s and
/// holds a socket there, and a frontend may sit in its menus for hours (one of thousands at a
/// service). Connections to an endpoint or key the lobby no longer uses go the same way.
final class LobbyConnections: Sendable {
    /// Idle connections kept per endpoint and key; more are closed when given back.
    static let idleLimit = 4
    /// An idle time this long or longer is no limit: the connection is kept for the lobby's life
    /// (a year, in seconds).
    static let longestIdle: Double = 365 * 86_400

    private struct Route: Hashable {
        let endpoint: String
        let serverKey: [UInt8]?
    }

    /// A connection between two uses, and when it is to be closed unused. Nobody owns it while it
    /// sits in the pool; the lock hands it from one thread to the next, and a ZeroMQ socket may
    /// change threads behind the full memory barrier a lock is.
    private struct Idle: @unchecked Sendable {
        let client: BlockingClient
        let closesAt: ContinuousClock.Instant
    }

    private struct Pool {
        var idle: [Route: [Idle]] = [:]
        /// When the pending sweep runs, if one is pending.
        var sweepAt: ContinuousClock.Instant?
    }

    private let pool = Mutex(Pool())

    /// An idle connection to `endpoint` (encrypted to `serverKey`), or a new one; its timeout is
    /// set to `timeout`.
    func take(_ endpoint: String, serverKey: [UInt8]?, timeout: Double) throws -> BlockingClient {
        let route = Route(endpoint: endpoint, serverKey: serverKey)
        let now = ContinuousClock.now
        // One whose time is up and whose sweep is late (a machine waking from sleep) is not used.
        let (fresh, stale) = pool.withLock { pool -> (Idle?, [Idle]) in
            var stale: [Idle] = []
            while let last = pool.idle[route]?.popLast() {
                guard last.closesAt <= now else { return (last, stale) }
                stale.append(last)
            }
            return (nil, stale)
        }
        for connection in stale { connection.client.close() }
        let client = try fresh?.client ?? BlockingClient(endpoint: endpoint, timeout: timeout, serverKey: serverKey)
        client.timeout = timeout
        return client
    }

    /// Gives back a connection that got its reply, for the next call to the same place within
    /// `idleSeconds` (at most ``longestIdle``; not a number: 0); after that it is closed.
    /// Infinity (or anything longer) keeps it for the lobby's life.
    func giveBack(_ client: BlockingClient, serverKey: [UInt8]?, idleSeconds: Double) {
        let route = Route(endpoint: client.endpoint, serverKey: serverKey)
        let seconds = idleSeconds.isNaN ? 0 : min(max(idleSeconds, 0), Self.longestIdle)
        let kept = Idle(client: client, closesAt: .now + .milliseconds(Int((seconds * 1000).rounded())))
        let sweep = pool.withLock { pool -> ContinuousClock.Instant? in
            guard pool.idle[route, default: []].count < Self.idleLimit else { return nil }
            pool.idle[route, default: []].append(kept)
            // A connection kept for the lobby's life needs no sweep; an earlier one pending will do.
            guard seconds < Self.longestIdle, pool.sweepAt.map({ kept.closesAt < $0 }) ?? true else { return nil }
            pool.sweepAt = kept.closesAt
            return kept.closesAt
        }
        if let sweep { scheduleSweep(at: sweep) }
    }

    /// Closes the idle connections whose time is up at `at`, then waits for the next one's.
    private func scheduleSweep(at instant: ContinuousClock.Instant) {
        let delay = ContinuousClock.now.duration(to: instant)
        let nanoseconds = max(0, delay.components.seconds * 1_000_000_000 + delay.components.attoseconds / 1_000_000_000)
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + .nanoseconds(Int(nanoseconds))) { [weak self] in
            self?.sweep(scheduledFor: instant)
        }
    }

    private func sweep(scheduledFor instant: ContinuousClock.Instant) {
        let now = ContinuousClock.now
        let (expired, next) = pool.withLock { pool -> ([Idle], ContinuousClock.Instant?) in
            // A sweep made stale by an earlier one scheduled later leaves the work to that one.
            guard pool.sweepAt == instant else { return ([], nil) }
            var expired: [Idle] = []
            for (route, var connections) in pool.idle {
                let firstKept = connections.partition { $0.closesAt > now }
                expired += connections[..<firstKept]
                pool.idle[route] = firstKept == connections.endIndex ? nil : Array(connections[firstKept...])
            }
            pool.sweepAt = pool.idle.values.joined().map(\.closesAt).min()
            return (expired, pool.sweepAt)
        }
        for connection in expired { connection.client.close() }
        if let next { scheduleSweep(at: next) }
    }

    /// How many idle connections the pool holds (tests).
    var idleCount: Int {
        pool.withLock { $0.idle.values.reduce(0) { $0 + $1.count } }
    }
}
