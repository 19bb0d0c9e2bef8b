import Foundation
import Synchronization
import Testing

/// Runs every test of a suite on a thread of its own (a "lane") instead of the shared cooperative
/// pool.
///
/// Most end-to-end tests block: they wait for processes, sockets and `eventually`. In the pool
/// (one thread per core, two here) two such tests hold every thread, and everything asynchronous
/// starves behind them: NetplayKit's own tasks inside a running test, streams a test consumes,
/// Swift Testing's bookkeeping. A parallel run then showed tests "taking" 175 s and timing out on
/// work that was never scheduled. On a lane a test may block as it likes; the pool stays free for
/// the tasks it waits on.
///
/// How many tests run at once stays Swift Testing's to decide (its parallelization width,
/// `SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH`, which tools/run-tests.sh sets): it admits a
/// test case before starting its time limit and its traits, so a lane is taken, never waited for.
///
/// Apply it to every suite: `@Suite("…", .ownThread)`. It is recursive, so nested suites and each
/// test case inherit it.
public struct OwnThreadTrait: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        // The suite's own scope wraps its tests; only a test case takes a lane.
        guard testCase != nil else { return try await function() }
        let lane = TestLanes.shared.take()
        defer { TestLanes.shared.putBack(lane) }
        try await withTaskExecutorPreference(lane) { try await runHere(function) }
    }
}

/// Runs `function` on the preferred executor: a nonisolated async function hops there, where a
/// closure handed straight to `withTaskExecutorPreference` would start on the caller's thread.
private func runHere(_ function: @Sendable () async throws -> Void) async throws {
    try await function()
}

extension Trait where Self == OwnThreadTrait {
    /// Runs the suite's tests on lanes, threads of their own (``OwnThreadTrait``).
    public static var ownThread: OwnThreadTrait { OwnThreadTrait() }
}

/// The threads tests run on: a free one is reused, and a new one made when all are busy, so there
/// are as many as tests ever ran at once.
public final class TestLanes: Sendable {
    private let free = Mutex<[ThreadTaskExecutor]>([])
    private let made = Atomic(0)

    /// No lanes yet.
    public init() {}

    /// The lanes of this test process.
    public static let shared = TestLanes()

    /// How many lanes were made.
    public var count: Int { made.load(ordering: .relaxed) }

    /// A free lane, or a new one named `test-lane-N`.
    public func take() -> ThreadTaskExecutor {
        if let lane = free.withLock({ $0.popLast() }) { return lane }
        let number = made.add(1, ordering: .relaxed).newValue
        return ThreadTaskExecutor(name: "test-lane-\(number)")
    }

    /// Frees `lane` for the next test.
    public func putBack(_ lane: ThreadTaskExecutor) {
        free.withLock { $0.append(lane) }
    }
}
