/// Password hashes waiting for a worker, bounded and fair: at most `perSession` jobs waiting or
/// running for one session (or one source's creates) and `perSource` for one source address,
/// at most `width` running at once, and the next job taken round-robin across sessions, so a
/// flood of guesses at one session delays another session's join by at most one hash per worker.
///
/// Pure bookkeeping (the service runs the jobs on its workers); reactor thread only.
public struct HashingQueue<Job> {
    /// Jobs running at once at most.
    public let width: Int
    /// Jobs waiting or running per session key at most.
    public let perSession: Int
    /// Jobs waiting or running per source address at most ("" = unknown: not bounded per source).
    public let perSource: Int

    /// A job with what it counts against.
    public struct Entry {
        /// The work.
        public let job: Job
        /// The session it is for (or a create's key).
        public let session: String
        /// The sender's address.
        public let source: String
    }

    private var waiting: [String: [Entry]] = [:]
    private var rotation: [String] = []
    private var bySession: [String: Int] = [:]
    private var bySource: [String: Int] = [:]
    /// Jobs running now.
    public private(set) var running = 0

    /// Creates an empty queue.
    public init(width: Int, perSession: Int, perSource: Int) {
        self.width = max(1, width)
        self.perSession = max(1, perSession)
        self.perSource = max(1, perSource)
    }

    /// Jobs waiting (not running).
    public var waitingCount: Int { waiting.values.reduce(0) { $0 + $1.count } }

    /// Whether one more job for `session` from `source` fits.
    public func admits(session: String, source: String) -> Bool {
        bySession[session, default: 0] < perSession && (source.isEmpty || bySource[source, default: 0] < perSource)
    }

    /// Queues a job; false (and nothing queued) when it does not fit.
    @discardableResult
    public mutating func enqueue(_ job: Job, session: String, source: String) -> Bool {
        guard admits(session: session, source: source) else { return false }
        bySession[session, default: 0] += 1
        if !source.isEmpty { bySource[source, default: 0] += 1 }
        if waiting[session] == nil { rotation.append(session) }
        waiting[session, default: []].append(Entry(job: job, session: session, source: source))
        return true
    }

    /// The next job to run, if a worker is free: the oldest of the session whose turn it is.
    public mutating func next() -> Entry? {
        guard running < width, !rotation.isEmpty else { return nil }
        let session = rotation.removeFirst()
        var jobs = waiting[session]!
        let entry = jobs.removeFirst()
        if jobs.isEmpty {
            waiting[session] = nil
        } else {
            waiting[session] = jobs
            rotation.append(session)
        }
        running += 1
        return entry
    }

    /// A job taken with ``next()`` for `session` from `source` finished.
    public mutating func finished(session: String, source: String) {
        running = max(0, running - 1)
        bySession.decrement(session)
        if !source.isEmpty { bySource.decrement(source) }
    }
}
