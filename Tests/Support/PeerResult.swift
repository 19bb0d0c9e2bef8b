import Foundation
import WANHarness

/// The `RESULT key=value ...` line a netplay-peer prints last.
public struct PeerResult: CustomStringConvertible, Sendable {
    /// Every `key=value` of the line.
    public var fields: [String: String]

    /// The last RESULT line of `log`, or nil when there is none.
    public init?(log: String) {
        guard let line = WANPlayerFigures(log: log) else { return nil }
        fields = line.fields
    }

    /// The final checksum as printed ("?" when missing).
    public var checksum: String { fields["checksum"] ?? "?" }
    /// The frame count (-1 when missing).
    public var frames: Int { Int(fields["frames"] ?? "") ?? -1 }
    /// An integer field (-1 when missing).
    public func int(_ key: String) -> Int { Int(fields[key] ?? "") ?? -1 }
    public var description: String { fields.keys.sorted().map { "\($0)=\(fields[$0]!)" }.joined(separator: " ") }
}

extension ServiceProcess {
    /// Waits for the process to exit and returns its result line (nil: failed or no result).
    public func result(within seconds: Double) -> PeerResult? {
        guard waitForExit(seconds: seconds) == 0 else { return nil }
        // The RESULT line is written just before the exit; the pipe's reader thread may
        // deliver it a moment after the exit is seen.
        _ = waitFor("RESULT ", within: 3)
        return PeerResult(log: log)
    }

    /// Waits until the log contains `text`.
    public func waitFor(_ text: String, within seconds: Double) -> Bool {
        eventually(within: seconds) { log.contains(text) }
    }
}
