import Foundation
import NetplayWire
import Synchronization
import ZeroMQ

/// A stand-in for a service that lies or floods, to show how a client copes with one: its
/// request endpoint answers the `n`th request with `answer(n, request)`; while `publish` is set,
/// its events endpoint publishes what `publish(n)` returns for n = 1, 2, ... without pause.
/// Plain tcp on loopback.
public final class LyingService: @unchecked Sendable {
    /// The ROUTER endpoint requests go to.
    public let requests: String
    /// The PUB endpoint events come from.
    public let events: String
    private let router: Socket
    private let publisher: Socket
    private let stopped = Atomic<Bool>(false)
    private var threads: [Thread] = []

    /// Binds both endpoints and starts answering (and publishing, with `publish`).
    public init(answer: @escaping @Sendable (_ served: Int, _ request: Envelope) -> Envelope.Body,
                publish: (@Sendable (_ sequence: UInt64) -> (topic: String, body: Envelope.Body))? = nil) throws {
        router = try Context.shared.socket(.router)
        try router.set(.receiveTimeout(milliseconds: 50))
        try router.bind("tcp://127.0.0.1:*")
        requests = try router.lastEndpoint
        publisher = try Context.shared.socket(.pub)
        try publisher.bind("tcp://127.0.0.1:*")
        events = try publisher.lastEndpoint
        threads.append(Thread { [self] in
            var served = 0
            while !stopped.load(ordering: .relaxed) {
                guard let frames = try? router.receiveMultipart(), frames.count == 2,
                      let request = try? Envelope(decoding: frames[1]) else { continue }
                served += 1
                let reply = try? Envelope(requestId: request.requestId, body: answer(served, request)).encoded()
                try? router.sendMultipart([frames[0], reply ?? []])
            }
        })
        if let publish {
            threads.append(Thread { [self] in
                var sequence: UInt64 = 0
                while !stopped.load(ordering: .relaxed) {
                    sequence += 1
                    let (topic, body) = publish(sequence)
                    guard let bytes = try? Envelope(body: body).encoded() else { continue }
                    try? publisher.sendMultipart([Array(topic.utf8), bytes])
                }
            })
        }
        threads.forEach { $0.start() }
    }

    /// Stops answering and publishing and closes both endpoints.
    public func stop() {
        stopped.store(true, ordering: .relaxed)
        Thread.sleep(forTimeInterval: 0.2)
        router.close()
        publisher.close()
    }
}
