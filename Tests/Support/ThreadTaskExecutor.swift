import Foundation
import Synchronization

/// Runs tasks on a thread of their own instead of the shared cooperative pool. The pool has one
/// thread per core (two here), and a parallel test run fills it with tests that block (waiting
/// for processes, sockets, `eventually`): a task consuming a stream in the pool can then wait for
/// minutes. `Task(executorPreference: executor) { ... }` runs on this thread whatever the pool does.
public final class ThreadTaskExecutor: TaskExecutor, @unchecked Sendable {
    private let jobs = Mutex<[UnownedJob]>([])
    private let ready = DispatchSemaphore(value: 0)

    /// Starts the executor's thread, named `name`; it lives as long as the process.
    public init(name: String) {
        let thread = Thread { [unowned self] in self.run() }
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

    /// One executor for every test in the process that needs one.
    public static let shared = ThreadTaskExecutor(name: "test-task-executor")
}
