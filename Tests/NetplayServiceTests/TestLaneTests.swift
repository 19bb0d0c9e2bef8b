import Foundation
import NetplayTestSupport
import Synchronization
import Testing

/// The test lanes every suite runs on (`OwnThreadTrait`): tests that block do not starve the
/// cooperative pool, free lanes are reused, and every suite uses them.
@Suite("Test lanes: blocking tests keep the cooperative pool free", .ownThread)
struct TestLaneTests {
    @Test func aTestThatBlocksItsLaneLeavesThePoolToTheTasksItWaitsFor() {
        // As many blocked lanes' worth of pool work as there are cores: were this test on a pool
        // thread, with the suite's other blocking tests on the rest, the tasks could not all run.
        let done = Recorder<Int>()
        let count = ProcessInfo.processInfo.activeProcessorCount + 2
        for number in 0..<count { Task { done.append(number) } }
        #expect(eventually(within: 10) { done.values.count == count })
        #expect(ThreadTaskExecutor.currentName?.hasPrefix("test-lane-") == true, "on \(ThreadTaskExecutor.currentName ?? "a pool thread")")
    }

    @Test func aFreeLaneIsReusedAndABusyOneNever() {
        let lanes = TestLanes()
        let first = lanes.take()
        let second = lanes.take()
        #expect(first !== second && lanes.count == 2)
        lanes.putBack(first)
        #expect(lanes.take() === first)
        #expect(lanes.count == 2)
    }

    @Test func everySuiteRunsOnLanes() throws {
        // A suite without the trait would put its tests back in the pool (see OwnThreadTrait).
        let tests = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        let files = FileManager.default.enumerator(atPath: tests.path)?.compactMap { $0 as? String } ?? []
        var missing: [String] = []
        var suites = 0
        for file in files where file.hasSuffix(".swift") && !file.hasPrefix("Support/") {
            let text = try String(contentsOf: tests.appendingPathComponent(file), encoding: .utf8)
            let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
            for (index, line) in lines.enumerated() where line.hasPrefix("@Suite") {
                suites += 1
                let declaration = lines[index...].prefix(3).joined(separator: " ")
                if !declaration.contains(".ownThread") { missing.append("\(file):\(index + 1)") }
            }
            let hasTests = text.contains("@Test")
            let topLevelSuite = lines.contains { $0.hasPrefix("@Suite") }
            let extendsASuite = lines.contains { $0.hasPrefix("extension ") }
            if hasTests && !topLevelSuite && !extendsASuite { missing.append("\(file): tests without a @Suite") }
        }
        #expect(suites > 100)
        #expect(missing.isEmpty, "suites not on lanes: \(missing)")
    }
}

/// Values appended from any task.
private final class Recorder<Value: Sendable>: Sendable {
    private let storage = Mutex<[Value]>([])
    func append(_ value: Value) { storage.withLock { $0.append(value) } }
    var values: [Value] { storage.withLock { $0 } }
}
