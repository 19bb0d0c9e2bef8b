import Foundation
import NetplayService
import NetplayTestSupport
import Testing

@Suite("Free ports: picked by the kernel, checked before a cluster takes them", .ownThread)
struct FreePortTests {
    /// Binds `port` on loopback over TCP or UDP and keeps it bound for `body`.
    func holding<T>(_ port: Int, udp: Bool = false, _ body: () -> T) throws -> T {
        let fd = socket(AF_INET, Int32(udp ? SOCK_DGRAM.rawValue : SOCK_STREAM.rawValue), 0)
        try #require(fd >= 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(bound == 0, "could not bind \(port)")
        return body()
    }

    @Test func aPickedPortIsFreeUntilSomeoneBindsIt() throws {
        let port = try #require(FreePort.tcp())
        #expect((1...65535).contains(port))
        #expect(FreePort.isFree(port))
        #expect(try holding(port) { FreePort.isFree(port) } == false)
        #expect(FreePort.isFree(port), "free again once the holder closed it")
    }

    @Test func tcpAndUDPAreCheckedApart() throws {
        let port = try #require(FreePort.tcp())
        #expect(try holding(port, udp: true) { (tcp: FreePort.isFree(port), udp: FreePort.isFree(port, udp: true)) } == (true, false))
    }

    @Test func impossiblePortsAndAddressesAreNeverFree() {
        #expect(!FreePort.isFree(0))
        #expect(!FreePort.isFree(70_000))
        #expect(!FreePort.isFree(-1))
        #expect(!FreePort.isFree(7100, on: "not an address"))
        #expect(FreePort.tcp(on: "not an address") == nil)
        #expect(FreePort.tcp(on: "192.0.2.1") == nil, "an address this machine does not have")
    }

    @Test func aClusterOffsetFreesTheWholeDesignTable() throws {
        let offset = ClusterPorts.freeOffset()
        #expect(offset % 100 == 0 && offset + 9400 < 32768, "below the ephemeral range")
        #expect(ClusterPorts.designPorts.allSatisfy { FreePort.isFree($0 + offset) })
    }
}
