import Foundation

/// The repository's NES test program (Tests/Fixtures/nes/netplay_test.s and its linker
/// configuration), assembled with cc65 at run time so no ROM is ever committed. Tests,
/// benchmarks and the WAN harness all build it through here.
public enum NESTestProgram {
    /// Tests/Fixtures/nes in the checkout this code was built from (this file is
    /// Sources/SystemTools/NESTestProgram.swift).
    public static var fixturesDirectory: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Tests/Fixtures/nes").path
    }

    /// Assembles and links the program into the iNES file `output`; throws ``CC65/BuildError``
    /// when cc65 is missing or fails.
    public static func build(output: String) throws {
        let fixtures = fixturesDirectory
        try CC65.build(source: fixtures + "/netplay_test.s", linkerConfig: fixtures + "/netplay_test.cfg", output: output)
    }
}
