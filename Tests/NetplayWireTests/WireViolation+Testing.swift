import Testing
import NetplayWire

extension WireViolation: CustomTestStringConvertible {
    var testDescription: String { label }
}
