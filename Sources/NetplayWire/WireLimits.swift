import MemberwiseInit

/// Limits applied to whole frames; per-field limits come from the schema's annotations.
@PublicMemberwiseInit
public struct WireLimits: Sendable, Hashable {
    /// The largest frame accepted by a decoder (and produced by an encoder), in bytes.
    /// ZeroMQ sockets should set `ZMQ_MAXMSGSIZE` to the same value. The default, 1 MiB, holds a
    /// full state-transfer chunk (256 KiB) or an introspection dump with room to spare.
    public var maxFrameBytes: Int = 1 << 20

    /// 1 MiB frames.
    public static let `default` = WireLimits()
}
