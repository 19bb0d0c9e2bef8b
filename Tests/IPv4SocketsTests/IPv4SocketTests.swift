#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IPv4Sockets
import NetplayTestSupport
import Testing

@Suite("IPv4Socket: binding listeners and probes", .ownThread)
struct IPv4SocketTests {
    @Test func aListenerOnPortZeroGetsAPortThatTakesConnections() throws {
        let listener = try IPv4Socket.bound(.stream, host: "127.0.0.1", port: 0, listenBacklog: 4)
        defer { close(listener.descriptor) }
        #expect(listener.port != 0)
        let local = try #require(IPv4Socket.localAddress(of: listener.descriptor))
        #expect(IPv4Socket.parts(of: local) == (0x7F00_0001, listener.port))

        let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(client) }
        let address = try #require(IPv4Socket.address(host: "127.0.0.1", port: listener.port))
        #expect(IPv4Socket.withSocketAddress(address) { connect(client, $0, $1) } == 0, "\(IPv4Socket.lastErrorText())")
    }

    @Test func aTakenPortIsABindErrorWithTheSystemsReasonAndLeavesNothingOpen() throws {
        let first = try IPv4Socket.bound(.stream, host: "127.0.0.1", port: 0, listenBacklog: 4)
        defer { close(first.descriptor) }
        let error = #expect(throws: IPv4SocketError.self) {
            try IPv4Socket.bound(.stream, host: "127.0.0.1", port: first.port, listenBacklog: 4)
        }
        #expect(error?.step == .bind && error?.reason == String(cString: strerror(EADDRINUSE)))
        // 2,000 more failures: a socket left open by each would show (other suites in this process
        // open a hundred or two meanwhile, not thousands).
        let before = openDescriptors()
        for _ in 0 ..< 2_000 { _ = try? IPv4Socket.bound(.stream, host: "127.0.0.1", port: first.port, listenBacklog: 4) }
        #expect(openDescriptors() - before < 1_000, "the failed sockets were not closed")
    }

    @Test func aHostThatIsNoIPv4AddressIsSaidSo() {
        for host in ["localhost", "::1", "300.1.1.1", ""] {
            let error = #expect(throws: IPv4SocketError.self) { try IPv4Socket.bound(.datagram, host: host, port: 0) }
            #expect(error?.step == .address && error?.description == "'\(host)' is not an IPv4 address")
        }
    }

    @Test func sharedUDPSocketsBindOnePortAndOptionsAreSet() throws {
        let first = try IPv4Socket.bound(.datagram, host: "127.0.0.1", port: 0, reuseAddress: true, reusePort: true,
                                         broadcast: true, nonBlocking: true)
        defer { close(first.descriptor) }
        let second = try IPv4Socket.bound(.datagram, host: "127.0.0.1", port: first.port, reuseAddress: true, reusePort: true)
        defer { close(second.descriptor) }
        #expect(second.port == first.port)
        #expect(fcntl(first.descriptor, F_GETFL) & O_NONBLOCK != 0)
        #expect(fcntl(second.descriptor, F_GETFL) & O_NONBLOCK == 0)
        #expect(fcntl(first.descriptor, F_GETFD) & FD_CLOEXEC != 0, "children must not inherit it")
        #expect(option(first.descriptor, SO_BROADCAST) == 1 && option(second.descriptor, SO_BROADCAST) == 0)
        #expect(throws: IPv4SocketError.self, "an unshared bind of the port is refused") {
            let third = try IPv4Socket.bound(.datagram, host: "127.0.0.1", port: first.port)
            close(third.descriptor)
        }
    }

    private func option(_ descriptor: Int32, _ name: Int32) -> Int32 {
        var value: Int32 = -1
        var length = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(descriptor, SOL_SOCKET, name, &value, &length)
        return value
    }

    private func openDescriptors() -> Int {
        (0 ..< 8192).filter { fcntl(Int32($0), F_GETFD) != -1 }.count
    }
}
