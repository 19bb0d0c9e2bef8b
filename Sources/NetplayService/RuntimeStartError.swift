/// A failure to start a service, with a one-line reason for the operator.
public struct RuntimeStartError: Error, CustomStringConvertible {
    /// The reason.
    public let description: String
    /// Creates an error.
    public init(_ description: String) { self.description = description }
}
