/// Why a libretro core could not be loaded, started or driven. Every case says what went wrong
/// and, where it helps, what to do about it (see ``description``).
public enum LibretroError: Error, Sendable, Hashable, CustomStringConvertible {
    /// No file at the core path.
    case coreNotFound(path: String)
    /// The file exists but the dynamic loader refused it (not a shared library, wrong architecture...).
    case cannotLoadCore(path: String, reason: String)
    /// The shared library lacks libretro entry points, so it is not a libretro core.
    case notALibretroCore(path: String, missingSymbols: [String])
    /// The core speaks another libretro API version than this host.
    case apiVersionMismatch(path: String, core: UInt32, host: UInt32)
    /// Every callback slot is taken: at most ``LibretroCore/maximumActiveCores`` cores may be
    /// loaded in one process at a time.
    case tooManyCores(limit: Int)
    /// The core could not be copied for a second, independent instance.
    case privateCopyFailed(path: String, reason: String)
    /// No file at the content path.
    case contentNotFound(path: String)
    /// The content file could not be read.
    case contentUnreadable(path: String, reason: String)
    /// `retro_load_game` returned false. `coreLog` holds the core's last error and warning lines.
    case contentRejected(path: String, core: String, coreLog: [String])
    /// The core cannot save states (`retro_serialize_size` is 0 or `retro_serialize` fails),
    /// so it cannot roll back.
    case serializationUnsupported(core: String, reason: String)
    /// `retro_serialize` failed during a save.
    case serializeFailed(core: String, size: Int)
    /// A state does not have the size this core and content produce.
    case stateSizeMismatch(expected: Int, actual: Int)
    /// `retro_unserialize` refused a state.
    case unserializeFailed(core: String, size: Int)
    /// A received state's checksum is not the one announced with it.
    case stateChecksumMismatch(expected: UInt64, actual: UInt64)
    /// The port is outside `0 ..< portCount`.
    case invalidPort(Int, portCount: Int)
    /// The options are invalid.
    case invalidOptions(String)

    public var description: String {
        switch self {
        case .coreNotFound(let path):
            return "libretro core not found: no file at \(path) (Debian: apt-get install libretro-nestopia; "
                + "cores live in /usr/lib/<arch>/libretro/)"
        case .cannotLoadCore(let path, let reason):
            return "cannot load \(path) as a shared library: \(reason)"
        case .notALibretroCore(let path, let missing):
            return "\(path) is not a libretro core: it lacks \(missing.joined(separator: ", "))"
        case .apiVersionMismatch(let path, let core, let host):
            return "\(path) implements libretro API version \(core); this host implements version \(host)"
        case .tooManyCores(let limit):
            return "too many libretro cores loaded in this process: at most \(limit) at a time "
                + "(close one with LibretroCore.close() first)"
        case .privateCopyFailed(let path, let reason):
            return "cannot make a private copy of \(path) for a second instance: \(reason)"
        case .contentNotFound(let path):
            return "content not found: no file at \(path)"
        case .contentUnreadable(let path, let reason):
            return "cannot read content \(path): \(reason)"
        case .contentRejected(let path, let core, let log):
            let detail = log.isEmpty ? "" : " (core log: \(log.joined(separator: " | ")))"
            return "\(core) failed to load content \(path)\(detail)"
        case .serializationUnsupported(let core, let reason):
            return "\(core) cannot save states (\(reason)), so it cannot run under rollback"
        case .serializeFailed(let core, let size):
            return "\(core) failed to save a \(size)-byte state"
        case .stateSizeMismatch(let expected, let actual):
            return "state size mismatch: this core and content use \(expected)-byte states, got \(actual) bytes "
                + "(a state from another core, core version or content?)"
        case .unserializeFailed(let core, let size):
            return "\(core) refused to load a \(size)-byte state (corrupt, or from another core version or content?)"
        case .stateChecksumMismatch(let expected, let actual):
            return "state checksum mismatch: expected \(hex(expected)), the bytes hash to \(hex(actual)) "
                + "(corrupted in transit?)"
        case .invalidPort(let port, let count):
            return "port \(port) is out of range: this host drives ports 0 ..< \(count)"
        case .invalidOptions(let problem):
            return "invalid libretro host options: \(problem)"
        }
    }
}

private func hex(_ value: UInt64) -> String {
    let digits = String(value, radix: 16)
    return "0x" + String(repeating: "0", count: max(0, 16 - digits.count)) + digits
}
