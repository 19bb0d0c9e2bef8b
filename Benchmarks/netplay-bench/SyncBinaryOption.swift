import ArgumentParser
import Foundation

/// `--sync-bin`: the netplay-sync a relay benchmark starts, by default the one built beside
/// netplay-bench.
struct SyncBinaryOption: ParsableArguments {
    @Option(help: "Path of netplay-sync (default: next to this executable).") var syncBin: String?

    /// The path to start: `--sync-bin`, or netplay-sync in this executable's directory.
    var path: String {
        syncBin ?? URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("netplay-sync").path
    }
}
