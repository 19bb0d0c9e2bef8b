import SwiftCompilerPlugin
import SwiftDiagnostics
import SwiftSyntax
import SwiftSyntaxMacros

/// The expansion behind `@PublicMemberwiseInit` (declared in MemberwiseInit).
public struct PublicMemberwiseInitMacro: MemberMacro {
    public static func expansion(
        of node: AttributeSyntax,
        providingMembersOf declaration: some DeclGroupSyntax,
        conformingTo protocols: [TypeSyntax],
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        guard declaration.is(StructDeclSyntax.self) else {
            context.diagnose(Diagnostic(node: node, message: MemberwiseInitMessage.notAStruct))
            return []
        }
        var parameters: [StoredProperty] = []
        var complete = true
        for member in declaration.memberBlock.members {
            guard let variable = member.decl.as(VariableDeclSyntax.self) else { continue }
            for property in StoredProperty.parameters(of: variable) {
                if property.isHidden {
                    // A private property with its own value stays out of the public initialiser;
                    // one without cannot be set by it unless it is exposed, which is refused.
                    if property.defaultValue == nil {
                        context.diagnose(Diagnostic(node: property.node, message: MemberwiseInitMessage.hiddenWithoutValue(property.name)))
                        complete = false
                    }
                    continue
                }
                if property.type == nil {
                    context.diagnose(Diagnostic(node: property.node, message: MemberwiseInitMessage.missingType(property.name)))
                    complete = false
                }
                parameters.append(property)
            }
        }
        guard complete else { return [] }
        let signature = parameters.map(\.parameter).joined(separator: ", ")
        let body = parameters.map { "    self.\($0.name) = \($0.name)" }.joined(separator: "\n")
        let initializer: DeclSyntax = """
            /// Creates a value from each of its stored properties, in declaration order.
            public init(\(raw: signature)) {
            \(raw: body)
            }
            """
        return [initializer]
    }
}

/// One stored property that becomes an initialiser parameter.
struct StoredProperty {
    let name: String
    /// The spelled-out type, nil when the declaration leaves it to inference.
    let type: TypeSyntax?
    let defaultValue: ExprSyntax?
    /// Declared `private` or `fileprivate` (a `private(set)` setter does not count).
    let isHidden: Bool
    let node: Syntax

    /// `name: Type = default`, with `@escaping` for a function type.
    var parameter: String {
        guard let type else { return name }
        var text = "\(name): "
        if StoredProperty.isFunction(type) { text += "@escaping " }
        text += type.trimmedDescription
        if let defaultValue { text += " = \(defaultValue.trimmedDescription)" }
        return text
    }

    /// The properties of one declaration that an initialiser must take: stored, not static or
    /// lazy, and not a `let` that already has its value. In `var a, b: Int` both take `Int`.
    static func parameters(of variable: VariableDeclSyntax) -> [StoredProperty] {
        let skipped: Set<String> = ["static", "class", "lazy"]
        if variable.modifiers.contains(where: { skipped.contains($0.name.text) }) { return [] }
        let isLet = variable.bindingSpecifier.tokenKind == .keyword(.let)
        let isHidden = variable.modifiers.contains { ["private", "fileprivate"].contains($0.name.text) && $0.detail == nil }
        let bindings = Array(variable.bindings)
        var result: [StoredProperty] = []
        for (index, binding) in bindings.enumerated() {
            guard let identifier = binding.pattern.as(IdentifierPatternSyntax.self) else { continue }
            if let accessors = binding.accessorBlock, !isObserversOnly(accessors) { continue }
            if isLet && binding.initializer != nil { continue }
            let type = binding.typeAnnotation?.type
                ?? bindings[index...].lazy.compactMap { $0.typeAnnotation?.type }.first
            result.append(StoredProperty(
                name: identifier.identifier.trimmedDescription,
                type: type,
                defaultValue: isLet ? nil : binding.initializer?.value,
                isHidden: isHidden,
                node: Syntax(binding)))
        }
        return result
    }

    /// Whether an accessor block only observes a stored property (`willSet`/`didSet`).
    static func isObserversOnly(_ block: AccessorBlockSyntax) -> Bool {
        guard case .accessors(let accessors) = block.accessors else { return false }
        return accessors.allSatisfy { [.keyword(.willSet), .keyword(.didSet)].contains($0.accessorSpecifier.tokenKind) }
    }

    /// Whether a parameter of this type must be marked `@escaping` (a bare function type,
    /// possibly parenthesised or attributed; an optional one escapes already).
    static func isFunction(_ type: TypeSyntax) -> Bool {
        if type.is(FunctionTypeSyntax.self) { return true }
        if let attributed = type.as(AttributedTypeSyntax.self) { return isFunction(attributed.baseType) }
        if let tuple = type.as(TupleTypeSyntax.self), tuple.elements.count == 1, let only = tuple.elements.first {
            return isFunction(only.type)
        }
        return false
    }
}

/// What `@PublicMemberwiseInit` refuses, and why.
enum MemberwiseInitMessage: DiagnosticMessage {
    case notAStruct
    case missingType(String)
    case hiddenWithoutValue(String)

    var message: String {
        switch self {
        case .notAStruct:
            return "@PublicMemberwiseInit applies to a struct"
        case .missingType(let name):
            return "@PublicMemberwiseInit needs the type of '\(name)' spelled out (it cannot read inferred types)"
        case .hiddenWithoutValue(let name):
            return "@PublicMemberwiseInit leaves private '\(name)' out of the public initialiser, so it needs an initial value"
        }
    }

    var diagnosticID: MessageID {
        switch self {
        case .notAStruct: MessageID(domain: "MemberwiseInit", id: "notAStruct")
        case .missingType: MessageID(domain: "MemberwiseInit", id: "missingType")
        case .hiddenWithoutValue: MessageID(domain: "MemberwiseInit", id: "hiddenWithoutValue")
        }
    }

    var severity: DiagnosticSeverity { .error }
}

/// The compiler plugin serving the macro.
@main
struct MemberwiseInitPlugin: CompilerPlugin {
    let providingMacros: [Macro.Type] = [PublicMemberwiseInitMacro.self]
}
