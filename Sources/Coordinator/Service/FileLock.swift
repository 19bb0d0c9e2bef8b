import Foundation
import NetplayService

/// An exclusive lock on a file (`flock`), so two coordinators never share one database.
final class FileLock {
    private let descriptor: Int32

    init(path: String) throws {
        descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw RuntimeStartError("cannot open lock file \(path): \(String(cString: strerror(errno)))") }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            close(descriptor)
            throw RuntimeStartError("another coordinator is using \(path) (its data directory is locked)")
        }
    }

    deinit {
        flock(descriptor, LOCK_UN)
        close(descriptor)
    }
}
