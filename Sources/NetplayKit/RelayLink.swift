import Foundation
import NetplayService
import NetplayWire
import Rollback
import ZeroMQ

/// The client's connection to a relay: a primary DEALER socket (replaced on reconnect) plus up
/// to three additional paths (``NetplayMatchOptions/paths``), envelope encoding and decoding, and
/// the simulated network conditions (independent per path). Confined to one thread.
///
/// Inputs and acknowledgements (`InputBatch`) go on every attached path and input broadcasts are
/// taken from all of them, so one lost TCP segment holds an input back only when every path is
/// blocked at once; everything else uses the primary. An additional path attaches (with
/// `additional_path`) once the primary's attach succeeded, is retried with backoff when the
/// relay refuses it for now or forgets it, and is given up (an event) when refused for good:
/// the match never depends on it.
final class RelayLink {
    /// One connection and its simulated conditions.
    private struct Path {
        enum Stage: Equatable {
            /// Not wanted now (the primary is not attached), or the primary itself.
            case idle
            /// Attach at `atMs` (or as soon after as its connection is up).
            case waiting(atMs: UInt64)
            /// Attach sent; unanswered since `sentAtMs`.
            case attaching(requestId: UInt64, sentAtMs: UInt64)
            case attached
            /// Refused for good: not tried again until the primary attaches anew.
            case givenUp
        }

        var socket: Socket?
        var outbound: LinkConditioner?
        var inbound: LinkConditioner?
        var stage: Stage = .idle
        var attempts = 0
        /// When its current connection was opened (an attach waits for it to connect).
        var openedAtMs: UInt64 = 0
    }

    /// Something about an additional path the match reports as a ``MatchEvent``.
    enum PathNews {
        case attached(path: Int)
        case lost(path: Int, reason: String)
    }

    /// The relay's endpoint (``retarget(to:)`` changes it).
    private(set) var endpoint: String
    private let conditions: NetworkConditions
    private let context: Context
    private let serverKey: [UInt8]?
    /// Index 0 is the primary.
    private var paths: [Path]
    /// Bytes handed to the primary connection's socket since it opened, and the TCP connection
    /// under it (learned from what arrived on it when first asked) with the counts then: what the
    /// relay's kernel has not acknowledged of it is ``unacknowledgedBytes()``.
    private var primarySentBytes: Int64 = 0
    private var primaryConnection: (probe: TCPConnectionProbe, sent: Int64, acknowledged: Int64)?
    private var backoff: Backoff
    private var attachTimeoutMs: UInt64
    /// What additional paths attach with (set by
    /// ``attachPaths(ticket:clientVersion:protocolVersion:paths:backoff:attachTimeoutMs:now:)``):
    /// the primary's ticket, client and sync protocol version.
    private var ticket: JoinTicket?
    private var clientVersion = ""
    private var protocolVersion = SyncProtocol.current
    private var nextRequestId: UInt64 = 1 << 62
    /// The primary's connection count, and the one the paths were last attached for.
    private var generation = 0
    private var pathsGeneration = -1
    /// Told of every path event (the match records them).
    var onNews: ((PathNews) -> Void)?
    /// Told of a message that could not be encoded (it breaks the wire contract's limits) and
    /// was not sent, with the reason: the match records it as an error, so nothing vanishes.
    var onUnsendable: ((WireError) -> Void)?
    /// Input broadcasts whose copy came on one path 40 ms or more after another path brought it
    /// (a segment held back by a TCP loss on the slower path).
    private(set) var heldBackCopies = 0
    /// When each recent input broadcast first arrived (by a hash of its bytes), for the above.
    private var firstCopies: [UInt64: UInt64] = [:]
    /// When ``firstCopies`` was last pruned.
    private var lastCopyPruneMs: UInt64 = 0
    private(set) var sentMessages = 0
    private(set) var receivedMessages = 0
    private(set) var undecodable = 0

    init(endpoint: String, conditions: NetworkConditions, serverKey: [UInt8]? = nil, paths: Int = 1,
         attachTimeoutMs: Int = 1_500, backoff: Backoff = Backoff(), context: Context = .shared) throws {
        self.endpoint = endpoint
        self.conditions = conditions
        self.context = context
        self.serverKey = serverKey
        self.backoff = backoff
        self.attachTimeoutMs = UInt64(max(attachTimeoutMs, 1))
        self.paths = [Path()]
        setPathCount(paths)
        try open()
    }

