/// A value that is only ever touched on the reactor thread, carried through a `@Sendable`
/// closure that hops back there (``ReactorHandle/enqueue(_:)``).
struct ReactorBound<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
