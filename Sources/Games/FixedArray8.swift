/// Eight values stored inline (no heap), so a game state built from them is copied by a
/// plain memory copy: saving and loading such a state never allocates.
public struct FixedArray8<Element: BitwiseCopyable>: BitwiseCopyable {
    @usableFromInline
    var storage: (Element, Element, Element, Element, Element, Element, Element, Element)

    /// Eight copies of `value`.
    @inlinable
    public init(repeating value: Element) {
        storage = (value, value, value, value, value, value, value, value)
    }

    /// The capacity: 8.
    public static var count: Int { 8 }

    /// Element `index` (0 ..< 8).
    @inlinable
    public subscript(index: Int) -> Element {
        get {
            precondition(index >= 0 && index < 8, "FixedArray8 index out of range")
            return withUnsafeBytes(of: storage) { raw in
                raw.load(fromByteOffset: index * MemoryLayout<Element>.stride, as: Element.self)
            }
        }
        set {
            precondition(index >= 0 && index < 8, "FixedArray8 index out of range")
            withUnsafeMutableBytes(of: &storage) { raw in
                raw.storeBytes(of: newValue, toByteOffset: index * MemoryLayout<Element>.stride, as: Element.self)
            }
        }
    }
}

extension FixedArray8: Equatable where Element: Equatable {
    @inlinable
    public static func == (lhs: FixedArray8, rhs: FixedArray8) -> Bool {
        for index in 0 ..< 8 where lhs[index] != rhs[index] { return false }
        return true
    }
}

extension FixedArray8: Sendable where Element: Sendable {}