    /// Makes room for `count` paths in all (1 ... ``NetplayMatchOptions/maxPaths``); each gets
    /// simulated conditions of its own (independent draws per path and direction; the primary
    /// keeps the salts it always had).
    private func setPathCount(_ count: Int) {
        let count = min(max(count, 1), NetplayMatchOptions.maxPaths)
        while paths.count > count {
            paths.last?.socket?.close()
            paths.removeLast()
        }
        while paths.count < count { paths.append(Path()) }
        guard !conditions.isPerfect else { return }
        for index in paths.indices where paths[index].outbound == nil {
            paths[index].outbound = LinkConditioner(conditions: conditions, salt: UInt64(1 + 2 * index))
            paths[index].inbound = LinkConditioner(conditions: conditions, salt: UInt64(2 + 2 * index))
        }
    }

    deinit { for path in paths { path.socket?.close() } }

    /// Messages a relay may have queued at this peer, per connection: a frontend that stops
    /// ticking (an app in the background) holds at most this many, and past it libzmq stops
    /// reading the connection, so the relay drops what it sends (counted there) and resends
    /// inputs from the peer's acknowledgements once it reads again. Two seconds of the busiest
    /// legitimate traffic (eight players' forwarded batches) fit.
    static let receiveQueueMessages: Int32 = 1_000
    /// The largest message taken from a relay: a state chunk's 256 KiB of data (the wire's
    /// limit) and its envelope, with room. An input broadcast at its largest is about 135 KiB.
    /// So a relay can queue about 320 MiB at a peer that does not read (the service default,
    /// 10,000 messages of 1 MiB, let it queue about 10 GiB).
    static let maxMessageBytes: Int64 = 320 << 10
    /// An additional path carries input broadcasts (at most about 135 KiB each) and the answers
    /// to its attaches, never a state: it holds 128 of at most 160 KiB (20 MiB), so paths do
    /// not multiply what a relay can queue at a peer.
    static let additionalPathQueueMessages: Int32 = 128
    static let additionalPathMaxMessageBytes: Int64 = 160 << 10
    /// Messages this peer may queue for the relay per connection: about 30 s of inputs at 60 Hz,
    /// or 8 whole states (a state is at most 256 chunks); past it a send fails. The default
    /// (10,000 messages) let a relay that asks for states and reads nothing have an app queue
    /// gigabytes.
    static let sendQueueMessages: Int32 = 2_048
    /// Bytes one ``receive(now:)`` decodes at most (the rest wait for the next tick), so one tick
    /// never holds more than this in decoded messages, however much a relay sent.
    static let receiveBytesPerCall = 16 << 20

    /// What a relay may queue at path `index` (messages, largest message in bytes); nil while it
    /// has no connection.
    func receiveLimits(ofPath index: Int) -> (messages: Int32, bytes: Int64)? {
        guard paths.indices.contains(index), let socket = paths[index].socket,
              let messages = try? socket.receiveHighWaterMark, let bytes = try? socket.maxMessageSize else { return nil }
        return (messages, bytes)
    }

    private func makeSocket(additional: Bool = false) throws -> Socket {
        try SocketDefaults.connectedClient(.dealer, to: endpoint, serverKey: serverKey, context: context) {
            try $0.set(.immediate(true))
            try $0.set(.receiveHighWaterMark(additional ? Self.additionalPathQueueMessages : Self.receiveQueueMessages))
            try $0.set(.sendHighWaterMark(additional ? Self.additionalPathQueueMessages : Self.sendQueueMessages))
            try $0.set(.maxMessageSize(bytes: additional ? Self.additionalPathMaxMessageBytes : Self.maxMessageBytes))
        }
    }

    /// Opens a fresh primary connection (a new routing identity: the relay sees a new peer). The
    /// additional paths close: the relay drops them when the primary attaches again, and they
    /// attach anew after that.
    func open() throws {
        for index in paths.indices {
            paths[index].socket?.close()
            paths[index].socket = nil
            paths[index].stage = .idle
            paths[index].attempts = 0
        }
        generation += 1
        paths[0].socket = try makeSocket()
        paths[0].socket?.inboundLedger = InboundLedger()
        primarySentBytes = 0
        primaryConnection = nil
    }

