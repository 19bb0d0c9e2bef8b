import Foundation
import InputSync
import Logging
import NetplayAuth
import NetplayService
import NetplayWire
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The LAN beacon: one UDP datagram holding an Envelope with a `LanBeacon` body, sent by a LAN
/// host once per interval and heard by browsers (and by netplay-discovery) on the beacon port.
public enum LanBeacon {
    /// The default beacon port.
    public static let defaultPort: UInt16 = 7102

    /// Sends one beacon datagram to `host:port` (a broadcast address by default).
    public static func send(_ beacon: NetplayWire.LanBeacon, to host: String = "255.255.255.255",
                            port: UInt16 = defaultPort) throws {
        let bytes = try Envelope(body: .lanBeacon(beacon)).encoded()
        guard bytes.count < 1200 else { throw NetplayError(.badRequest, "A LAN beacon must stay under 1200 bytes.") }
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { throw NetplayError(.unavailable, "cannot open a UDP socket") }
        defer { close(fd) }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_BROADCAST, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else {
            throw NetplayError(.badRequest, "'\(host)' is not an IPv4 address")
        }
        let sent = bytes.withUnsafeBytes { raw in
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, raw.baseAddress, raw.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        guard sent == bytes.count else { throw NetplayError(.unavailable, "the beacon was not sent (errno \(errno))") }
    }

    /// Listens on `port` for `milliseconds` and returns the rooms heard (newest beacon per host;
    /// hosts that said goodbye are left out).
    public static func listen(port: UInt16 = defaultPort, milliseconds: Int) throws -> [NetplayRoom] {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { throw NetplayError(.unavailable, "cannot open a UDP socket") }
        defer { close(fd) }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = INADDR_ANY
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { throw NetplayError(.unavailable, "cannot listen on UDP port \(port) (errno \(errno))") }
        var rooms: [String: (sequence: UInt64, room: NetplayWire.Room, goodbye: Bool)] = [:]
        let deadline = ContinuousClock.now + .milliseconds(milliseconds)
        var buffer = [UInt8](repeating: 0, count: 2048)
        while ContinuousClock.now < deadline {
            let left = deadline - ContinuousClock.now
            let waitMs = Int32(max(1, left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000))
            var item = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&item, 1, waitMs) > 0 else { continue }
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0, let envelope = try? Envelope(decoding: Array(buffer[0 ..< count])),
                  case .lanBeacon(let beacon) = envelope.body, let room = beacon.room else { continue }
            if let known = rooms[beacon.beaconId], known.sequence > beacon.sequence { continue }
            rooms[beacon.beaconId] = (beacon.sequence, room, beacon.goodbye)
        }
        return rooms.values.filter { !$0.goodbye }.map { NetplayRoom($0.room) }.sorted { $0.roomName < $1.roomName }
    }

    /// The first up, non-loopback IPv4 address of this machine, or nil.
    public static func lanAddress() -> String? {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return nil }
        defer { freeifaddrs(list) }
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            defer { cursor = entry.pointee.ifa_next }
            let flags = Int32(entry.pointee.ifa_flags)
            guard let addr = entry.pointee.ifa_addr, addr.pointee.sa_family == sa_family_t(AF_INET),
                  flags & Int32(IFF_UP) != 0, flags & Int32(IFF_LOOPBACK) == 0 else { continue }
            var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            if getnameinfo(addr, socklen_t(MemoryLayout<sockaddr_in>.size), &host, socklen_t(host.count), nil, 0,
                           NI_NUMERICHOST) == 0 {
                let bytes = host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
                return String(decoding: bytes, as: UTF8.self)
            }
        }
        return nil
    }

}

/// A LAN room hosted by this process: the InputSync relay runs in-process (bound on the LAN
/// interface), admits joiners itself (content, password, slots; tickets signed with a secret
/// generated for this room) and is announced by the LAN beacon. No cluster is needed.
public final class LanHost: Sendable {
    /// The host's own admission (slot 1).
    public let admission: Admission
    /// The room as announced.
    public let room: NetplayWire.Room
    /// Where joiners attach.
    public let endpoint: String
    private let relay: RunningService
    private let lanAdmission: LanAdmission
    private let stopBeacon = StopFlag()
    private let beaconDone = DispatchSemaphore(value: 0)

