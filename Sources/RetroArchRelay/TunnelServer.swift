import CEpoll
import Foundation
import NetplayWire
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The tunnel's sockets: plain non-blocking TCP on an `epoll` loop of its own thread, feeding a
/// ``TunnelCore``. Bytes are read and written in one wake-up (as a plain C forwarder does) and
/// flow under back-pressure: a connection whose outgoing queue passes 256 KiB stops the reading
/// of whoever fills it until it drains below 64 KiB, so a slow reader slows its writer instead of
/// growing the relay's memory (a queue over 8 MiB, which only a reader that stops reading its
/// control messages reaches, is closed as `slow_reader`).
///
/// The first version rode a ZeroMQ `STREAM` socket; every chunk then crossed libzmq's I/O thread
/// and the reactor twice, for a quarter of a C forwarder's throughput (docs/retroarch.md).
public final class TunnelServer: Sendable {
    /// The configuration it runs with.
    public let configuration: TunnelConfiguration
    /// The main port actually bound.
    public let boundPort: UInt16
    private let published = SnapshotBox()
    private let running = Mutex(true)
    private let stopped = DispatchSemaphore(value: 0)
    private let wakeWrite: Int32

    /// Binds the main port (throwing with a one-line reason, e.g. when it is taken) and starts the
    /// tunnel's thread. `onEvent` hears what the tunnel did, on that thread.
    public init(configuration: TunnelConfiguration, wallClockMs: @escaping @Sendable () -> UInt64 = UnixTime.nowMs,
                onEvent: @escaping @Sendable (TunnelEvent) -> Void) throws {
        self.configuration = configuration
        #if os(Linux)
        let (fd, port) = try TunnelSockets.listen(host: configuration.bindHost, port: configuration.port)
        boundPort = port
        var pipeFds: [Int32] = [0, 0]
        guard cepoll_pipe(&pipeFds) == 0 else {
            close(fd)
            throw TunnelServerError("cannot make the RetroArch tunnel's wake-up pipe: errno \(errno)")
        }
        wakeWrite = pipeFds[1]
        let loop: TunnelLoop
        do {
            loop = try TunnelLoop(configuration: configuration, mainListener: fd, wakeRead: pipeFds[0], wallClockMs: wallClockMs,
                                  onEvent: onEvent)
        } catch {
            close(pipeFds[0])
            close(pipeFds[1])
            throw error
        }
        let box = LoopBox(loop: loop, published: published, stopped: stopped)
        let thread = Thread { box.run() }
        thread.name = "retroarch-tunnel"
        thread.start()
        #else
        // The tunnel's event loop is Linux's epoll; a relay runs on Linux.
        throw TunnelServerError("the RetroArch tunnel needs Linux (epoll); this system has none")
        #endif
    }

    /// What the tunnel's thread last published.
    public var snapshot: TunnelSnapshot { published.state.withLock { $0 } }

    /// Closes every connection and socket and ends the thread (waits up to 2 s).
    public func stop() {
        guard running.withLock({ running in defer { running = false }; return running }) else { return }
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
        _ = stopped.wait(timeout: .now() + 2)
        close(wakeWrite)
    }

    deinit { stop() }

    /// The snapshot the tunnel's thread publishes and the reactor reads.
    private final class SnapshotBox: Sendable {
        let state = Mutex(TunnelSnapshot())
    }

    /// Carries the thread-confined loop onto its thread.
    private struct LoopBox: @unchecked Sendable {
        let loop: TunnelLoop
        let published: SnapshotBox
        let stopped: DispatchSemaphore

        func run() {
            loop.run { snapshot in published.state.withLock { $0 = snapshot } }
            stopped.signal()
        }
    }
}

/// The tunnel could not start.
public struct TunnelServerError: Error, CustomStringConvertible {
    /// The one-line reason.
    public let description: String

    init(_ description: String) { self.description = description }
}
