import Foundation
import NetplayTestSupport
import Testing

/// `netplay-peer demo` as a user runs it once it is installed: from PATH, in a directory of its
/// own. It started its cluster and its two peers from `argv[0]`, which from PATH is the bare name,
/// so it looked for them in the working directory and failed; it finds its own executable now.
@Suite("netplay-peer demo run from PATH", .ownThread)
struct DemoE2ETests {
    @Test func theDemoRunFromPathPlaysAMatchWhosePeersEndOnOneState() throws {
        let elsewhere = FileManager.default.temporaryDirectory.appendingPathComponent("netplay-demo-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: elsewhere) }
        let path = BuildProducts.directory.path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        let demo = try ServiceProcess(url: URL(fileURLWithPath: "/bin/sh"), [
            "-c", "cd '\(elsewhere.path)' && exec netplay-peer demo --own-cluster --frames 120 --rtt 20 --jitter 0 --loss 0 --render-every 0",
        ], environment: ["PATH": path])
        let status = demo.waitForExit(seconds: 120)
        demo.waitForOutputEnd()
        #expect(status == 0, "\(demo.log.suffix(3000))")
        #expect(demo.log.contains("both peers ended on the same state: checksum=0x"), "\(demo.log.suffix(3000))")
    }
}
