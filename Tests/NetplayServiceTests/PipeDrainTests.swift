import Foundation
import NetplayService
import NetplayTestSupport
import Synchronization
import Testing

/// `PipeDrain` reads a child's output to the end without libdispatch: all of it, in order, many
/// times over, and it says when a pipe never ends. And nothing in the repository reads a pipe
/// through `FileHandle.readabilityHandler` again.
@Suite("PipeDrain: a child's output without a dispatch read source", .ownThread)
struct PipeDrainTests {
    func shell(_ script: String) -> (Process, Pipe) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", script]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        return (process, pipe)
    }

    @Test func everyByteArrivesInOrderAndTheEndIsSeen() throws {
        // 2 MiB, far more than a pipe's buffer: the child blocks until the drain reads.
        let (process, pipe) = shell("head -c 2097152 /dev/zero | tr '\\0' 'a'; echo; echo last line >&2")
        let output = OutputCollector()
        let endings = Atomic<Int>(0)
        let drain = PipeDrain(pipe, deliver: { output.append($0) }, finished: { endings.add(1, ordering: .relaxed) })
        try process.run()
        process.waitUntilExit()
        #expect(drain.waitForEnd(seconds: 10) && drain.hasEnded)
        let text = output.text
        #expect(text.utf8.count == 2_097_152 + 1 + 10, "\(text.utf8.count) bytes")
        #expect(text.hasSuffix("\nlast line\n") && text.utf8.prefix(2_097_152).allSatisfy { $0 == UInt8(ascii: "a") })
        #expect(endings.load(ordering: .relaxed) == 1)
    }

    @Test func manyShortChildrenAtOnceAllEnd() throws {
        // The churn that crashed libdispatch's epoll bookkeeping with readability handlers.
        let outputs = (0 ..< 8).map { _ in OutputCollector() }
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            for round in 0 ..< 25 {
                let (process, pipe) = shell("echo \(worker)-\(round)")
                let drain = PipeDrain(pipe, deliver: { outputs[worker].append($0) })
                guard (try? process.run()) != nil else { return }
                process.waitUntilExit()
                _ = drain.waitForEnd(seconds: 5)
            }
        }
        for (worker, output) in outputs.enumerated() {
            #expect(output.text == (0 ..< 25).map { "\(worker)-\($0)\n" }.joined())
        }
    }

    @Test func aPipeAGrandchildHoldsOpenIsReportedAsNotEnded() throws {
        let (process, pipe) = shell("echo started; sleep 3 &")
        let output = OutputCollector()
        let drain = PipeDrain(pipe, deliver: { output.append($0) })
        try process.run()
        #expect(!drain.waitForEnd(seconds: 1), "the sleeping grandchild still holds the write end")
        #expect(drain.waitForEnd(seconds: 10), "it ends once the grandchild exits")
        #expect(output.text == "started\n")
        process.waitUntilExit()
    }

    @Test func nothingReadsAPipeThroughADispatchReadSource() throws {
        var findings: [String] = []
        for folder in ["Sources", "Tests", "tools"] {
            let directory = repositoryRoot.appendingPathComponent(folder)
            guard let walker = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil) else { continue }
            for case let file as URL in walker where file.pathExtension == "swift" && file.lastPathComponent != "PipeDrain.swift"
                && file.lastPathComponent != "PipeDrainTests.swift" {
                let text = try String(contentsOf: file, encoding: .utf8)
                for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
                where line.contains("readabilityHandler") || line.contains("makeReadSource") {
                    findings.append("\(folder)/\(file.lastPathComponent):\(number + 1): \(line.trimmingCharacters(in: .whitespaces))")
                }
            }
        }
        #expect(findings.isEmpty, "use PipeDrain:\n\(findings.joined(separator: "\n"))")
    }
}
