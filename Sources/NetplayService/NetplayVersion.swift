/// The toolkit's version, reported in Health replies, heartbeats and `--version`.
public enum NetplayVersion {
    /// Semantic version of this build.
    public static let current = "0.1.0"
}
