import Foundation
import Testing
@testable import ZeroMQ

@Suite("zmq_poll over sockets and file descriptors")
struct PollerTests {
    @Test func pollReportsTheReadySocketOnly() throws {
        let a = try Context.shared.socket(.pull)
        let b = try Context.shared.socket(.pull)
        let push = try Context.shared.socket(.push)
        _ = try bindEphemeral(a)
        try push.connect(try bindEphemeral(b))
        let poller = Poller()
        let ia = poller.add(a)
        let ib = poller.add(b)
        try push.send([1])
        #expect(try poller.poll(timeout: 2000) == 1)
        #expect(!poller.isReadable(ia))
        #expect(poller.isReadable(ib))
    }

    @Test func pollTimesOutWithNothingReady() throws {
        let a = try Context.shared.socket(.pull)
        _ = try bindEphemeral(a)
        let poller = Poller()
        poller.add(a)
        #expect(try poller.poll(timeout: 10) == 0)
    }

    @Test func pollWatchesAPipe() throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]); close(fds[1]) }
        let poller = Poller()
        let index = poller.add(fileDescriptor: fds[0])
        #expect(try poller.poll(timeout: 0) == 0)
        var byte: UInt8 = 1
        #expect(write(fds[1], &byte, 1) == 1)
        #expect(try poller.poll(timeout: 1000) == 1)
        #expect(poller.isReadable(index))
    }

    @Test func writableEventsAreReported() throws {
        let push = try Context.shared.socket(.push)
        let pull = try Context.shared.socket(.pull)
        try push.connect(try bindEphemeral(pull))
        let poller = Poller()
        let index = poller.add(push, events: .writable)
        #expect(try poller.poll(timeout: 2000) == 1)
        #expect(poller.isWritable(index))
    }
}
