import Foundation
import NetplayService
import ZeroMQ

/// A test's hold on a cluster's trust store: the operator key `make up` would give netplayctl,
/// and cluster-member keys the test mints to act as a service (or as a member gone rogue).
public struct TestKeys: Sendable {
    /// The store.
    public let store: TrustStore

    /// The store in `directory`.
    public init(directory: URL) { store = TrustStore(directory: directory) }

    /// The store of services whose data directories are `<dataRoot>/<instance>`.
    public init(dataRoot: String) { self.init(directory: URL(fileURLWithPath: dataRoot).appendingPathComponent("keys")) }

    /// The local operator's key pair (created in the store when missing).
    public func operatorKeys() throws -> CurveKeyPair {
        guard let keys = try store.localOperator(create: true) else { throw HarnessError("no operator key in \(store.directory.path)") }
        return keys
    }

    /// A fresh key pair published as cluster member `instance` of kind `kind` (no endpoints).
    public func memberKeys(kind: String, instance: String) throws -> CurveKeyPair {
        let keys = try CurveKeyPair.generate()
        try store.publish(TrustStore.Member(kind: kind, instance: instance, publicKey: keys.publicKey))
        return keys
    }

    /// The member named `instance`, once its service has published it (waits up to `seconds`).
    public func member(_ instance: String, within seconds: Double = 10) throws -> TrustStore.Member {
        try published(within: seconds, "\(instance) never published its key to \(store.directory.path)") {
            store.member(instance: instance)
        }
    }

    /// The member whose public (or control) endpoint is `endpoint`, once published.
    public func member(endpoint: String, within seconds: Double = 10) throws -> TrustStore.Member {
        try published(within: seconds, "no member at \(endpoint) in \(store.directory.path)") {
            store.member(endpoint: endpoint)
        }
    }

    /// What `lookup` finds once it has a control endpoint (waiting up to `seconds`; after that,
    /// what it found last); throws `failure` when it found nothing.
    private func published(within seconds: Double, _ failure: @autoclosure () -> String,
                           _ lookup: () -> TrustStore.Member?) throws -> TrustStore.Member {
        var found: TrustStore.Member?
        _ = eventually(within: seconds) {
            found = lookup()
            return found?.control != nil
        }
        guard let found else { throw HarnessError(failure()) }
        return found
    }

    /// A client to `member`'s control endpoint holding `keys`.
    public func client(to member: TrustStore.Member, as keys: CurveKeyPair, timeout: Double = 2) throws -> BlockingClient {
        guard let control = member.control else { throw HarnessError("\(member.instance) has no control endpoint") }
        return try BlockingClient(endpoint: control, timeout: timeout, serverKey: member.publicKey, keys: keys)
    }

    /// An operator's client to the service at public endpoint `endpoint` (its control endpoint).
    public func operatorClient(endpoint: String, timeout: Double = 2) throws -> BlockingClient {
        try client(to: try member(endpoint: endpoint), as: try operatorKeys(), timeout: timeout)
    }

    /// An operator's client to instance `instance`'s control endpoint.
    public func operatorClient(instance: String, timeout: Double = 2) throws -> BlockingClient {
        try client(to: try member(instance), as: try operatorKeys(), timeout: timeout)
    }

    /// A client to the service at public endpoint `endpoint` acting as cluster member
    /// `instance` of kind `kind` (a key minted and published for the test).
    public func clusterClient(as kind: String, instance: String, endpoint: String, timeout: Double = 2) throws -> BlockingClient {
        try client(to: try member(endpoint: endpoint), as: try memberKeys(kind: kind, instance: instance), timeout: timeout)
    }

    /// An operator's subscriber to the events of the service at `events` (its events endpoint),
    /// which admits trust-store keys only.
    public func operatorSubscriber(events: String, prefixes: [String]) throws -> EventSubscriber {
        let member = try member(endpoint: events)
        return try EventSubscriber(endpoint: events, prefixes: prefixes, serverKey: member.publicKey, keys: try operatorKeys())
    }

    /// A PUSH socket to telemetry's ingest `ingest` acting as cluster member `instance`, with
    /// telemetry's key from the store.
    public func telemetryPusher(to ingest: String, kind: String = "test", instance: String) throws -> Socket {
        let telemetry = store.members(kind: "telemetry")
        guard telemetry.count == 1 else { throw HarnessError("expected one telemetry in \(store.directory.path), found \(telemetry.count)") }
        let socket = try SocketDefaults.client(.push, curve: try memberKeys(kind: kind, instance: instance),
                                               serverKey: telemetry[0].publicKey)
        try socket.set(.linger(milliseconds: 1000))
        try socket.connect(ingest)
        return socket
    }
}
