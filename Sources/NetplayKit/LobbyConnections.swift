import NetplayService
import Synchronization

/// The connections a ``NetplayLobby`` keeps open to the cluster's services (not LAN hosts) for
/// its life, so the TCP, ZMTP and CurveZMQ handshakes are paid once rather than on every
/// request: on a 100 ms path that loses packets, a handshake alone can take a whole timeout.
///
/// A call takes an idle connection to its endpoint (or opens one), uses it on its own thread and
/// gives it back when a reply came, an Error reply included. A connection that timed out or
/// failed is closed instead, so a request still queued on it never reaches the service later.
/// Every copy of a lobby shares one `LobbyConnections`; calls from several threads at once each
/// get a connection of their own.
final class LobbyConnections: Sendable {
    /// Idle connections kept per endpoint and key; more are closed when given back.
    static let idleLimit = 4

    private struct Route: Hashable {
        let endpoint: String
        let serverKey: [UInt8]?
    }

    /// A connection between two uses. Nobody owns it while it sits in the pool; the lock hands it
    /// from one thread to the next, and a ZeroMQ socket may change threads behind the full memory
    /// barrier a lock is.
    private struct Idle: @unchecked Sendable {
        let client: BlockingClient
    }

    private let idle = Mutex<[Route: [Idle]]>([:])

    /// An idle connection to `endpoint` (encrypted to `serverKey`), or a new one; its timeout is
    /// set to `timeout`.
    func take(_ endpoint: String, serverKey: [UInt8]?, timeout: Double) throws -> BlockingClient {
        let route = Route(endpoint: endpoint, serverKey: serverKey)
        let client = try idle.withLock { $0[route]?.popLast() }?.client
            ?? BlockingClient(endpoint: endpoint, timeout: timeout, serverKey: serverKey)
        client.timeout = timeout
        return client
    }

    /// Gives back a connection that got its reply, for the next call to the same place.
    func giveBack(_ client: BlockingClient, serverKey: [UInt8]?) {
        let route = Route(endpoint: client.endpoint, serverKey: serverKey)
        let kept = Idle(client: client)
        idle.withLock { pool in
            if pool[route, default: []].count < Self.idleLimit { pool[route, default: []].append(kept) }
        }
    }

    /// How many idle connections the pool holds (tests).
    var idleCount: Int {
        idle.withLock { $0.values.reduce(0) { $0 + $1.count } }
    }
}
