import Foundation
import Synchronization

/// Debian tools the operations tests drive. `make deps-ops` installs them; when one is
/// missing and the tests run as root, it is installed here once (apt-get), so a fresh machine
/// still runs the tests.
enum DebianTools {
    private static let attempted = Mutex<Set<String>>([])

    /// The tool's path, installing `package` first when needed and possible.
    static func require(_ name: String, package: String) -> String? {
        if let path = tool(name) { return path }
        let first = attempted.withLock { $0.insert(package).inserted }
        if first, getuid() == 0 {
            _ = try? run("/bin/sh", ["-c", "flock /tmp/netplay-apt.lock sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \(package) >/dev/null 2>&1 || (apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \(package) >/dev/null 2>&1)'"],
                         timeout: 600)
        }
        return tool(name)
    }
}
