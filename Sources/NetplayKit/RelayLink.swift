import Foundation
import NetplayService
import NetplayWire
import Rollback
import ZeroMQ

/// The client's connection to a relay: one DEALER socket (replaced on reconnect), envelope
/// encoding and decoding, and the simulated network conditions. Confined to one thread.
final class RelayLink {
    let endpoint: String
    private let context: Context
    private let serverKey: [UInt8]?
    private var socket: Socket?
    private var outbound: LinkConditioner?
    private var inbound: LinkConditioner?
    private(set) var sentMessages = 0
    private(set) var receivedMessages = 0
    private(set) var undecodable = 0

    init(endpoint: String, conditions: NetworkConditions, serverKey: [UInt8]? = nil, context: Context = .shared) throws {
        self.endpoint = endpoint
        self.context = context
        self.serverKey = serverKey
        if !conditions.isPerfect {
            outbound = LinkConditioner(conditions: conditions, salt: 1)
            inbound = LinkConditioner(conditions: conditions, salt: 2)
        }
        try open()
    }

    deinit { socket?.close() }

    /// Opens a fresh connection (a new routing identity: the relay sees a new peer).
    func open() throws {
        socket?.close()
        let dealer = try SocketDefaults.client(.dealer, context: context, curve: nil)
        if let serverKey { try dealer.makeCurveClient(serverKey: serverKey, keys: try CurveKeyPair.generate()) }
        try dealer.set(.linger(milliseconds: 0))
        try dealer.set(.immediate(true))
        try dealer.connect(endpoint)
        socket = dealer
    }

    /// Closes the connection; with `linger`, what is queued (a last Detach) still goes out.
    func close(lingerMilliseconds linger: Int32 = 0) {
        if linger > 0 { try? socket?.set(.linger(milliseconds: linger)) }
        socket?.close()
        socket = nil
    }

    /// Cuts the simulated link until `untilMs` (everything both ways is dropped).
    func simulateOutage(untilMs: UInt64) {
        if outbound == nil {
            outbound = LinkConditioner(conditions: NetworkConditions(), salt: 1)
            inbound = LinkConditioner(conditions: NetworkConditions(), salt: 2)
        }
        outbound?.outageUntilMs = untilMs
        inbound?.outageUntilMs = untilMs
    }

    /// Whether a simulated outage is on at `now`.
    func inOutage(now: UInt64) -> Bool { now < (outbound?.outageUntilMs ?? 0) }

    /// Sends (possibly after the simulated delay).
    func send(_ body: Envelope.Body, requestId: UInt64 = 0, now: UInt64) {
        let envelope = Envelope(requestId: requestId, body: body)
        if outbound != nil {
            outbound!.admit(envelope, now: now)
            flush(now: now)
        } else {
            transmit(envelope)
        }
    }

    private func transmit(_ envelope: Envelope) {
        guard let socket, let bytes = try? envelope.encoded() else { return }
        if (try? socket.send(bytes, flags: .dontWait)) != nil { sentMessages += 1 }
    }

    /// Sends whatever the simulated delay released.
    func flush(now: UInt64) {
        guard outbound != nil else { return }
        for envelope in outbound!.due(now: now) { transmit(envelope) }
    }

    /// Everything received and released by the simulated delay, in order.
    func receive(now: UInt64) -> [Envelope] {
        flush(now: now)
        var out: [Envelope] = []
        if let socket {
            var budget = 10_000
            while budget > 0, let frame = try? socket.receive(flags: .dontWait) {
                budget -= 1
                guard let envelope = try? Envelope(decoding: frame) else {
                    undecodable += 1
                    continue
                }
                receivedMessages += 1
                if inbound != nil { inbound!.admit(envelope, now: now) } else { out.append(envelope) }
            }
        }
        if inbound != nil { out += inbound!.due(now: now) }
        return out
    }

    /// Messages dropped by the simulated link so far.
    var simulatedDrops: Int { (outbound?.dropped ?? 0) + (inbound?.dropped ?? 0) }
}
