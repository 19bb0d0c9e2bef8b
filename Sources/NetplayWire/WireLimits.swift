/// Limits applied to whole frames; per-field limits come from the schema's annotations.
public struct WireLimits: Sendable, Hashable {
    /// The largest frame accepted by a decoder (and produced by an encoder), in bytes.
    /// ZeroMQ sockets should set `ZMQ_MAXMSGSIZE` to the same value.
    public var maxFrameBytes: Int

    /// Creates limits; the default frame limit is 1 MiB, which holds a full state-transfer chunk
    /// (256 KiB) or an introspection dump with room to spare.
    public init(maxFrameBytes: Int = 1 << 20) {
        self.maxFrameBytes = maxFrameBytes
    }

    /// 1 MiB frames.
    public static let `default` = WireLimits()
}