    /// Bytes handed to the primary connection that the relay's kernel has not acknowledged yet
    /// (queued here by libzmq or by the kernel), at least, counted from when it was first asked
    /// on this connection (0 then); nil while nothing arrived on it (or off Linux). Framing and
    /// heartbeats are not counted, so it errs low.
    func unacknowledgedBytes() -> Int? {
        if let connection = primaryConnection, let acknowledged = connection.probe.acknowledgedBytes() {
            return Int(max(0, (primarySentBytes - connection.sent) - (acknowledged - connection.acknowledged)))
        }
        // First asked, or the connection is another now (the probe's inode check: libzmq
        // reconnects on the lowest free descriptor, often the last connection's): learn the one
        // the primary's last frame came on.
        guard let fd = paths[0].socket?.inboundLedger?.lastFd, let probe = TCPConnectionProbe(fd: fd),
              let acknowledged = probe.acknowledgedBytes() else { return nil }
        primaryConnection = (probe, primarySentBytes, acknowledged)
        return 0
    }

    /// Points the link at another relay (the session moved there): every connection to the old
    /// one closes and a fresh primary connects to `endpoint`.
    func retarget(to endpoint: String) throws {
        self.endpoint = endpoint
        try open()
    }

    /// Closes every connection; with `linger`, what is queued (a last Detach) still goes out.
    func close(lingerMilliseconds linger: Int32 = 0) {
        for index in paths.indices {
            if linger > 0 { try? paths[index].socket?.set(.linger(milliseconds: linger)) }
            paths[index].socket?.close()
            paths[index].socket = nil
            paths[index].stage = .idle
        }
    }

    // MARK: Additional paths

    /// Connections configured (the primary included).
    var pathCount: Int { paths.count }

    /// Connections attached now: the primary (while open) and the additional paths the relay accepted.
    var attachedPaths: Int {
        (paths[0].socket != nil ? 1 : 0) + paths.dropFirst().filter { $0.stage == .attached }.count
    }

    /// The primary attached (first time or again): `paths - 1` additional paths attach with
    /// `ticket`, fresh connections each, unless they already did for this primary connection.
    func attachPaths(ticket: JoinTicket, clientVersion: String, protocolVersion: UInt32, paths count: Int, backoff: Backoff,
                     attachTimeoutMs: Int, now: UInt64) {
        self.ticket = ticket
        self.clientVersion = clientVersion
        self.protocolVersion = protocolVersion
        if count != paths.count {
            setPathCount(count)
            self.backoff = backoff
            self.attachTimeoutMs = UInt64(max(attachTimeoutMs, 1))
        }
        guard paths.count > 1, pathsGeneration != generation, paths[0].socket != nil else { return }
        pathsGeneration = generation
        for index in paths.indices.dropFirst() {
            paths[index].attempts = 0
            paths[index].stage = .waiting(atMs: now)
        }
        drivePaths(now: now)
    }

    /// Opens more additional paths (up to `count` in all) while attached: the link showed loss.
    func growPaths(to count: Int, now: UInt64) {
        let old = paths.count
        guard count > old, ticket != nil, paths[0].socket != nil else { return }
        setPathCount(count)
        for index in old ..< paths.count {
            paths[index].attempts = 0
            paths[index].stage = .waiting(atMs: now)
        }
        drivePaths(now: now)
    }

