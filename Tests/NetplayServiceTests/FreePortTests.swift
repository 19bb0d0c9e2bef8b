import Foundation
import NetplayService
import NetplayTestSupport
import Testing

/// Other suites bind and release loopback ports all the time, so a port that was free a moment
/// ago may be taken by the time it is checked: what holds for any port is checked on ports this
/// test holds itself, and "a free port is free" is checked as "at least one of a few is".
@Suite("Free ports: picked by the kernel, checked before a cluster takes them", .ownThread)
struct FreePortTests {
    /// Binds a loopback socket (TCP or UDP) to `port` (0: one the kernel picks) and keeps it bound
    /// for `body`, which gets the bound port.
    func holding<T>(_ port: Int = 0, udp: Bool = false, _ body: (Int) -> T) throws -> T {
        let fd = socket(AF_INET, Int32(udp ? SOCK_DGRAM.rawValue : SOCK_STREAM.rawValue), 0)
        try #require(fd >= 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        try #require(bound == 0, "could not bind \(port)")
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return body(Int(UInt16(bigEndian: address.sin_port)))
    }

    /// Whether `check` holds in at least one of 20 tries.
    func inSomeTry(_ check: () throws -> Bool) rethrows -> Bool {
        for _ in 0..<20 where try check() { return true }
        return false
    }

    @Test func aPickedPortIsFreeUntilSomeoneBindsIt() throws {
        #expect(try holding { FreePort.isFree($0) } == false, "a bound port is never free")
        #expect(inSomeTry { FreePort.tcp().map { (1...65535).contains($0) && FreePort.isFree($0) } ?? false })
    }

    @Test func tcpAndUDPAreCheckedApart() throws {
        #expect(try holding(udp: true) { FreePort.isFree($0, udp: true) } == false, "a bound UDP port is busy over UDP")
        #expect(try inSomeTry { try holding(udp: true) { FreePort.isFree($0) } }, "a bound UDP port leaves TCP free")
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
        #expect(inSomeTry {
            let offset = ClusterPorts.freeOffset()
            defer { ClusterPorts.release(offset) }
            return offset % 100 == 0 && offset + 9400 < 32768 && ClusterPorts.designPorts.allSatisfy { FreePort.isFree($0 + offset) }
        })
    }

    /// Two clusters of one test run never share a port, even one that is free for a moment
    /// (its service killed to watch the restart): offsets 200 apart would.
    @Test func offsetsHandedOutShareNoPortUntilReleased() {
        let offsets = (0 ..< 6).map { _ in ClusterPorts.freeOffset() }
        defer { offsets.forEach(ClusterPorts.release) }
        for (index, offset) in offsets.enumerated() {
            for other in offsets[(index + 1)...] {
                #expect(ClusterPorts.ports(of: offset).isDisjoint(with: ClusterPorts.ports(of: other)), "\(offset) and \(other)")
            }
        }
    }
}
