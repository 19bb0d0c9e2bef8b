import Foundation
import Testing
@testable import ZeroMQ
import NetplayTestSupport

@Suite("Polling sockets and file descriptors (zmq_poll semantics)", .ownThread)
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

    /// A closed socket keeps its place and is never reported: its item used to be descriptor 0,
    /// standard input, which is always readable as /dev/null (a supervised child's): the
    /// reactor was woken for it on every poll.
    @Test func aClosedSocketIsNeverReportedNorStandardInputPolled() throws {
        let saved = dup(0), devNull = open("/dev/null", O_RDONLY)
        #expect(saved >= 0 && devNull >= 0 && dup2(devNull, 0) == 0)
        defer {
            dup2(saved, 0)
            close(saved)
            close(devNull)
        }
        let closed = try Context.shared.socket(.pull)
        closed.close()
        let poller = Poller()
        let index = poller.add(closed)
        #expect(try poller.poll(timeout: 10) == 0)
        #expect(!poller.isReadable(index))
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

    @Test func aMessageLeftUnreadIsReportedAgainWithoutWaiting() throws {
        // libzmq signals a socket's descriptor once per change: the poller must read ZMQ_EVENTS
        // before waiting, or a message seen once but not read would block the next poll.
        let pull = try Context.shared.socket(.pull)
        let push = try Context.shared.socket(.push)
        try push.connect(try bindEphemeral(pull))
        let poller = Poller()
        let index = poller.add(pull)
        try push.send([7])
        #expect(try poller.poll(timeout: 2000) == 1 && poller.isReadable(index))
        let started = ContinuousClock.now
        #expect(try poller.poll(timeout: 5000) == 1 && poller.isReadable(index))
        #expect(try poller.poll(timeout: -1) == 1 && poller.isReadable(index))
        #expect(ContinuousClock.now - started < .seconds(1))
        #expect(try pull.receive() == [7])
        #expect(try poller.poll(timeout: 0) == 0 && !poller.isReadable(index))
    }

    @Test func aSocketAndADescriptorReadyTogetherAreBothReported() throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]); close(fds[1]) }
        let pull = try Context.shared.socket(.pull)
        let push = try Context.shared.socket(.push)
        try push.connect(try bindEphemeral(pull))
        let poller = Poller()
        let socketIndex = poller.add(pull)
        let pipeIndex = poller.add(fileDescriptor: fds[0])
        try push.send([1])
        #expect(try poller.poll(timeout: 2000) >= 1)
        var byte: UInt8 = 1
        #expect(write(fds[1], &byte, 1) == 1)
        #expect(try poller.poll(timeout: 2000) == 2)
        #expect(poller.isReadable(socketIndex) && poller.isReadable(pipeIndex))
    }

    @Test func aHungUpPipeIsAnErrorNotReadable() throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]) }
        let poller = Poller()
        let index = poller.add(fileDescriptor: fds[0])
        close(fds[1])
        #expect(try poller.poll(timeout: 1000) == 1)
        #expect(!poller.isReadable(index) && !poller.isWritable(index))
    }

    @Test func aWaitLastsItsTimeout() throws {
        let pull = try Context.shared.socket(.pull)
        _ = try bindEphemeral(pull)
        let poller = Poller()
        poller.add(pull)
        let started = ContinuousClock.now
        #expect(try poller.poll(timeout: 120) == 0)
        let waited = ContinuousClock.now - started
        #expect(waited >= .milliseconds(115) && waited < .seconds(2), "waited \(waited)")
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
