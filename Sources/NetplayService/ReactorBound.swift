/// A value that is only ever touched on the reactor thread, carried through a `@Sendable`
/// closure that hops back there (``ReactorHandle/enqueue(_:)``).
public struct ReactorBound<Value>: @unchecked Sendable {
    /// The value (touch it on the reactor thread only).
    public let value: Value
    /// Wraps `value`.
    public init(_ value: Value) { self.value = value }
}
