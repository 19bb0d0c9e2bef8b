import Foundation
import ZeroMQ

/// A ROUTER standing in for a service or a relay on loopback, to see what a client's side
/// holds: it queues 10 messages per peer itself, so what it manages to send beyond that is what
/// the peer (and the kernel between them) took.
public final class StandInRouter {
    /// The socket (send timeouts off; receives wait up to 5 s).
    public let socket: Socket
    /// Where it listens.
    public let endpoint: String

    /// Binds a fresh ROUTER on a free loopback port; `receiveQueue`: the messages libzmq reads
    /// ahead of the test (1: what the test does not read stays with the peer).
    public init(receiveQueue: Int32 = 1_000) throws {
        socket = try Context.shared.socket(.router)
        try socket.set(.sendHighWaterMark(10))
        try socket.set(.receiveHighWaterMark(receiveQueue))
        try socket.set(.receiveTimeout(milliseconds: 5_000))
        try socket.set(.routerMandatory(true))
        try socket.bind("tcp://127.0.0.1:*")
        endpoint = try socket.lastEndpoint
    }

    /// The routing id of the peer whose message comes next (waits up to 5 s).
    public func nextPeer() throws -> [UInt8] { try socket.receiveMultipart()[0] }

    /// Sends `message` to `peer` until `count` went out or libzmq has taken none for three
    /// seconds (every queue on the way full); returns how many went out.
    public func flood(_ message: [UInt8], to peer: [UInt8], count: Int) -> Int {
        var sent = 0
        var stuckSince: Date?
        while sent < count {
            if (try? socket.sendMultipart([peer, message], flags: .dontWait)) != nil {
                sent += 1
                stuckSince = nil
            } else if Date().timeIntervalSince(stuckSince ?? Date()) > 3 {
                break
            } else {
                stuckSince = stuckSince ?? Date()
                usleep(1_000)
            }
        }
        return sent
    }

    deinit { socket.close() }
}
