import Foundation
import NetplayService

// RelayCore: what `netplayctl introspect` shows of the relay.
extension RelayCore {
    /// The relay's state for `netplayctl introspect`.
    public func introspect() -> JSONValue {
        var list: [JSONValue] = []
        for id in sessions.keys.sorted().prefix(200) {
            let session = sessions[id]!
            list.append([
                "session_id": .string(id),
                "running": .bool(session.running),
                "recovering": .bool(session.recovering),
                "rebuilt_from_replay_to": session.rebuiltFromReplayTo.map { .number($0) } ?? .null,
                "confirmed_frames": .number(session.timeline.confirmed),
                "players": .array(session.players.map { player in
                    guard let player else { return .null }
                    return ["participant_id": .string(player.participantId), "slot": .number(player.slot),
                            "connected": .bool(player.isConnected), "stored_frames": .number(session.timeline.stored(player.slot - 1)),
                            "substituting": .bool(session.substituting[player.slot - 1]),
                            "substituted_frames": .number(session.substitutedFrames[player.slot - 1]),
                            "resends": .number(player.resends), "rtt_ms": .number(player.rttMs),
                            "paths": .number(player.pathCount),
                            "resumed_claim": player.resumedHistoryFrom != nil ? .number(player.resumedHolding) : .null,
                            "resumed_proven": player.resumedHistoryFrom != nil ? .number(player.resumedProven) : .null,
                            "reported_ping_ms": .number(player.stats.pingMs), "host": .bool(player.isHost),
                            "client": .string(player.clientVersion),
                            "ack_delay_ms": .number(Int(player.ackDelayMs.rounded()))]
                }),
                "spectators": .number(session.spectators.count),
                "desyncs": .number(session.desyncs),
                "resyncs": .number(session.resyncs),
                "replay": session.replay.map { .string($0.url.path) } ?? .null,
                "transfer": session.transfer.map { transfer in
                    ["id": .number(Int(transfer.id)), "reason": .string(transfer.reason.protoName),
                     "reference": .string(transfer.reference.participantId),
                     "state_bytes": .number(Int(transfer.totalSize)), "received_bytes": .number(Int(transfer.nextOffset)),
                     "targets": .array(transfer.deliveries.map { delivery in
                         ["participant_id": .string(delivery.peer.participantId), "paced": .bool(delivery.paced),
                          "sent_bytes": .number(Int(delivery.sentBytes)),
                          "acknowledged_bytes": .number(Int(delivery.acknowledgedBytes)),
                          "finished": .bool(delivery.finished)]
                     })] as JSONValue
                } ?? .null,
            ])
        }
        return ["relay_id": .string(configuration.relayId), "sessions": .array(list), "peers": .number(peers.count),
                "revoked_participants": .number(revocations.count),
                "revocations_problem": revocationsProblem.map { .string($0) } ?? .null,
                "transfer_bytes_held": .number(transferBudget.held), "transfer_bytes_capacity": .number(transferBudget.capacity)]
    }
}
