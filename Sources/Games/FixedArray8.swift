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

    /// Element `index` (0 ..< 8). A switch over the tuple fields: no copy of the whole storage.
    @inlinable
    public subscript(index: Int) -> Element {
        get {
            switch index {
            case 0: return storage.0
            case 1: return storage.1
            case 2: return storage.2
            case 3: return storage.3
            case 4: return storage.4
            case 5: return storage.5
            case 6: return storage.6
            case 7: return storage.7
            default: preconditionFailure("FixedArray8 index out of range")
            }
        }
        set {
            switch index {
            case 0: storage.0 = newValue
            case 1: storage.1 = newValue
            case 2: storage.2 = newValue
            case 3: storage.3 = newValue
            case 4: storage.4 = newValue
            case 5: storage.5 = newValue
            case 6: storage.6 = newValue
            case 7: storage.7 = newValue
            default: preconditionFailure("FixedArray8 index out of range")
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
