import ArgumentParser
import Dispatch
import Foundation
import Logging
import Synchronization

/// Runs a ``Service``: as the main job of a process (``runMain(configuration:makeService:)``, with
/// signal handling and logging set up) or on a background thread inside another program
/// (``start(configuration:logger:makeService:)``: tests, a LAN host's in-process relay).
public enum ServiceHost {
    /// Runs the service on the calling thread until SIGINT or SIGTERM, then drains and returns.
    /// Throws ``RuntimeStartError`` (one-line reason) when it cannot start.
    public static func runMain(configuration: ServiceConfiguration, makeService: () throws -> any Service) throws {
        let logger = NetplayLogging.bootstrap(service: configuration.kind, instance: configuration.instance,
                                              level: configuration.logLevel)
        try prepareDataDirectory(configuration.dataDirectory)
        let runtime = try ServiceRuntime(configuration: configuration, logger: logger)
        SignalStop.install(handle: runtime.handle)
        let service: any Service
        do { service = try makeService() } catch { throw RuntimeStartError("\(error)") }
        try runtime.run(service)
    }

    /// Starts the service on its own thread and returns once its sockets are bound and its own
    /// start succeeded (or throws the start error). Stop it with ``RunningService/stop()``.
    public static func start(configuration: ServiceConfiguration, logger: Logger? = nil,
                             makeService: @escaping @Sendable () throws -> any Service) throws -> RunningService {
        let logger = logger ?? {
            var logger = Logger(label: "netplay.\(configuration.kind)")
            logger.logLevel = configuration.logLevel
            return logger
        }()
        let started = Mutex<Result<(ReactorHandle, String, String?, String?), RuntimeStartError>?>(nil)
        let ready = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        let threadName = "\(configuration.kind)-reactor"
        let thread = Thread {
            defer { finished.signal() }
            Thread.current.name = threadName
            do {
                try prepareDataDirectory(configuration.dataDirectory)
                let runtime = try ServiceRuntime(configuration: configuration, logger: logger)
                let service = try makeService()
                // Ready once the service's own start succeeded (a RetroArch port in use fails it):
                // the caller got a "running" service whose thread had already exited.
                try runtime.run(service) {
                    started.withLock { $0 = .success((runtime.handle, runtime.boundEndpoint, runtime.boundEventsEndpoint,
                                                      runtime.boundControlEndpoint)) }
                    ready.signal()
                }
            } catch {
                let failure = error as? RuntimeStartError ?? RuntimeStartError("\(error)")
                let alreadyStarted = started.withLock { state -> Bool in
                    if state == nil { state = .failure(failure); return false }
                    return true
                }
                if alreadyStarted { logger.error("service failed", metadata: ["error": "\(failure)"]) } else { ready.signal() }
            }
        }
        thread.start()
        ready.wait()
        switch started.withLock({ $0 })! {
        case .success(let (handle, endpoint, events, control)):
            return RunningService(handle: handle, endpoint: endpoint, eventsEndpoint: events, controlEndpoint: control,
                                  trustStore: configuration.trustStore, finished: finished)
        case .failure(let error):
            finished.wait()
            throw error
        }
    }

    static func prepareDataDirectory(_ url: URL) throws {
        do {
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw RuntimeStartError("cannot create data directory \(url.path): \(error.localizedDescription)")
        }
        guard FileManager.default.isWritableFile(atPath: url.path) else {
            throw RuntimeStartError("data directory \(url.path) is not writable")
        }
    }
}

/// A service running on a background thread.
public final class RunningService: Sendable {
    /// Enqueue work onto, or stop, the service's reactor.
    public let handle: ReactorHandle
    /// The bound request endpoint (wildcard port resolved).
    public let endpoint: String
    /// The bound events endpoint, if any.
    public let eventsEndpoint: String?
    /// The bound control endpoint (cluster and operator planes), if any.
    public let controlEndpoint: String?
    /// The trust store its control endpoint admits, if any.
    public let trustStore: URL?
    private let finished: DispatchSemaphore

    init(handle: ReactorHandle, endpoint: String, eventsEndpoint: String?, controlEndpoint: String?, trustStore: URL?,
         finished: DispatchSemaphore) {
        self.trustStore = trustStore
        self.handle = handle
        self.endpoint = endpoint
        self.eventsEndpoint = eventsEndpoint
        self.controlEndpoint = controlEndpoint
        self.finished = finished
    }

    /// Stops the service gracefully and waits until its thread has closed every socket.
    public func stop() {
        handle.requestStop(reason: "stopped by host")
        finished.wait()
        finished.signal()  // let a second stop() return too
    }
}

/// SIGINT/SIGTERM turn into a graceful stop request (never a crash or an abrupt exit).
enum SignalStop {
    nonisolated(unsafe) private static var sources: [DispatchSourceSignal] = []
    private static let installed = Mutex(false)

    static func install(handle: ReactorHandle) {
        let first = installed.withLock { done -> Bool in defer { done = true }; return !done }
        guard first else { return }
        signal(SIGPIPE, SIG_IGN)
        // A relay holds a descriptor per player connection (and per RetroArch connection): the
        // usual soft limit of 1,024 is far below what the service's caps admit, and a process
        // out of descriptors fails everything else too. The hard limit is the operator's.
        var limit = rlimit()
        if getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max
            _ = setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
        }
        for (number, name) in [(SIGINT, "SIGINT"), (SIGTERM, "SIGTERM")] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { handle.requestStop(reason: name) }
            source.resume()
            sources.append(source)
        }
    }
}

/// An error that ends a command with its own exit status and a one-line reason (the supervisor's
/// "cluster stopped itself" is 1; bad configuration stays 2).
public protocol OneLineExitError: Error, CustomStringConvertible {
    /// The process's exit status.
    var exitStatus: Int32 { get }
}

/// Entry-point helper for the toolkit's executables: parses arguments, and on bad input prints
/// one line (`netplay-discovery: --endpoint must look like ...`) and exits non-zero. An `@main`
/// type conforming to it gets that as its `main()`.
public protocol NetplayCommand: ParsableCommand {}

extension NetplayCommand {
    /// The entry point: ``mainReportingOneLine(_:)`` over the process's arguments.
    public static func main() { mainReportingOneLine() }

    /// Parses the command line and runs the command with one-line error reporting.
    public static func mainReportingOneLine(_ arguments: [String]? = nil) {
        let name = configuration.commandName ?? "netplay"
        do {
            var command = try parseAsRoot(arguments)
            try command.run()
        } catch let failure as OneLineExitError {
            FileHandle.standardError.write(Data("\(name): \(failure.description)\n".utf8))
            Foundation.exit(failure.exitStatus)
        } catch {
            let code = exitCode(for: error)
            if code == .success || error is CleanExit {
                exit(withError: error)  // --help, --version: print normally
            }
            let text: String
            if let start = error as? RuntimeStartError {
                text = start.description
            } else if let validation = error as? ValidationError {
                text = validation.message
            } else {
                text = message(for: error).split(separator: "\n").first.map(String.init) ?? "\(error)"
            }
            FileHandle.standardError.write(Data("\(name): \(text)\n".utf8))
            Foundation.exit(code == .validationFailure || error is RuntimeStartError ? 2 : code.rawValue == 0 ? 1 : code.rawValue)
        }
    }
}