    /// Starts hosting: binds the relay on `bindAddress` (port 0: any free port), advertises it as
    /// `advertiseAddress` (default: this machine's LAN address) and sends beacons to
    /// `beaconHost:beaconPort` every `beaconIntervalMs`. `configureRelay` adjusts the in-process
    /// relay's configuration (history length, timeouts) before it starts.
    public init(settings: NetplaySettings, content: ContentInfo, inputSize: Int, hostName: String,
                bindAddress: String = "0.0.0.0", advertiseAddress: String? = nil, port: Int = 0,
                beaconHost: String = "255.255.255.255", beaconPort: UInt16 = LanBeacon.defaultPort,
                beaconIntervalMs: Int = 1_000, inspectableBy trustStore: URL? = nil,
                configureRelay: (inout RelayConfiguration) -> Void = { _ in }) throws {
        if let problem = settings.validationError(inputSize: inputSize) { throw NetplayError(.badRequest, problem) }
        let advertised = advertiseAddress ?? LanBeacon.lanAddress() ?? "127.0.0.1"
        guard let chosenPort = port > 0 ? port : FreePort.tcp(on: bindAddress == "0.0.0.0" ? advertised : bindAddress) else {
            throw NetplayError(.unavailable, "no free TCP port on \(bindAddress)")
        }
        let sessionId = "lan-" + UUID().uuidString.prefix(8).lowercased()
        endpoint = "tcp://\(advertised):\(chosenPort)"
        var sessionSettings = settings.sessionSettings(content: content, inputSize: inputSize, lanEndpoint: endpoint)
        sessionSettings.transport = .lan
        let keyRing = TicketKeyRing.generate()
        let lanAdmission = LanAdmission(sessionId: sessionId, settings: sessionSettings, relayEndpoint: endpoint, keyRing: keyRing)
        self.lanAdmission = lanAdmission
        var relayConfiguration = RelayConfiguration(relayId: "", advertisedEndpoint: endpoint)
        relayConfiguration.maxSessions = 1
        configureRelay(&relayConfiguration)
        if let problem = relayConfiguration.validationError() { throw NetplayError(.badRequest, "relay: \(problem)") }
        var service = ServiceConfiguration(kind: "sync", instance: "lan-\(chosenPort)",
                                           endpoint: "tcp://\(bindAddress):\(chosenPort)", logLevel: .warning,
                                           dataDirectory: FileManager.default.temporaryDirectory
                                               .appendingPathComponent("netplay-lan-\(chosenPort)"))
        service.metricsInterval = 3600
        if let trustStore {
            // Operators of that store may inspect the relay (netplayctl) on a loopback-only control endpoint.
            service.trustStore = trustStore
            service.control = "tcp://127.0.0.1:*"
        }
        let relayConfig = relayConfiguration
        var logger = Logger(label: "netplay.lan-relay")
        logger.logLevel = .warning
        relay = try ServiceHost.start(configuration: service, logger: logger) {
            RelayService(configuration: relayConfig, keyRing: keyRing, lanAdmission: lanAdmission)
        }
        do {
            let ticket = try lanAdmission.hostTicket(name: hostName)
            admission = Admission(ticket: ticket, relayEndpoint: endpoint)
        } catch {
            relay.stop()
            throw NetplayError(error.code, error.message)
        }
        room = NetplayWire.Room(roomId: sessionId, sessionId: sessionId, hostName: String(hostName.prefix(64)),
                                roomName: settings.roomName, content: content, maxPlayers: UInt32(settings.maxPlayers),
                                currentPlayers: 1, spectatorsAllowed: settings.allowSpectators,
                                maxSpectators: UInt32(settings.allowSpectators ? settings.maxSpectators : 0),
                                hasPassword: settings.password?.isEmpty == false,
                                hasSpectatePassword: settings.spectatePassword?.isEmpty == false,
                                frameDelay: UInt32(settings.frameDelay), transport: .lan, hostEndpoint: endpoint,
                                source: .lanBeacon, hostVersion: "NetplayKit \(NetplayVersion.current)")
        startBeacon(host: beaconHost, port: beaconPort, intervalMs: beaconIntervalMs)
    }

    private func startBeacon(host: String, port: UInt16, intervalMs: Int) {
        let beaconId = UUID().uuidString
        let room = self.room
        let lanAdmission = self.lanAdmission
        let stop = self.stopBeacon
        let done = self.beaconDone
        Thread.detachNewThread {
            var sequence: UInt64 = 0
            while true {
                let stopping = stop.isSet
                sequence += 1
                var current = room
                let (players, spectators) = lanAdmission.occupancy
                current.currentPlayers = UInt32(min(players, 8))
                current.currentSpectators = UInt32(min(spectators, 64))
                current.inProgress = lanAdmission.inProgress
                try? LanBeacon.send(NetplayWire.LanBeacon(protocolVersion: 1, beaconId: beaconId, sequence: sequence,
                                                          intervalMs: UInt32(intervalMs), room: current, goodbye: stopping),
                                    to: host, port: port)
                if stopping { break }
                var slept = 0
                while slept < intervalMs && !stop.isSet {
                    usleep(20_000)
                    slept += 20
                }
            }
            done.signal()
        }
    }

    /// Stops announcing (a goodbye beacon goes out) and stops the relay.
    public func stop() {
        guard stopBeacon.setOnce() else { return }
        beaconDone.wait()
        relay.stop()
    }
}

/// A thread-safe flag set once.
final class StopFlag: Sendable {
    private let value = Mutex(false)
    var isSet: Bool { value.withLock { $0 } }
    /// Sets the flag; returns whether this call set it.
    func setOnce() -> Bool {
        value.withLock { flag in
            defer { flag = true }
            return !flag
        }
    }
}
