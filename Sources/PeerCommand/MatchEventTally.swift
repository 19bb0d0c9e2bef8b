import NetplayKit

/// The events of a match netplay-peer's RESULT line counts, over the whole match: the match
/// keeps only its last 512 events, so counting them at the end undercounted a long one.
struct MatchEventTally: Equatable {
    /// Reconnections to a relay.
    var reconnects = 0
    /// Desync notices from the relay.
    var desyncs = 0
    /// States loaded (transfers, heals).
    var statesLoaded = 0
    /// Moves to another relay.
    var relayMoves = 0

    /// Counts `event` when it is one of the tallied kinds.
    mutating func count(_ event: MatchEvent) {
        switch event {
        case .reconnected: reconnects += 1
        case .desync: desyncs += 1
        case .stateLoaded: statesLoaded += 1
        case .relayMoved: relayMoves += 1
        default: break
        }
    }
}
