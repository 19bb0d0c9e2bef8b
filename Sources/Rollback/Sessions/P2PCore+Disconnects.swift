import Foundation

// P2PCore: disconnect agreement and state transfers.
extension P2PCore {
    // MARK: - Disconnects

    /// Disconnects an endpoint now (kick, or the caller's own transport noticed it left).
    mutating func disconnect(peer: PeerID) {
        guard let index = endpointIndex(peer) else { return }
        disconnectEndpoint(index)
        updateConfirmation()
    }

    mutating func disconnectEndpoint(_ index: Int) {
        guard endpoints[index].isAlive else { return }
        endpoints[index].phase = .disconnected
        events.append(.peerDisconnected(peer: endpoints[index].id))
        switch endpoints[index].kind {
        case .peer:
            if !authorityMode {
                for player in endpoints[index].players {
                    proposeDisconnect(player, frame: inputs.queues[player].lastKnownFrame + 1)
                }
            }
        case .authority:
            authorityMode = false
            for player in players.indices where !isLocal[player] {
                if case .remote(let peer) = players[player], peer == endpoints[index].id {
                    let frame = inputs.queues[player].lastAuthoritativeFrame + 1
                    inputs.queues[player].disconnect(from: frame, final: true, currentFrame: currentFrame)
                    if !disconnectFinal[player] {
                        disconnectFinal[player] = true
                        events.append(.playerDisconnected(player: player, frame: inputs.queues[player].disconnectFrame))
                    }
                }
            }
        case .spectator, .host:
            break
        }
        checkRunning()
        for player in players.indices { checkDisconnectFinality(player) }
    }

    mutating func noteAuthorityDisconnect(_ player: PlayerHandle, from frame: Frame) {
        guard !disconnectFinal[player] else { return }
        disconnectFinal[player] = true
        events.append(.playerDisconnected(player: player, frame: frame))
    }

    /// This peer's proposal for `player`: the frame after the last input it holds (or earlier,
    /// when another peer proposed earlier). Freezes the player's inputs.
    mutating func proposeDisconnect(_ player: PlayerHandle, frame: Frame) {
        guard !isLocal[player], !disconnectFinal[player] else { return }
        let own = min(frame, inputs.queues[player].lastKnownFrame + 1)
        guard own < disconnectProposal[player] else { return }
        disconnectProposal[player] = own
        var tentative = own
        for endpoint in endpoints {
            if let report = endpoint.disconnectReports[player], report < tentative { tentative = report }
        }
        inputs.queues[player].disconnect(from: tentative, final: false, currentFrame: currentFrame)
        for index in endpoints.indices where endpoints[index].kind == .peer && endpoints[index].phase == .running {
            sendDisconnectNotices(to: index)
        }
        if case .remote(let peer) = players[player], let host = endpointIndex(peer), endpoints[host].isAlive,
           endpoints[host].players.allSatisfy({ disconnectProposal[$0] != .max }) {
            disconnectEndpoint(host)
        }
        checkDisconnectFinality(player)
    }

    mutating func handleDisconnectNotice(_ notice: DisconnectNotice, from index: Int) {
        let player = notice.player
        guard player >= 0, player < players.count, !isLocal[player] else { return }
        // A notice cannot reach back into frames this peer holds as final: confirmed frames (and,
        // from a relay, the inputs it already made authoritative) were simulated, checked and
        // maybe dropped from the state ring. Unchecked, a notice for frame 0 at frame 1000
        // trapped the rollback it asked for.
        let frame = max(notice.frame, confirmedFrame + 1)
        switch endpoints[index].kind {
        case .authority:
            let authoritative = inputs.queues[player].lastAuthoritativeFrame + 1
            inputs.queues[player].disconnect(from: max(frame, authoritative), final: true, currentFrame: currentFrame)
            noteAuthorityDisconnect(player, from: inputs.queues[player].disconnectFrame)
        case .peer where !authorityMode:
            let previous = endpoints[index].disconnectReports[player] ?? .max
            endpoints[index].disconnectReports[player] = min(previous, frame)
            if frame < disconnectProposal[player] {
                proposeDisconnect(player, frame: frame)
            }
            checkDisconnectFinality(player)
        default:
            break
        }
    }

    /// A disconnect becomes final once every live peer proposed a frame: all take the smallest.
    mutating func checkDisconnectFinality(_ player: PlayerHandle) {
        guard disconnectProposal[player] != .max, !disconnectFinal[player], !authorityMode else { return }
        var final = disconnectProposal[player]
        for endpoint in endpoints where endpoint.kind == .peer {
            if let report = endpoint.disconnectReports[player] {
                final = min(final, report)
            } else if endpoint.isAlive && !endpoint.players.contains(player) {
                return
            }
        }
        disconnectFinal[player] = true
        inputs.queues[player].disconnect(from: final, final: true, currentFrame: currentFrame)
        events.append(.playerDisconnected(player: player, frame: inputs.queues[player].disconnectFrame))
    }

    mutating func sendDisconnectNotices(to index: Int) {
        endpoints[index].lastNoticeMs = now
        for player in players.indices where disconnectProposal[player] != .max {
            var frame = disconnectProposal[player]
            for endpoint in endpoints {
                if let report = endpoint.disconnectReports[player], report < frame { frame = report }
            }
            send(.disconnectNotice(DisconnectNotice(player: player, frame: frame)), to: index)
        }
    }

    // MARK: - State transfer

    /// Asks `peer` for a confirmed state (it sees ``SessionEvent/stateRequested(peer:confirmedFrame:)``).
    mutating func requestState(from peer: PeerID) {
        guard let index = endpointIndex(peer), endpoints[index].isAlive else { return }
        send(.stateRequest(StateRequest(confirmedFrame: confirmedFrame)), to: index)
    }

    /// Queues a serialised state for `peer`.
    mutating func sendState(_ transfer: StateTransfer, to peer: PeerID) {
        guard let index = endpointIndex(peer), endpoints[index].isAlive else { return }
        send(.stateTransfer(transfer), to: index)
    }

    /// After a transferred state was installed and re-simulated.
    @usableFromInline
    mutating func stateInstalled() {
        updateConfirmation()
    }

    /// The oldest frame a transferred state may be installed at (its inputs must still be held).
    var oldestLoadableFrame: Frame {
        max(0, currentFrame - (configuration.inputHistory / 2 - configuration.stateRingCapacity))
    }
}
