import ArgumentParser

/// `netplay-bench`: prints the toolkit's performance figures. `make bench` runs every
/// subcommand in a release build; each prints a small table of figures beside its target.
@main
struct NetplayBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "netplay-bench",
        abstract: "Measure the toolkit's hot paths and print the figures.",
        subcommands: [ZeroMQBenchmark.self, RollbackBenchmark.self, LibretroBenchmark.self, ControlPlaneBenchmark.self, ClusterBenchmark.self, RelayBenchmark.self, WANBenchmark.self, RetroArchBenchmark.self]
    )
}
