import NetplayService
import NetplayWire

/// Sends best-effort notices to relays (detach a kicked participant, close an ended session)
/// over one DEALER per relay endpoint. Relays also learn closures from their refresh replies,
/// so a lost notice only delays them.
final class RelayNotifier {
    private var clients: [String: ServiceClient] = [:]

    /// Sends `notice` to the relay `relayId` (the instance its key proved at registration) on
    /// its control endpoint.
    func send(_ notice: RelayNotice, relayId: String?, runtime: ServiceRuntime) {
        let client: ServiceClient
        if let existing = clients[notice.endpoint] {
            client = existing
        } else {
            guard let relayId, let member = runtime.trust?.member(instance: relayId),
                  let made = try? runtime.controlClient(to: member) else {
                runtime.logger.warning("relay notice not sent: the relay's key is not in the trust store",
                                       metadata: ["relay": "\(relayId ?? notice.endpoint)"])
                return
            }
            clients[notice.endpoint] = made
            client = made
        }
        client.request(notice.body, timeout: 2) { result in
            if case .failure(let error) = result {
                runtime.logger.debug("relay notice not delivered", metadata: ["relay": "\(notice.endpoint)", "error": "\(error)"])
            }
        }
    }

    /// Closes clients to endpoints no longer in `live`.
    func prune(keeping live: Set<String>) {
        for (endpoint, client) in clients where !live.contains(endpoint) {
            client.close()
            clients[endpoint] = nil
        }
    }
}
