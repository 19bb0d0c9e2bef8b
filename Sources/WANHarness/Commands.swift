import Foundation
import SystemTools
#if canImport(Glibc)
import Glibc
#endif

/// A failure while building or driving a WAN lab, with the command output that explains it.
public struct WANHarnessError: Error, CustomStringConvertible {
    /// What went wrong, in one line plus any command output.
    public let description: String
    /// Creates an error with `description`.
    public init(_ description: String) { self.description = description }
}

extension SystemCommand {
    /// Runs a command that must succeed; throws with its output otherwise.
    static func require(_ executable: String, _ arguments: [String]) throws {
        let result = run(executable, arguments)
        guard result.status == 0 else {
            let name = (executable as NSString).lastPathComponent
            throw WANHarnessError("\(name) \(arguments.joined(separator: " ")) failed (\(result.status)): "
                + result.output.trimmingCharacters(in: .whitespacesAndNewlines))
        }
    }
}

/// Whether process `pid` is gone (so leftovers tagged with it can be removed).
func processIsGone(_ pid: Int32) -> Bool {
    pid > 0 && kill(pid, 0) != 0 && errno == ESRCH
}

/// glibc's setns(2), which the Glibc module does not export (it is behind _GNU_SOURCE).
private let setnsFunction: (@convention(c) (Int32, Int32) -> Int32)? = {
    // RTLD_DEFAULT is a null handle on glibc.
    guard let symbol = dlsym(nil, "setns") else { return nil }
    return unsafeBitCast(symbol, to: (@convention(c) (Int32, Int32) -> Int32).self)
}()

/// CLONE_NEWNET from <sched.h>.
private let cloneNewNet: Int32 = 0x4000_0000

/// Runs `body` with the calling thread inside network namespace `name` (sockets made there stay
/// there), then returns the thread to its own namespace.
func inNetworkNamespace<T>(_ name: String, _ body: () throws -> T) throws -> T {
    let own = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)
    guard own >= 0 else { throw WANHarnessError("cannot open this thread's network namespace: \(String(cString: strerror(errno)))") }
    defer { close(own) }
    let target = open("/run/netns/\(name)", O_RDONLY | O_CLOEXEC)
    guard target >= 0 else { throw WANHarnessError("no network namespace \(name): \(String(cString: strerror(errno)))") }
    defer { close(target) }
    guard let setns = setnsFunction else { throw WANHarnessError("setns(2) is not available in this C library") }
    guard setns(target, cloneNewNet) == 0 else {
        throw WANHarnessError("cannot enter network namespace \(name): \(String(cString: strerror(errno)))")
    }
    defer {
        if setns(own, cloneNewNet) != 0 {
            // A thread left in the wrong namespace would make later sockets silently wrong.
            fatalError("cannot return to the original network namespace: \(String(cString: strerror(errno)))")
        }
    }
    return try body()
}
