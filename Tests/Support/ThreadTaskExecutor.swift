import Foundation
import Synchronization

/// Runs tasks on a thread of its own instead of the shared cooperative pool, whatever the pool is
/// doing: `withTaskExecutorPreference(executor) { ... }`. Test lanes (``TestLanes``) are made of
/// these, so that a test may block its thread without starving the pool.
public final class ThreadTaskExecutor: TaskExecutor, @unchecked Sendable {
    private let jobs = Mutex<[UnownedJob]>([])
    private let ready = DispatchSemaphore(value: 0)
    private static let nameKey = "netplay.test.executor"

    /// The name of the executor whose thread this is, or nil on any other thread (the kernel's
    /// thread names are no guide: they are cut to 15 bytes and inherited).
    public static var currentName: String? { Thread.current.threadDictionary[nameKey] as? String }

    /// Starts the executor's thread, named `name`. The thread holds the executor: both live as long
    /// as the process.
    public init(name: String) {
        let thread = Thread { [self] in
            Thread.current.threadDictionary[Self.nameKey] = name
            self.run()
        }
        thread.name = name
        thread.start()
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        jobs.withLock { $0.append(unowned) }
        ready.signal()
    }

    private func run() {
        while true {
            ready.wait()
            guard let job = jobs.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else { continue }
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}
