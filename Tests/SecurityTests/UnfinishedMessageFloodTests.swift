import Foundation
import Glibc
import NetplayService
import NetplayTestSupport
import NetplayWire
import Testing

/// Multipart messages that never end, against a real service: a connection holding over 2 MiB
/// of a message that does not end, while the service has nothing else to read, is shut down,
/// libzmq frees what it held, and the service answers as before. Without the guard one
/// connection grew netplay-discovery by 1.5 GB in seconds, and the memory stayed; empty frames
/// (2 bytes on the wire, about 64 in libzmq's queue) grew it by 2 GB before the guard's limit
/// was a whole message. Discovery's public events endpoint (a PUB, whose subscribers' messages
/// the service never reads) is guarded the same way. The other limits (64 MiB per connection
/// while whole messages wait, 256 MiB in all) are `InboundGuardTests`'.
@Suite("Attack: multipart messages that never end", .serialized, .ownThread)
struct UnfinishedMessageFloodTests {
    @Test(.timeLimit(.minutes(2)))
    func aConnectionHoldingAnUnfinishedMessageIsCutAndItsMemoryFreed() throws {
        let port = TestPorts.free(), eventsPort = TestPorts.free()
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("netplay-unfinished-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let discovery = try ServiceProcess("netplay-discovery", [
            "--endpoint", "tcp://127.0.0.1:\(port)", "--events", "tcp://127.0.0.1:\(eventsPort)", "--telemetry", "none",
            "--data-dir", root + "/discovery-0",
            "--control-endpoint", "none", "--beacon-port", "0", "--retroarch-port", "0",
        ])
        defer { discovery.kill9() }
        let client = try BlockingClient(endpoint: "tcp://127.0.0.1:\(port)", timeout: 2)
        #expect(eventually(within: 15) { (try? client.request(.healthRequest(HealthRequest()))) != nil }, "\(discovery.log)")
        let pid = discovery.pid
        let before = residentBytes(pid)

        // One connection, a gigabyte of one message: cut on the way.
        let flooder = try UnfinishedMessageSender(port: port)
        let sent = flooder.sendUnfinished(frames: 1_024)
        #expect(sent < 1_024 || flooder.closedByPeer(within: 2), "a 1 GiB unfinished message was taken whole")
        #expect(eventually(within: 3) { residentBytes(pid) < before + (160 << 20) },
                "resident \(residentBytes(pid) >> 20) MiB after the cut, \(before >> 20) MiB before")

        // Empty frames: 2 bytes each on the wire, about 64 bytes each in libzmq's queue.
        let empty = try UnfinishedMessageSender(port: port)
        let emptySent = empty.sendUnfinished(frames: 40_000_000, size: 0)
        #expect(emptySent < 40_000_000 || empty.closedByPeer(within: 2), "40 million empty frames were taken")
        #expect(eventually(within: 3) { residentBytes(pid) < before + (400 << 20) },
                "resident \(residentBytes(pid) >> 20) MiB")

        // Connections each in the middle of a message of 1.5 MiB (a whole message is at most
        // 1 MiB + 64 KiB, but half a message is no attack yet): none is cut.
        var patient: [UnfinishedMessageSender] = []
        for _ in 0 ..< 4 {
            let sender = try UnfinishedMessageSender(port: port)
            #expect(sender.sendUnfinished(frames: 3, size: 512 << 10) == 3)
            patient.append(sender)
        }
        Thread.sleep(forTimeInterval: 0.5)
        #expect(patient.allSatisfy { !$0.closedByPeer(within: 0.01) }, "a connection holding 1.5 MiB was cut")

        // A subscriber's unfinished message to the events endpoint.
        let subscriber = try UnfinishedMessageSender(port: eventsPort, as: "SUB")
        let subscriberSent = subscriber.sendUnfinished(frames: 1_024)
        #expect(subscriberSent < 1_024 || subscriber.closedByPeer(within: 2), "the PUB took a 1 GiB unfinished message whole")

        // The service answers, and a request of a whole megabyte still goes through.
        #expect((try? client.request(.healthRequest(HealthRequest()))) != nil)
        let big = try BlockingClient(endpoint: "tcp://127.0.0.1:\(port)", timeout: 5)
        var filter = RoomFilter()
        filter.gameName = String(repeating: "g", count: 1 << 20)
        _ = try? big.request(.listRoomsRequest(ListRoomsRequest(filter: filter)))
        #expect((try? big.request(.healthRequest(HealthRequest()))) != nil, "a client sending a 1 MiB request was cut")
        #expect(discovery.log.contains("connection cut") && discovery.log.contains("peer=127.0.0.1:"), "\(discovery.log.suffix(2_000))")
        #expect(discovery.process.isRunning)
    }
}