    /// Notes the arrival of an input broadcast's bytes; a copy 40 ms after the first is held back.
    private func noteCopy(_ frame: UnsafeRawBufferPointer, now: UInt64) {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in frame { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        if let first = firstCopies[hash] {
            if now &- first >= 40 { heldBackCopies += 1 }
        } else {
            if firstCopies.count >= 4_096 {
                // Pruned at most once a second: more distinct frames than fit in a second (a
                // relay flooding) start the table over, which costs a miscount at most, where a
                // prune per frame cost a pass over 4,096 entries for every frame.
                if now &- lastCopyPruneMs >= 1_000 {
                    firstCopies = firstCopies.filter { now &- $0.value < 1_000 }
                    lastCopyPruneMs = now
                }
                if firstCopies.count >= 4_096 { firstCopies.removeAll(keepingCapacity: true) }
            }
            firstCopies[hash] = now
        }
    }

    /// Closes additional path `index` without a word to the relay, as a failed connection would
    /// (tests): it is attached again after a backoff, on a fresh connection.
    func failPath(_ index: Int, now: UInt64) {
        guard index > 0, index < paths.count else { return }
        paths[index].socket?.close()
        paths[index].socket = nil
        retryPath(index, now: now, why: "closed")
    }

    /// Sends the attaches that are due and retries those unanswered too long.
    private func drivePaths(now: UInt64) {
        guard paths.count > 1, let ticket else { return }
        for index in paths.indices.dropFirst() {
            switch paths[index].stage {
            case .waiting(let at) where now >= at:
                if paths[index].socket == nil {
                    do {
                        paths[index].socket = try makeSocket(additional: true)
                        paths[index].openedAtMs = now
                    } catch {
                        retryPath(index, now: now, why: "cannot open a connection: \(error)")
                        continue
                    }
                }
                // Sent directly (not through the simulated delay): a fresh connection takes
                // nothing until it is up (ZMQ_IMMEDIATE), so the attach waits for it here.
                let request = AttachRequest(ticket: ticket, protocolVersion: protocolVersion, clientVersion: clientVersion,
                                            resume: true, additionalPath: true)
                if transmit(Envelope(requestId: nextRequestId + 1, body: .attachRequest(request)), on: index) {
                    nextRequestId += 1
                    paths[index].stage = .attaching(requestId: nextRequestId, sentAtMs: now)
                } else if now &- paths[index].openedAtMs >= attachTimeoutMs {
                    retryPath(index, now: now, why: "its connection did not come up")
                }
            case .attaching(_, let sentAt) where now &- sentAt >= attachTimeoutMs:
                retryPath(index, now: now, why: "no answer to its attach")
            default:
                break
            }
        }
    }

    /// Path `index` attaches again after a backoff on a fresh connection, or is given up after
    /// the backoff's attempts.
    private func retryPath(_ index: Int, now: UInt64, why: String) {
        paths[index].socket?.close()
        paths[index].socket = nil
        paths[index].attempts += 1
        guard paths[index].attempts < backoff.maxAttempts else {
            givePathUp(index, why: "\(why); gave up after \(paths[index].attempts) attempts")
            return
        }
        paths[index].stage = .waiting(atMs: now + UInt64(backoff.delayMs(attempt: paths[index].attempts)))
    }

    private func givePathUp(_ index: Int, why: String) {
        paths[index].socket?.close()
        paths[index].socket = nil
        paths[index].stage = .givenUp
        onNews?(.lost(path: index + 1, reason: why))
    }

    /// What an additional path received: attach replies and path errors are handled here;
    /// input broadcasts are returned for the match (anything else is not for a path).
    private func takeFromPath(_ index: Int, _ envelope: Envelope, now: UInt64) -> Envelope? {
        switch envelope.body {
        case .inputBroadcast:
            return paths[index].stage == .attached ? envelope : nil
        case .attachResponse(let response):
            if case .attaching(let id, _) = paths[index].stage, id == envelope.requestId {
                paths[index].stage = .attached
                paths[index].attempts = 0
                onNews?(.attached(path: index + 1))
            } else if envelope.requestId == 0, response.running, paths[index].stage == .attached {
                // The start, sent on every path: whichever copy comes first starts the match.
                return envelope
            }
        case .error(let error):
            if case .attaching(let id, _) = paths[index].stage, id == envelope.requestId {
                switch error.code {
                case .invalidState, .unavailable, .overloaded, .shuttingDown, .timeout, .internal:
                    retryPath(index, now: now, why: "refused: \(error.message)")
                default:
                    givePathUp(index, why: "refused: \(error.code.protoName) \(error.message)")
                }
            } else if error.code == .unauthenticated, paths[index].stage == .attached {
                // The relay forgot this path (it restarted, or the participant reattached).
                retryPath(index, now: now, why: "the relay forgot it")
            }
        case .detach(let detach):
            if paths[index].stage != .idle && paths[index].stage != .givenUp {
                retryPath(index, now: now, why: "detached: \(detach.reason.protoName)")
            }
        default:
            break
        }
        return nil
    }

    // MARK: Simulated outage

    /// Cuts the simulated link until `untilMs` (everything both ways on every path is dropped).
    func simulateOutage(untilMs: UInt64) {
        for index in paths.indices {
            if paths[index].outbound == nil {
                paths[index].outbound = LinkConditioner(conditions: NetworkConditions(), salt: UInt64(1 + 2 * index))
                paths[index].inbound = LinkConditioner(conditions: NetworkConditions(), salt: UInt64(2 + 2 * index))
            }
            paths[index].outbound?.outageUntilMs = untilMs
            paths[index].inbound?.outageUntilMs = untilMs
        }
    }

    /// Whether a simulated outage is on at `now`.
    func inOutage(now: UInt64) -> Bool { now < (paths[0].outbound?.outageUntilMs ?? 0) }

    // MARK: Sending and receiving

    /// Sends (possibly after the simulated delay): an `InputBatch` on every attached path,
    /// anything else on the primary. False when the primary could not take it: its connection
    /// is not up yet (a fresh connection's handshakes take round trips; until then nothing is
    /// queued), or it is closed.
    @discardableResult
    func send(_ body: Envelope.Body, requestId: UInt64 = 0, now: UInt64) -> Bool {
        let envelope = Envelope(requestId: requestId, body: body)
        guard case .inputBatch = body, paths.count > 1 else {
            return send(envelope, on: 0, now: now)
        }
        var primaryTook = false
        for index in paths.indices where index == 0 || paths[index].stage == .attached {
            let took = send(envelope, on: index, now: now)
            if index == 0 { primaryTook = took }
        }
        return primaryTook
    }

    private func send(_ envelope: Envelope, on index: Int, now: UInt64) -> Bool {
        if paths[index].outbound != nil {
            paths[index].outbound!.admit(envelope, now: now)
            flush(index, now: now)
            return true
        }
        return transmit(envelope, on: index)
    }

    @discardableResult
    private func transmit(_ envelope: Envelope, on index: Int) -> Bool {
        guard let socket = paths[index].socket else { return false }
        let bytes: [UInt8]
        do { bytes = try envelope.encoded() } catch {
            onUnsendable?(error)
            return false
        }
        guard (try? socket.send(bytes, flags: .dontWait)) != nil else { return false }
        sentMessages += 1
        if index == 0 { primarySentBytes += Int64(bytes.count) }
        return true
    }

    private func flush(_ index: Int, now: UInt64) {
        guard paths[index].outbound != nil else { return }
        for envelope in paths[index].outbound!.due(now: now) { transmit(envelope, on: index) }
    }

    /// Sends whatever the simulated delay released, and the additional paths' due attaches.
    func flush(now: UInt64) {
        for index in paths.indices { flush(index, now: now) }
        if paths.count > 1 { drivePaths(now: now) }
    }

    /// Everything received on any path and released by the simulated delay: the primary's
    /// messages in order, then the input broadcasts of the additional paths (duplicates of the
    /// primary's, which the match ignores).
    /// At most ``receiveBytesPerCall`` bytes (and 10,000 messages) are taken off the sockets per
    /// call.
    func receive(now: UInt64) -> [Envelope] {
        flush(now: now)
        var out: [Envelope] = []
        var bytesLeft = Self.receiveBytesPerCall
        for index in paths.indices {
            var arrived: [Envelope] = []
            if let socket = paths[index].socket {
                var budget = 10_000
                while budget > 0, bytesLeft > 0, let frame = try? socket.receive(flags: .dontWait) {
                    budget -= 1
                    bytesLeft -= frame.count
                    if paths.count > 1 { frame.withUnsafeBytes { noteCopy($0, now: now) } }
                    guard let envelope = try? Envelope(decoding: frame) else {
                        undecodable += 1
                        continue
                    }
                    receivedMessages += 1
                    if paths[index].inbound != nil { paths[index].inbound!.admit(envelope, now: now) } else { arrived.append(envelope) }
                }
            }
            if paths[index].inbound != nil { arrived += paths[index].inbound!.due(now: now) }
            if index == 0 {
                out += arrived
            } else {
                for envelope in arrived {
                    if let broadcast = takeFromPath(index, envelope, now: now) { out.append(broadcast) }
                }
            }
        }
        return out
    }

    /// Messages dropped by the simulated link so far (every path).
    var simulatedDrops: Int { paths.reduce(0) { $0 + ($1.outbound?.dropped ?? 0) + ($1.inbound?.dropped ?? 0) } }
}
