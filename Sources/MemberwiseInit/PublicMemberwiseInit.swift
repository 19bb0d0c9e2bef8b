/// Gives a struct the public memberwise initialiser Swift writes only for use inside its module:
/// one parameter per stored property, in declaration order, labelled with the property's name.
///
/// A `var` with an initial value becomes a parameter with that default; a `let` with one is left
/// out (it cannot be assigned again); computed, static and lazy properties are left out. A
/// function-typed property's parameter is `@escaping`. Every stored property that becomes a
/// parameter must spell its type out; the macro says which one does not.
///
/// ```swift
/// @PublicMemberwiseInit
/// public struct Pellet { public var x: Int32; public var y: Int32 = 0 }
/// // public init(x: Int32, y: Int32 = 0) { self.x = x; self.y = y }
/// ```
@attached(member, names: named(init))
public macro PublicMemberwiseInit() = #externalMacro(module: "MemberwiseInitMacros", type: "PublicMemberwiseInitMacro")
