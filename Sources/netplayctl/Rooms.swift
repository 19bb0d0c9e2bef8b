import ArgumentParser
import Discovery
import Foundation
import NetplayService
import NetplayWire

/// Which discovery to talk to: `--discovery` (service name or endpoint, env NETPLAY_DISCOVERY)
/// and, for watching, `--events` (its PUB; derived from the service name, or port + 1).
struct DiscoveryTarget: ParsableArguments {
    @Option(help: ArgumentHelp("Discovery's request endpoint or service name (env NETPLAY_DISCOVERY, default discovery).", valueName: "endpoint"))
    var discovery: String?

    @Option(help: ArgumentHelp("Discovery's events endpoint (env NETPLAY_DISCOVERY_EVENTS, default: the service's, or the request port + 1).", valueName: "endpoint"))
    var events: String?

    /// `--discovery`, else NETPLAY_DISCOVERY, else the service's name.
    var target: String { SettingResolver().text(discovery, "NETPLAY_DISCOVERY") ?? "discovery" }

    var requests: String {
        get throws { try ServiceAddress.requests(target) }
    }

    var eventsEndpoint: String {
        get throws {
            if let events = SettingResolver().text(events, "NETPLAY_DISCOVERY_EVENTS") { return try ServiceAddress.events(events) }
            if ServiceAddress.defaults(target) != nil { return try ServiceAddress.events(target) }
            return try ServiceAddress.nextPort(of: try requests)
        }
    }
}

/// Room filter flags shared by `rooms list` and `rooms watch`.
struct RoomFilterOptions: ParsableArguments {
    @Option(help: "Case-insensitive substring of the game name.") var game: String?
    @Option(help: "Exact core id.") var core: String?
    @Option(help: "Exact content CRC32 (hex).") var crc: String?
    @Option(help: "Exact content MD5 (32 hex digits).") var md5: String?
    @Flag(help: "Only rooms with a free player slot.") var freeSlot = false
    @Flag(help: "Only rooms without a play password.") var noPassword = false
    @Option(help: "lan or relay.") var transport: String?
    @Option(help: "Exact region.") var region: String?
    @Option(help: "Exact system, e.g. nes.") var system: String?
    @Flag(help: "Include rooms whose match already started.") var inProgress = false
    @Option(help: "lobby, lan (beacon), retroarch (RetroArch hosts on the LAN) or retroarch-relay (RetroArch hosts on our relays).") var source: String?

    func filter() throws -> RoomFilter {
        var filter = RoomFilter(gameName: game ?? "", coreId: core ?? "", hasFreeSlot: freeSlot, noPassword: noPassword,
                                region: region ?? "", system: system ?? "", includeInProgress: inProgress)
        if let crc { filter.crc32 = try ContentOptions.crc32(crc) }
        if let md5 { filter.md5 = try ContentOptions.md5(md5) }
        switch transport?.lowercased() {
        case nil: break
        case "lan": filter.transport = .lan
        case "relay": filter.transport = .relay
        default: throw ValidationError("--transport must be lan or relay")
        }
        switch source?.lowercased() {
        case nil: break
        case "lobby": filter.source = .lobby
        case "lan", "beacon": filter.source = .lanBeacon
        case "retroarch": filter.source = .retroarchLan
        case "retroarch-relay": filter.source = .retroarchRelay
        default: throw ValidationError("--source must be lobby, lan, retroarch or retroarch-relay")
        }
        return filter
    }
}

extension ServiceAddress {
    /// `tcp://host:port` → `tcp://host:port+1` (the default layout: events beside requests).
    static func nextPort(of endpoint: String) throws -> String {
        guard let events = ServiceDefaults.events(besideRequests: endpoint) else {
            throw ValidationError("cannot derive the events endpoint from \(endpoint); pass --events")
        }
        return events
    }
}

