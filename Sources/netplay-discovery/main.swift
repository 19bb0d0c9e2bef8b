import ArgumentParser
import Discovery
import NetplayService

/// `netplay-discovery`: the room registry and LAN discovery service.
@main
struct DiscoveryCommand: NetplayCommand {
    static let configuration = CommandConfiguration(
        commandName: "netplay-discovery",
        abstract: "Room registry with TTLs, filters, paging and watch; LAN beacon and RetroArch LAN discovery.",
        discussion: "Events on the PUB socket: rooms.added, rooms.updated, rooms.removed, rooms.sync. See docs/discovery.md.",
        version: NetplayVersion.current)

    @OptionGroup var common: ServiceOptions
    @OptionGroup var discovery: DiscoveryOptions

    func run() throws {
        let service = try common.resolve(defaults: .discovery)
        let settings = try discovery.resolve()
        try ServiceHost.runMain(configuration: service) { DiscoveryService(configuration: settings) }
    }
}
