import ArgumentParser
import InputSync
import NetplayService

/// `netplay-sync`: one relay replica (the input-sync data plane). Thin: flags over `InputSync`.
@main
struct NetplaySync: NetplayCommand {
    static let configuration = CommandConfiguration(
        commandName: "netplay-sync",
        abstract: "The relay: admits peers with join tickets, forwards and confirms inputs, substitutes late ones, resyncs desyncs, serves spectators and writes replays.")

    @OptionGroup var common: ServiceOptions
    @OptionGroup var sync: SyncOptions

    func run() throws {
        let resolved = try sync.resolve(common: common)
        try ServiceHost.runMain(configuration: resolved.service) {
            RelayService(configuration: resolved.relay, keyRing: resolved.keyRing, coordinator: resolved.coordinator,
                         retroArch: resolved.retroArch)
        }
    }
}