/// One line describing a room.
func describe(_ room: Room) -> String {
    let content = room.contentInfo
    let players = room.maxPlayers == 0 ? "\(room.currentPlayers)/?" : "\(room.currentPlayers)/\(room.maxPlayers)"
    var flags: [String] = [room.transport == .lan ? "LAN" : "relay"]
    if room.hasPassword { flags.append("password") }
    if room.inProgress { flags.append("in-progress") }
    if room.spectatorsAllowed { flags.append("spectators \(room.currentSpectators)/\(room.maxSpectators)") }
    if !room.retroarchJoin.isEmpty { flags.append("retroarch --connect \"\(room.retroarchJoin)\"") }
    let crc = String(format: "%08X", content.crc32)
    return "\(room.roomId)  \"\(ControlCharacters.escaped(content.gameName, quotes: true))\"  players \(players)  host \"\(ControlCharacters.escaped(room.hostName, quotes: true))\"  core \(content.coreId) \(content.coreVersion)  crc \(crc)  \(flags.joined(separator: ", "))  [\(room.source.shortName)]"
}

extension Netplayctl {
    /// `netplayctl rooms ...`.
    struct Rooms: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List or watch discovery's rooms.",
            subcommands: [List.self, Watch.self])

        /// `netplayctl rooms list`.
        struct List: ParsableCommand {
            static let configuration = CommandConfiguration(abstract: "List rooms matching a filter, a page at a time.")

            @OptionGroup var target: DiscoveryTarget
            @OptionGroup var filters: RoomFilterOptions
            @Option(help: "Rooms per page (1 to 500).") var pageSize = 100
            @Flag(help: "Fetch every page, not just the first.") var all = false
            @Flag(help: "Print one JSON object per room.") var json = false
            @OptionGroup var connection: ConnectionOptions

            func run() throws {
                guard (1...500).contains(pageSize) else { throw ValidationError("--page-size must be from 1 to 500") }
                let client = try connection.client(for: try target.requests)
                var token = ""
                var shown = 0
                var total: UInt32 = 0
                var walk = PageWalk(listing: "the rooms listing")
                repeat {
                    // Discovery limits an address's reads: `--all` over a large lobby waits its turn.
                    let reply = try client.pacedRead(.listRoomsRequest(ListRoomsRequest(filter: try filters.filter(),
                                                                                        pageSize: UInt32(pageSize), pageToken: token)))
                    guard case .listRoomsResponse(let page) = reply else { throw ClientError.unexpectedReply(reply.name) }
                    for room in page.rooms { if json { emitJSON(room.jsonLine()) } else { emit(describe(room)) } }
                    shown += page.rooms.count
                    total = page.totalMatching
                    token = all ? try walk.next(after: page.rooms.count, nextToken: page.nextPageToken) : ""
                } while !token.isEmpty
                if !json { emit("\(shown) of \(total) matching rooms") }
            }
        }

        /// `netplayctl rooms watch`.
        struct Watch: ParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Print matching rooms, then every change (snapshot then updates; never misses or double-counts).")

            @OptionGroup var target: DiscoveryTarget
            @OptionGroup var filters: RoomFilterOptions
            @OptionGroup var limits: StreamLimits
            @Flag(help: "Print one JSON object per change: {\"change\":...,\"room\":{...}}.") var json = false
            @OptionGroup var connection: ConnectionOptions

            func run() throws {
                let watcher = try RoomWatchClient(requests: try target.requests, events: try target.eventsEndpoint,
                                                  filter: try filters.filter(), timeout: try connection.resolvedTimeout(),
                                                  serverKey: try connection.serverKey())
                var stop = limits.start()
                for update in try watcher.start() { show(render(update, snapshot: true)) }
                if !json { emit("-- \(watcher.state.rooms.count) rooms; watching for changes") }
                while stop.goesOn {
                    for update in try watcher.next(timeout: stop.waitMs(cap: 500)) {
                        show(render(update, snapshot: false))
                        stop.seen += 1
                    }
                }
            }

            func show(_ line: String) { if json { emitJSON(line) } else { emit(line) } }

            func render(_ update: RoomWatchState.Update, snapshot: Bool) -> String {
                switch update {
                case .added(let room):
                    let change = snapshot ? "present" : "added"
                    return json ? "{\"change\":\"\(change)\",\"room\":\(room.jsonLine())}" : "\(change) \(describe(room))"
                case .updated(let room):
                    return json ? "{\"change\":\"updated\",\"room\":\(room.jsonLine())}" : "updated \(describe(room))"
                case .removed(let id, let reason):
                    let why = reason.shortName
                    return json ? "{\"change\":\"removed\",\"roomId\":\(JSONValue.string(id).rendered()),\"reason\":\"\(why)\"}"
                                : "removed \(id) (\(why))"
                }
            }
        }
    }
}
