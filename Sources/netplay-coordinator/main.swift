import ArgumentParser
import Coordinator
import NetplayService

/// `netplay-coordinator`: sessions, checks, relay registry and join tickets, in SQLite.
@main
struct CoordinatorCommand: NetplayCommand {
    static let configuration = CommandConfiguration(
        commandName: "netplay-coordinator",
        abstract: "Session lifecycle, checks, relay registry and signed join tickets, durable in SQLite.",
        discussion: "Events on the PUB socket: sessions.<kind> and relays.<kind>. See docs/coordinator.md.",
        version: NetplayVersion.current)

    @OptionGroup var common: ServiceOptions
    @OptionGroup var coordinator: CoordinatorOptions

    func run() throws {
        let service = try common.resolve(defaults: .coordinator)
        let settings = try coordinator.resolve()
        try ServiceHost.runMain(configuration: service) { CoordinatorService(configuration: settings) }
    }
}
