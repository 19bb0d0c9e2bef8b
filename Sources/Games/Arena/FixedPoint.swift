/// 16.16 fixed-point helpers for the arena: integers only, so every machine computes
/// bit-identical physics.
public enum FixedPoint {
    /// The number of fraction bits.
    public static let shift: Int32 = 16
    /// 1.0 in fixed point.
    public static let one: Int32 = 1 << 16

    /// `units` whole units in fixed point.
    @inlinable
    public static func units(_ units: Int32) -> Int32 { units << 16 }

    /// The largest integer whose square is an `Int64`: the root of every non-negative `Int64`
    /// is at most this.
    @usableFromInline
    static let largestRoot: Int64 = 3_037_000_499

    /// The integer square root (floor) of a non-negative 64-bit value, for every one up to
    /// `Int64.max`.
    @inlinable
    public static func squareRoot(_ value: Int64) -> Int64 {
        precondition(value >= 0)
        if value < 2 { return value }
        // Past the largest square an Int64 holds, (x + 1)² would overflow: the root is known.
        if value >= largestRoot * largestRoot { return largestRoot }
        var x = Int64(Double(value).squareRoot())
        // Correct the floating estimate so the result is exact and platform independent.
        while x * x > value { x -= 1 }
        while (x + 1) * (x + 1) <= value { x += 1 }
        return x
    }
}
