import Foundation
import InputSync
import Logging
import NetplayAuth
import NetplayLAN
import NetplayService
import NetplayWire
import Synchronization


/// The LAN beacon as NetplayKit uses it: one UDP datagram holding an Envelope with a `LanBeacon`
/// body, sent by a LAN host once per interval and heard by browsers (and by netplay-discovery) on
/// the beacon port. The protocol itself (port, size limit, codec, sockets) is `NetplayLAN`'s,
/// shared with netplay-discovery; this adds NetplayKit's errors and rooms.
public enum LanBeacon {
    /// The default beacon port.
    public static let defaultPort: UInt16 = LanBeaconCodec.defaultPort

    /// Sends one beacon datagram to `host:port` (a broadcast address by default).
    public static func send(_ beacon: NetplayWire.LanBeacon, to host: String = "255.255.255.255",
                            port: UInt16 = defaultPort) throws {
        let bytes: [UInt8]
        do { bytes = try LanBeaconCodec.encode(beacon) } catch {
            throw NetplayError(.badRequest, "A LAN beacon must be at most \(LanBeaconCodec.maxDatagram) bytes and valid: \(error)")
        }
        guard let ip = UDPAddress.parseIP(host) else { throw NetplayError(.badRequest, "'\(host)' is not an IPv4 address") }
        let socket: UDPSocket
        do { socket = try UDPSocket(port: 0, broadcast: true) } catch {
            throw NetplayError(.unavailable, "cannot open a UDP socket: \(error)")
        }
        guard socket.send(bytes, to: UDPAddress(ip: ip, port: port)) else {
            throw NetplayError(.unavailable, "the beacon was not sent (errno \(errno))")
        }
    }

    /// Listens on `port` for `milliseconds` and returns the rooms heard (newest beacon per host;
    /// hosts that said goodbye are left out).
    public static func listen(port: UInt16 = defaultPort, milliseconds: Int) throws -> [NetplayRoom] {
        let beacons: [NetplayWire.LanBeacon]
        do { beacons = try LanBeaconListener.listen(port: port, milliseconds: milliseconds) } catch {
            throw NetplayError(.unavailable, "cannot listen on UDP port \(port): \(error)")
        }
        return beacons.compactMap(\.room).map { NetplayRoom($0) }.sorted { $0.roomName < $1.roomName }
    }

    /// The first up, non-loopback IPv4 address of this machine, or nil.
    public static func lanAddress() -> String? {
        UDPSocket.lanAddress()
    }
}

/// A LAN room hosted by this process: the InputSync relay runs in-process (bound on the LAN
/// interface), admits joiners itself (content, password, slots; tickets signed with a secret
/// generated for this room) and is announced by the LAN beacon. No cluster is needed.
public final class LanHost: Sendable {
    /// The host's own admission (in ``NetplaySettings/hostSlot``).
    public let admission: Admission
    /// The room as announced.
    public let room: NetplayWire.Room
    /// Where joiners attach.
    public let endpoint: String
    private let relay: RunningService
    let lanAdmission: LanAdmission
    /// The secret the room's tickets are signed with, generated for this room.
    let keyRing: TicketKeyRing
    private let stopBeacon = StopFlag()
    private let beaconDone = DispatchSemaphore(value: 0)

