import Foundation
import Testing
@testable import Supervisor
import NetplayTestSupport

/// How a child is started, in this process: what it inherits.
@Suite("Spawning a child", .ownThread)
struct SpawnTests {
    /// Descriptors the supervisor inherited without close-on-exec (a wrapper's lock, a harness's
    /// pipe) reached every service; a child now gets 0, 1 and 2 only.
    @Test func aChildInheritsNoDescriptorButItsStandardOnes() throws {
        let leaked = open("/dev/null", O_RDONLY)  // no O_CLOEXEC, as a parent may hand one down
        try #require(leaked > 2)
        defer { close(leaked) }
        let plan = LaunchPlan(service: "probe", instance: "probe", replica: 0, executable: "/bin/sh",
                              arguments: ["-c", "for f in /proc/$$/fd/*; do echo \"${f##*/}\"; done"], environment: [:], endpoint: nil)
        let child = try ChildProcess.spawn(plan)
        defer { close(child.output) }
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            let count = read(child.output, &buffer, buffer.count)
            if count > 0 { output += buffer[0 ..< count] } else if count == 0 { break } else { usleep(10_000) }
        }
        var status: Int32 = 0
        waitpid(child.pid, &status, 0)
        let descriptors = String(decoding: output, as: UTF8.self).split(separator: "\n").compactMap { Int32($0) }
        #expect(descriptors.contains(1) && !descriptors.contains(leaked), "the child's descriptors: \(descriptors), leaked \(leaked)")
    }
}
