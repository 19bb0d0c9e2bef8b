import MemberwiseInit
import MemberwiseInitMacros
import NetplayTestSupport
import SwiftSyntaxMacroExpansion
import SwiftSyntaxMacrosGenericTestSupport
import Testing

/// Expands `@PublicMemberwiseInit` on `declaration { members }` with the real macro and records,
/// at the caller, any difference from the same declaration with `gains` added after the members
/// (nothing, when the macro must refuse) or from the expected diagnostics.
private func expectExpansion(
    of declaration: String = "public struct Sample", _ members: String, gains initializer: String?,
    diagnostics: [DiagnosticSpec] = [], sourceLocation: SourceLocation = #_sourceLocation
) {
    let body = members.split(separator: "\n").map { "    " + $0 }.joined(separator: "\n")
    var expanded = "\(declaration) {\n\(body)\n"
    if let initializer {
        let indented = initializer.split(separator: "\n").map { "    " + $0 }.joined(separator: "\n")
        expanded += "\n    /// Creates a value from each of its stored properties, in declaration order.\n\(indented)\n"
    }
    assertMacroExpansion(
        "@PublicMemberwiseInit\n\(declaration) {\n\(body)\n}", expandedSource: expanded + "}",
        diagnostics: diagnostics,
        macroSpecs: ["PublicMemberwiseInit": MacroSpec(type: PublicMemberwiseInitMacro.self)],
        failureHandler: { Issue.record(Comment(rawValue: $0.message), sourceLocation: sourceLocation) })
}

@Suite("@PublicMemberwiseInit: what the macro writes and refuses", .ownThread)
struct PublicMemberwiseInitExpansionTests {
    @Test func everyStoredPropertyBecomesAParameterInDeclarationOrder() {
        expectExpansion(
            """
            /// The newest frame.
            public var ackFrame: Int
            public let sender: String
            """,
            gains: """
            public init(ackFrame: Int, sender: String) {
                self.ackFrame = ackFrame
                self.sender = sender
            }
            """)
    }

    @Test func aVarsInitialValueBecomesTheDefaultAndALetsIsLeftOut() {
        expectExpansion(
            """
            public var tolerance: UInt32 = 10_000
            public let kind = "fixed"
            public var cap: Double? = nil
            """,
            gains: """
            public init(tolerance: UInt32 = 10_000, cap: Double? = nil) {
                self.tolerance = tolerance
                self.cap = cap
            }
            """)
    }

    @Test func computedStaticAndLazyPropertiesAreLeftOutButObservedOnesStay() {
        expectExpansion(
            """
            public static let unit = "ms"
            public var count: Int { didSet { changed = true } }
            public var changed: Bool
            public var doubled: Int { count * 2 }
            public lazy var label: String = "meter"
            """,
            gains: """
            public init(count: Int, changed: Bool) {
                self.count = count
                self.changed = changed
            }
            """)
    }

    @Test func functionTypesEscapeAndSharedTypesAreRead() {
        expectExpansion(
            """
            public var x, y: Int32
            public var onTick: @Sendable (Int) -> Void
            public var onEnd: (() -> Void)?
            """,
            gains: """
            public init(x: Int32, y: Int32, onTick: @escaping @Sendable (Int) -> Void, onEnd: (() -> Void)?) {
                self.x = x
                self.y = y
                self.onTick = onTick
                self.onEnd = onEnd
            }
            """)
    }

    @Test func privatePropertiesKeepTheirValueAndStayOutButAPrivateSetterDoesNot() {
        expectExpansion(
            """
            public var timeoutMs: UInt64
            private var since: [String: UInt64] = [:]
            fileprivate let seed: Int = 7
            public private(set) var count: Int
            """,
            gains: """
            public init(timeoutMs: UInt64, count: Int) {
                self.timeoutMs = timeoutMs
                self.count = count
            }
            """)
    }

    @Test func aPrivatePropertyWithoutAValueIsNamedInAnError() {
        expectExpansion(
            "private var since: [String: UInt64]", gains: nil,
            diagnostics: [DiagnosticSpec(
                message: "@PublicMemberwiseInit leaves private 'since' out of the public initialiser, so it needs an initial value",
                line: 3, column: 17)])
    }

    @Test func anInferredTypeIsNamedInAnError() {
        expectExpansion(
            "public var histogram = [Int]()", gains: nil,
            diagnostics: [DiagnosticSpec(
                message: "@PublicMemberwiseInit needs the type of 'histogram' spelled out (it cannot read inferred types)",
                line: 3, column: 16)])
    }

    @Test func aClassIsRefused() {
        expectExpansion(
            of: "public final class Peer", "public var name: String", gains: nil,
            diagnostics: [DiagnosticSpec(message: "@PublicMemberwiseInit applies to a struct", line: 1, column: 1)])
    }
}

/// A type the compiler expands for real, through the plugin.
@PublicMemberwiseInit
public struct ExpandedSample: Equatable {
    public var frame: Int
    public var label: String = "none"
    public let id: UInt64
}

@Suite("@PublicMemberwiseInit: a type the compiler expands", .ownThread)
struct PublicMemberwiseInitCompiledTests {
    @Test func theCompiledInitialiserTakesEachPropertyAndItsDefault() {
        let full = ExpandedSample(frame: 3, label: "a", id: 9)
        #expect(full.frame == 3 && full.label == "a" && full.id == 9)
        let defaulted = ExpandedSample(frame: 4, id: 1)
        #expect(defaulted.label == "none")
    }
}