    /// Starts hosting: binds the relay on `bindAddress` (port 0: any free port), advertises it as
    /// `advertiseAddress` (default: this machine's LAN address) and sends beacons to
    /// `beaconHost:beaconPort` every `beaconIntervalMs`. `admissionLimits` are the joins' limits
    /// (password attempts, the time a joiner has to attach); `configureRelay` adjusts the
    /// in-process relay's configuration (history length, timeouts) before it starts.
    public init(settings: NetplaySettings, content: ContentInfo, inputSize: Int, hostName: String,
                bindAddress: String = "0.0.0.0", advertiseAddress: String? = nil, port: Int = 0,
                beaconHost: String = "255.255.255.255", beaconPort: UInt16 = LanBeacon.defaultPort,
                beaconIntervalMs: Int = 1_000, inspectableBy trustStore: URL? = nil,
                admissionLimits: AdmissionPolicy.Limits = AdmissionPolicy.Limits(),
                configureRelay: (inout RelayConfiguration) -> Void = { _ in }) throws {
        if let problem = settings.validationError(inputSize: inputSize) { throw NetplayError(.badRequest, problem) }
        // Checked here in bytes, as the wire counts: a name of 22 CJK characters passed a cut by
        // characters and failed later as INTERNAL ("ticket could not be signed").
        guard (1 ... 64).contains(hostName.utf8.count) else {
            throw NetplayError(.badRequest, "The host name must be 1 to 64 bytes of UTF-8, got \(hostName.utf8.count).")
        }
        // A negative interval trapped the beacon thread; one over a minute was never sent.
        guard (100 ... 60_000).contains(beaconIntervalMs) else {
            throw NetplayError(.badRequest, "The beacon interval must be 100 to 60000 ms, got \(beaconIntervalMs).")
        }
        let advertised = advertiseAddress ?? LanBeacon.lanAddress() ?? "127.0.0.1"
        guard let chosenPort = port > 0 ? port : FreePort.tcp(on: bindAddress == "0.0.0.0" ? advertised : bindAddress) else {
            throw NetplayError(.unavailable, "no free TCP port on \(bindAddress)")
        }
        let sessionId = "lan-" + UUID().uuidString.prefix(8).lowercased()
        endpoint = "tcp://\(advertised):\(chosenPort)"
        var sessionSettings = settings.sessionSettings(content: content, inputSize: inputSize, lanEndpoint: endpoint)
        sessionSettings.transport = .lan
        try NetplayError.requireWireFit(sessionSettings, "room (its settings and content)")
        var relayConfiguration = RelayConfiguration(relayId: "", advertisedEndpoint: endpoint)
        relayConfiguration.maxSessions = 1
        configureRelay(&relayConfiguration)
        if let problem = relayConfiguration.validationError() { throw NetplayError(.badRequest, "relay: \(problem)") }
        // The room's tickets must live no longer than its relay takes them.
        let ticketLifetimeMs = relayConfiguration.maxTicketLifetimeMs
        guard admissionLimits.pendingJoinTimeoutMs <= ticketLifetimeMs else {
            throw NetplayError(.badRequest, "admission: the pending-join timeout (\(admissionLimits.pendingJoinTimeoutMs) ms) "
                               + "is longer than the relay takes a ticket to live (\(ticketLifetimeMs) ms)")
        }
        let keyRing = TicketKeyRing.generate()
        self.keyRing = keyRing
        let lanAdmission = LanAdmission(sessionId: sessionId, settings: sessionSettings, relayEndpoint: endpoint, keyRing: keyRing,
                                        ticketTtlMs: min(600_000, ticketLifetimeMs), limits: admissionLimits)
        self.lanAdmission = lanAdmission
        var service = ServiceConfiguration(kind: "sync", instance: "lan-\(chosenPort)",
                                           endpoint: "tcp://\(bindAddress):\(chosenPort)", logLevel: .warning,
                                           dataDirectory: FileManager.default.temporaryDirectory
                                               .appendingPathComponent("netplay-lan-\(chosenPort)"))
        service.metricsInterval = 3600
        service.guardsUnreadReplies = false  // a relay, as netplay-sync: state chunks may exceed the guard's share
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
            let seat = try lanAdmission.hostTicket(name: hostName, slot: settings.hostSlot)
            admission = Admission(ticket: seat.ticket, relayEndpoint: endpoint, participantToken: seat.participantToken)
        } catch {
            relay.stop()
            throw NetplayError(error.code, error.message)
        }
        room = NetplayWire.Room(roomId: sessionId, sessionId: sessionId, hostName: hostName,
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
        let room = self.room
        let lanAdmission = self.lanAdmission
        let stop = self.stopBeacon
        let done = self.beaconDone
        Thread.detachNewThread {
            // No sender (the beacon host is not an IPv4 address, no socket): the room is simply not announced.
            let sender = UDPAddress.parseIP(host).flatMap { ip in
                try? LanBeaconSender(room: room, intervalMs: UInt32(intervalMs), targets: [UDPAddress(ip: ip, port: port)],
                                     beaconId: UUID().uuidString)
            }
            while true {
                let stopping = stop.isSet
                if let sender {
                    let (players, spectators) = lanAdmission.occupancy
                    sender.room.currentPlayers = UInt32(min(players, 8))
                    sender.room.currentSpectators = UInt32(min(spectators, 64))
                    sender.room.inProgress = lanAdmission.inProgress
                    _ = try? sender.send(goodbye: stopping)
                }
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
