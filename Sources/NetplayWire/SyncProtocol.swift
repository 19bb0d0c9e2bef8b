/// The versions of the sync protocol (`AttachRequest.protocol_version`,
/// `AttachResponse.protocol_version`) and what each adds.
public enum SyncProtocol {
    /// The version this build speaks.
    public static let current: UInt32 = 2
    /// From this version a peer acknowledges the progress of a state transfer it receives (a
    /// `StateTransferAck` with `loaded` false and no error after each chunk but the last), and a
    /// relay sends such a peer at most a window of bytes beyond the ones acknowledged.
    public static let pacedStateTransfers: UInt32 = 2

    /// The version a message names, 0 read as 1 (a sender from before the field was set).
    public static func version(_ named: UInt32) -> UInt32 { max(named, 1) }
}
