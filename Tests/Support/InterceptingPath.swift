import Foundation
import NetplayWire
import Synchronization
import ZeroMQ

/// A path between clients and a real service that can answer, drop or rewrite what crosses
/// it: a ROUTER takes the clients' connections and forwards each on a DEALER of its own to the
/// service, on a thread of its own. Tests use it to make a real service look like another
/// (an older relay) or to lose what a bad link loses.
public final class InterceptingPath: Sendable {
    /// What happens to a frame crossing the path.
    public enum Verdict: Sendable {
        /// It goes on unchanged.
        case forward
        /// It goes on as these bytes instead.
        case replace([UInt8])
        /// It is lost.
        case drop
        /// It goes no further, and its sender gets these bytes back (a client's frame only).
        case answer([UInt8])
    }

    /// Where clients connect.
    public let endpoint: String
    private let stopped = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    /// `toService` judges each frame a client sends (raw bytes and, when it decodes, its
    /// envelope); `toClient` each frame the service sends back.
    public init(to service: String,
                toService: @escaping @Sendable ([UInt8], Envelope?) -> Verdict = { _, _ in .forward },
                toClient: @escaping @Sendable ([UInt8], Envelope?) -> Verdict = { _, _ in .forward }) throws {
        let front = try Context.shared.socket(.router)
        try front.bind("tcp://127.0.0.1:*")
        endpoint = try front.lastEndpoint
        let forwarder = Forwarder(front: front, service: service, toService: toService, toClient: toClient)
        Thread.detachNewThread { [self] in
            defer { finished.signal() }
            while !stopped.load(ordering: .relaxed) {
                if !forwarder.pump() { usleep(500) }
            }
        }
    }

    /// Stops forwarding (its sockets close with its thread's forwarder).
    public func stop() {
        stopped.store(true, ordering: .relaxed)
        finished.wait()
    }

    /// The sockets, owned by the path's thread.
    private final class Forwarder: @unchecked Sendable {
        let front: Socket
        let service: String
        let toService: @Sendable ([UInt8], Envelope?) -> Verdict
        let toClient: @Sendable ([UInt8], Envelope?) -> Verdict
        var backs: [[UInt8]: Socket] = [:]

        init(front: Socket, service: String, toService: @escaping @Sendable ([UInt8], Envelope?) -> Verdict,
             toClient: @escaping @Sendable ([UInt8], Envelope?) -> Verdict) {
            self.front = front
            self.service = service
            self.toService = toService
            self.toClient = toClient
        }

        /// Moves what is waiting either way; whether anything was.
        func pump() -> Bool {
            var moved = false
            while let frames = try? front.receiveMultipart(flags: .dontWait), frames.count == 2 {
                moved = true
                let (connection, bytes) = (frames[0], frames[1])
                switch toService(bytes, try? Envelope(decoding: bytes)) {
                case .forward: _ = try? back(for: connection)?.send(bytes)
                case .replace(let other): _ = try? back(for: connection)?.send(other)
                case .drop: break
                case .answer(let reply): _ = try? front.sendMultipart([connection, reply])
                }
            }
            for (connection, back) in backs {
                while let reply = try? back.receive(flags: .dontWait) {
                    moved = true
                    switch toClient(reply, try? Envelope(decoding: reply)) {
                    case .forward, .answer: _ = try? front.sendMultipart([connection, reply])
                    case .replace(let other): _ = try? front.sendMultipart([connection, other])
                    case .drop: break
                    }
                }
            }
            return moved
        }

        private func back(for connection: [UInt8]) -> Socket? {
            if let back = backs[connection] { return back }
            guard let back = try? Context.shared.socket(.dealer), (try? back.connect(service)) != nil else { return nil }
            backs[connection] = back
            return back
        }
    }
}
