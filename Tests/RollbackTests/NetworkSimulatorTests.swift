import Rollback
import Testing
import NetplayTestSupport

@Suite("Network simulator", .ownThread)
struct NetworkSimulatorTests {
    let a = PeerID(1), b = PeerID(2)

    func run(seed: UInt64, _ conditions: LinkConditions, count: Int = 2000) -> [SimulatedDelivery<Int>] {
        var network = NetworkSimulator<Int>(seed: seed, conditions: conditions)
        var delivered: [SimulatedDelivery<Int>] = []
        for index in 0 ..< count {
            network.send(index, from: a, to: b, now: UInt64(index))
            delivered += network.deliver(now: UInt64(index))
        }
        delivered += network.deliver(now: .max)
        return delivered
    }

    @Test("the same seed delivers the same messages at the same times")
    func deterministic() {
        let conditions = LinkConditions(latencyMs: 20, jitterMs: 30, lossRate: 0.1, duplicateRate: 0.1, reorderRate: 0.1)
        let first = run(seed: 9, conditions).map { "\($0.message)@\($0.deliverAtMs)" }
        #expect(first == run(seed: 9, conditions).map { "\($0.message)@\($0.deliverAtMs)" })
        #expect(first != run(seed: 10, conditions).map { "\($0.message)@\($0.deliverAtMs)" })
    }

    @Test("latency and jitter bound the delay")
    func latency() {
        for delivery in run(seed: 1, LinkConditions(latencyMs: 40, jitterMs: 10)) {
            let delay = delivery.deliverAtMs - UInt64(delivery.message)
            #expect(delay >= 40 && delay <= 50)
        }
    }

    @Test("loss, duplication and reordering happen at about their rates")
    func rates() {
        let lossy = run(seed: 2, LinkConditions(lossRate: 0.1))
        #expect(lossy.count > 1700 && lossy.count < 1900)
        let doubled = run(seed: 3, LinkConditions(duplicateRate: 0.1))
        #expect(doubled.count > 2100 && doubled.count < 2300)
        let reordered = run(seed: 4, LinkConditions(latencyMs: 5, reorderRate: 0.1, reorderDelayMs: 30))
        let inversions = zip(reordered, reordered.dropFirst()).filter { $0.message > $1.message }.count
        #expect(inversions > 100)
        let perfect = run(seed: 5, .perfect)
        #expect(perfect.map(\.message) == Array(0 ..< 2000))
    }

    @Test("links are configured per direction")
    func perLink() {
        var network = NetworkSimulator<Int>(seed: 1)
        network.setConditions(.down, from: a, to: b)
        network.send(1, from: a, to: b, now: 0)
        network.send(2, from: b, to: a, now: 0)
        #expect(network.deliver(now: 10).map(\.message) == [2])
        #expect(network.droppedCount == 1)
    }
}
