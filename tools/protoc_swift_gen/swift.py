"""protoc-swift-gen's Swift writer: value types, protobuf-c bridging, validation and JSON, one
file per .proto."""

import os
import re

from .model import *  # noqa: F401,F403
from .schema import *  # noqa: F401,F403

# --------------------------------------------------------------------------------------------
# Swift code generation: types
# --------------------------------------------------------------------------------------------


class Out:
    def __init__(self):
        self.parts = []

    def __call__(self, s=""):
        self.parts.append(s + "\n")

    def raw(self, s):
        self.parts.append(s)

    def text(self):
        return "".join(self.parts)


def gen_enum(o, en, indent):
    name = en.name if en.parent else swift_type_name(en)
    o.raw(doc_lines(en.doc, indent, f"The `{'.'.join(en.path)}` enumeration."))
    o(f"{indent}public enum {name}: Int32, Sendable, Hashable, CaseIterable, CustomStringConvertible {{")
    for (vn, num, vdoc) in en.values:
        o.raw(doc_lines(vdoc, indent + "    ", f"`{vn}`"))
        o(f"{indent}    case {enum_case_name(en, vn)} = {num}")
    o()
    o(f"{indent}    /// The value's name in the schema, e.g. `{en.values[-1][0]}`.")
    o(f"{indent}    public var protoName: String {{")
    o(f"{indent}        switch self {{")
    for (vn, num, _) in en.values:
        o(f"{indent}        case .{enum_case_name(en, vn).strip('`')}: {swift_string_literal(vn)}")
    o(f"{indent}        }}")
    o(f"{indent}    }}")
    o()
    o(f"{indent}    /// The value's name without the enumeration's prefix, lower-cased, e.g. "
      f"`{enum_short_name(en, en.values[-1][0])}`:")
    o(f"{indent}    /// the form logs, events, the JSON API and command lines use.")
    o(f"{indent}    public var shortName: String {{")
    o(f"{indent}        switch self {{")
    for (vn, num, _) in en.values:
        o(f"{indent}        case .{enum_case_name(en, vn).strip('`')}: {swift_string_literal(enum_short_name(en, vn))}")
    o(f"{indent}        }}")
    o(f"{indent}    }}")
    o()
    o(f"{indent}    /// The value whose ``shortName`` is `name`, in any case; nil for any other text.")
    o(f"{indent}    public init?(shortName name: String) {{")
    o(f"{indent}        let wanted = name.lowercased()")
    o(f"{indent}        guard let value = Self.allCases.first(where: {{ $0.shortName == wanted }}) else {{ return nil }}")
    o(f"{indent}        self = value")
    o(f"{indent}    }}")
    o()
    o(f"{indent}    /// The schema name of the value.")
    o(f"{indent}    public var description: String {{ protoName }}")
    o(f"{indent}}}")


def gen_struct(o, m, indent):
    name = m.name if m.parent else swift_type_name(m)
    o.raw(doc_lines(m.doc, indent, f"The `{m.name}` message."))
    o(f"{indent}public struct {name}: Sendable, Hashable {{")
    ind = indent + "    "
    plain = [f for f in m.fields if f.oneof is None]
    for f in plain:
        o.raw(doc_lines(f.doc, ind, f"The `{f.name}` field."))
        o(f"{ind}public var {prop_name(f)}: {field_swift_type(f)}")
    for oneof in m.oneofs:
        t = oneof_swift_type(oneof)
        opt = "" if oneof.ann.required else "?"
        o.raw(doc_lines(oneof.doc, ind, f"The `{oneof.name}` oneof."))
        o(f"{ind}public var {swift_ident(lower_camel(oneof.name))}: {t}{opt}")
    # memberwise init
    params = []
    for f in plain:
        params.append(f"{prop_name(f).strip('`')}: {field_swift_type(f)} = {field_default(f)}")
    for oneof in m.oneofs:
        t = oneof_swift_type(oneof)
        if oneof.ann.required:
            params.append(f"{lower_camel(oneof.name)}: {t}")
        else:
            params.append(f"{lower_camel(oneof.name)}: {t}? = nil")
    o()
    o(f"{ind}/// Creates the message; a field not given takes its default (zero, empty, nil or `@default`).")
    if len(params) <= 2:
        o(f"{ind}public init({', '.join(params)}) {{")
    else:
        o(f"{ind}public init(")
        for i, p in enumerate(params):
            o(f"{ind}    {p}{',' if i < len(params) - 1 else ''}")
        o(f"{ind}) {{")
    for f in plain:
        pn = prop_name(f).strip("`")
        o(f"{ind}    self.{pn} = {swift_ident(pn)}")
    for oneof in m.oneofs:
        pn = lower_camel(oneof.name)
        o(f"{ind}    self.{pn} = {swift_ident(pn)}")
    o(f"{ind}}}")
    for oneof in m.oneofs:
        o()
        gen_oneof_enum(o, m, oneof, ind)
    for en in m.enums:
        o()
        gen_enum(o, en, ind)
    for sub in m.messages:
        o()
        gen_struct(o, sub, ind)
    o(f"{indent}}}")


def gen_oneof_enum(o, m, oneof, indent):
    t = oneof_swift_type(oneof)
    o(f"{indent}/// The members of the `{oneof.name}` oneof: exactly one is set.")
    o(f"{indent}public enum {t}: Sendable, Hashable {{")
    for f in oneof.fields:
        o.raw(doc_lines(f.doc, indent + "    ", f"The `{f.name}` member."))
        o(f"{indent}    case {prop_name(f)}({field_swift_elem(f)})")
    o()
    o(f"{indent}    /// The schema name of the member's message (or the field name for scalars), for logs.")
    o(f"{indent}    public var name: String {{")
    o(f"{indent}        switch self {{")
    for f in oneof.fields:
        label = f.resolved[1].name if f.kind == "message" else f.name
        o(f"{indent}        case .{prop_plain(f)}: {swift_string_literal(label)}")
    o(f"{indent}        }}")
    o(f"{indent}    }}")
    o()
    o(f"{indent}    /// The member's field number in the schema.")
    o(f"{indent}    public var fieldNumber: Int {{")
    o(f"{indent}        switch self {{")
    for f in oneof.fields:
        o(f"{indent}        case .{prop_plain(f)}: {f.number}")
    o(f"{indent}        }}")
    o(f"{indent}    }}")
    o(f"{indent}}}")


# --------------------------------------------------------------------------------------------
# Swift code generation: C bridging, validation, JSON
# --------------------------------------------------------------------------------------------


def c_enum_from_swift(expr):
    return f".init(rawValue: .init(truncatingIfNeeded: {expr}.rawValue))"


def field_parts(f):
    """What writing a field's code starts from: its kind, its annotations, its C member and its
    path as a Swift string literal (for error messages)."""
    return f.kind, f.ann, f"c.pointee.{f.name}", swift_string_literal(field_path(f))


def gen_validate_scalar(o, f, expr, ind):
    """Encode-side checks for one value (element) of field f held in `expr`."""
    k, a, _, path = field_parts(f)
    if k == "string":
        req = "true" if (a.required and not f.repeated) else "false"
        o(f"{ind}try _wireCheckString({expr}, {path}, maxLen: {a.max_len}, required: {req})")
    elif k == "bytes":
        req = "true" if (a.required and not f.repeated) else "false"
        o(f"{ind}try _wireCheckBytes({expr}, {path}, maxLen: {a.max_len}, required: {req})")
    elif k in ("int", "uint") and a.range is not None:
        lo, hi = a.range
        o(f"{ind}try _wireCheckRange({expr}, {lo}...{hi}, {path})")


def gen_fill(o, m):
    ctype = c_type_name(m)
    o(f"    func _fill(_ c: UnsafeMutablePointer<{ctype}>, _ arena: WireArena, _ validate: Bool) throws(WireError) {{")
    o(f"        {c_fn_prefix(m)}__init(c)")
    for f in m.fields:
        if f.oneof is not None:
            continue
        gen_fill_field(o, f, f"self.{prop_name(f)}", "        ")
    for oneof in m.oneofs:
        pn = swift_ident(lower_camel(oneof.name))
        if oneof.ann.required:
            o(f"        switch self.{pn} {{")
        else:
            o(f"        switch self.{pn} {{")
            o(f"        case nil:")
            o(f"            break")
        for f in oneof.fields:
            o(f"        case .{prop_plain(f)}(let v):")
            o(f"            c.pointee.{oneof.name}_case = .init(rawValue: {f.number})")
            gen_fill_field(o, f, "v", "            ", in_oneof=True)
        o(f"        }}")
    o(f"    }}")


def gen_fill_field(o, f, expr, ind, in_oneof=False):
    k, a, cf, path = field_parts(f)
    if not f.repeated:
        if k == "message":
            sub = f.resolved[1]
            if a.required or in_oneof:
                o(f"{ind}do {{")
                o(f"{ind}    let p = arena.allocate({c_type_name(sub)}.self)")
                o(f"{ind}    try {expr}._fill(p, arena, validate)")
                o(f"{ind}    {cf} = p")
                o(f"{ind}}}")
            else:
                o(f"{ind}if let v = {expr} {{")
                o(f"{ind}    let p = arena.allocate({c_type_name(sub)}.self)")
                o(f"{ind}    try v._fill(p, arena, validate)")
                o(f"{ind}    {cf} = p")
                o(f"{ind}}}")
            return
        needs_check = k in ("string", "bytes") or a.range is not None
        if needs_check:
            o(f"{ind}if validate {{")
            gen_validate_scalar(o, f, expr, ind + "    ")
            o(f"{ind}}}")
        if k == "string":
            o(f"{ind}if !{expr}.isEmpty {{ {cf} = arena.cString({expr}) }}")
        elif k == "bytes":
            o(f"{ind}if !{expr}.isEmpty {{ {cf} = arena.binary({expr}) }}")
        elif k == "bool":
            o(f"{ind}{cf} = {expr} ? 1 : 0")
        elif k == "enum":
            o(f"{ind}{cf} = {c_enum_from_swift(expr)}")
        else:
            o(f"{ind}{cf} = {expr}")
        return
    # repeated
    o(f"{ind}if !{expr}.isEmpty {{")
    i2 = ind + "    "
    o(f"{i2}let values = {expr}")
    o(f"{i2}if validate {{")
    o(f"{i2}    try _wireCheckCount(values.count, {a.max_count}, {path})")
    if k in ("string", "bytes") or a.range is not None:
        o(f"{i2}    for e in values {{")
        gen_validate_scalar(o, f, "e", i2 + "        ")
        o(f"{i2}    }}")
    o(f"{i2}}}")
    o(f"{i2}{cf.replace('c.pointee.', 'c.pointee.n_')} = values.count")
    if k == "message":
        sub = f.resolved[1]
        o(f"{i2}let array = arena.allocate(UnsafeMutablePointer<{c_type_name(sub)}>?.self, count: values.count)")
        o(f"{i2}for i in 0..<values.count {{")
        o(f"{i2}    let p = arena.allocate({c_type_name(sub)}.self)")
        o(f"{i2}    try values[i]._fill(p, arena, validate)")
        o(f"{i2}    array[i] = p")
        o(f"{i2}}}")
    elif k == "string":
        o(f"{i2}let array = arena.allocate(UnsafeMutablePointer<CChar>?.self, count: values.count)")
        o(f"{i2}for i in 0..<values.count {{ array[i] = arena.cString(values[i]) }}")
    elif k == "bytes":
        o(f"{i2}let array = arena.allocate(ProtobufCBinaryData.self, count: values.count)")
        o(f"{i2}for i in 0..<values.count {{ array[i] = arena.binary(values[i]) }}")
    elif k == "bool":
        o(f"{i2}let array = arena.allocate(protobuf_c_boolean.self, count: values.count)")
        o(f"{i2}for i in 0..<values.count {{ array[i] = values[i] ? 1 : 0 }}")
    elif k == "enum":
        en = f.resolved[1]
        o(f"{i2}let array = arena.allocate({c_type_name(en)}.self, count: values.count)")
        o(f"{i2}for i in 0..<values.count {{ array[i] = {c_enum_from_swift('values[i]')} }}")
    else:
        o(f"{i2}let array = arena.copy(values)")
    o(f"{i2}{cf} = array")
    o(f"{ind}}}")


def gen_decode(o, m):
    ctype = c_type_name(m)
    o(f"    init(_c c: UnsafePointer<{ctype}>) throws(WireError) {{")
    for f in m.fields:
        if f.oneof is not None:
            continue
        gen_decode_field(o, f, f"self.{prop_name(f)}", "        ")
    for oneof in m.oneofs:
        pn = swift_ident(lower_camel(oneof.name))
        t = oneof_swift_type(oneof)
        o(f"        switch c.pointee.{oneof.name}_case.rawValue {{")
        for f in oneof.fields:
            o(f"        case {f.number}:")
            gen_decode_field(o, f, "let v", "            ", in_oneof=True)
            o(f"            self.{pn.strip('`')} = .{prop_plain(f)}(v)")
        o(f"        default:")
        if oneof.ann.required:
            if is_envelope_body(m, oneof):
                o(f"            if c.pointee.base.n_unknown_fields > 0, let unknown = c.pointee.base.unknown_fields {{")
                o(f"                throw .unknownBody(fieldNumber: Int(unknown[0].tag))")
                o(f"            }}")
                o(f"            throw .missingBody")
            else:
                o(f"            throw .missingField({swift_string_literal(m.name + '.' + oneof.name)})")
        else:
            o(f"            self.{pn.strip('`')} = nil")
        o(f"        }}")
    o(f"    }}")


def gen_decode_field(o, f, target, ind, in_oneof=False):
    k, a, cf, path = field_parts(f)
    if not f.repeated:
        if k == "message":
            sub = f.resolved[1]
            st = swift_type_name(sub)
            if a.required or in_oneof:
                o(f"{ind}guard let p_{f.name} = {cf} else {{ throw .missingField({path}) }}")
                o(f"{ind}{target} = try {st}(_c: p_{f.name})")
            else:
                o(f"{ind}if let p = {cf} {{ {target} = try {st}(_c: p) }} else {{ {target} = nil }}")
        elif k == "string":
            req = "true" if a.required else "false"
            o(f"{ind}{target} = try _wireReadString({cf}, {path}, maxLen: {a.max_len}, required: {req})")
        elif k == "bytes":
            req = "true" if a.required else "false"
            o(f"{ind}{target} = try _wireReadBytes({cf}, {path}, maxLen: {a.max_len}, required: {req})")
        elif k == "bool":
            o(f"{ind}{target} = {cf} != 0")
        elif k == "enum":
            en = f.resolved[1]
            o(f"{ind}{target} = try _wireReadEnum({swift_type_name(en)}.self, {cf}.rawValue, {path})")
        else:
            if a.range is not None:
                lo, hi = a.range
                o(f"{ind}{target} = try _wireCheckedRange({cf}, {lo}...{hi}, {path})")
            else:
                o(f"{ind}{target} = {cf}")
        return
    # repeated
    n = f"c.pointee.n_{f.name}"
    o(f"{ind}do {{")
    i2 = ind + "    "
    o(f"{i2}let n = {n}")
    o(f"{i2}try _wireCheckCount(n, {a.max_count}, {path})")
    o(f"{i2}var values: {field_swift_type(f)} = []")
    o(f"{i2}if n > 0 {{")
    o(f"{i2}    guard let array = {cf} else {{ throw .missingField({path}) }}")
    o(f"{i2}    values.reserveCapacity(n)")
    o(f"{i2}    for i in 0..<n {{")
    i4 = i2 + "        "
    if k == "message":
        sub = f.resolved[1]
        o(f"{i4}guard let p = array[i] else {{ throw .missingField({path}) }}")
        o(f"{i4}values.append(try {swift_type_name(sub)}(_c: p))")
    elif k == "string":
        o(f"{i4}values.append(try _wireReadString(array[i], {path}, maxLen: {a.max_len}, required: false))")
    elif k == "bytes":
        o(f"{i4}values.append(try _wireReadBytes(array[i], {path}, maxLen: {a.max_len}, required: false))")
    elif k == "bool":
        o(f"{i4}values.append(array[i] != 0)")
    elif k == "enum":
        en = f.resolved[1]
        o(f"{i4}values.append(try _wireReadEnum({swift_type_name(en)}.self, array[i].rawValue, {path}))")
    else:
        if a.range is not None:
            lo, hi = a.range
            o(f"{i4}values.append(try _wireCheckedRange(array[i], {lo}...{hi}, {path}))")
        else:
            o(f"{i4}values.append(array[i])")
    o(f"{i2}    }}")
    o(f"{i2}}}")
    o(f"{i2}{target} = values")
    o(f"{ind}}}")


def json_value_call(f, expr):
    k = f.kind
    if k == "message":
        return f"{expr}._json(&w)"
    if k == "string":
        return f"w.string({expr})"
    if k == "bytes":
        return f"w.bytes({expr})"
    if k == "bool":
        return f"w.bool({expr})"
    if k == "enum":
        return f"w.string({expr}.protoName)"
    if k == "float":
        return f"w.float({expr})"
    return f"w.integer({expr})"


def gen_json(o, m):
    o(f"    func _json(_ w: inout _JSONWriter) {{")
    o(f"        w.open()")
    for f in m.fields:
        if f.oneof is not None:
            continue
        key = swift_string_literal(lower_camel(f.name))
        pe = f"self.{prop_name(f)}"
        if f.repeated:
            o(f"        w.key({key}); w.openArray()")
            o(f"        for e in {pe} {{ {json_value_call(f, 'e')} }}")
            o(f"        w.closeArray()")
        elif f.kind == "message" and not f.ann.required:
            o(f"        if let v = {pe} {{ w.key({key}); {json_value_call(f, 'v')} }}")
        else:
            o(f"        w.key({key}); {json_value_call(f, pe)}")
    for oneof in m.oneofs:
        pn = swift_ident(lower_camel(oneof.name))
        o(f"        switch self.{pn} {{")
        if not oneof.ann.required:
            o(f"        case nil: break")
        for f in oneof.fields:
            key = swift_string_literal(lower_camel(f.name))
            o(f"        case .{prop_plain(f)}(let v): w.key({key}); {json_value_call(f, 'v')}")
        o(f"        }}")
    o(f"        w.close()")
    o(f"    }}")


def gen_bridge(o, m):
    st = swift_type_name(m)
    ctype = c_type_name(m)
    fn = c_fn_prefix(m)
    o(f"extension {st}: WireMessage, _CMessage {{")
    o(f"    /// The message's name in the schema.")
    o(f"    public static var protoName: String {{ {swift_string_literal(m.name)} }}")
    o()
    o(f"    typealias CStruct = {ctype}")
    o(f"    static func _cUnpack(_ count: Int, _ data: UnsafePointer<UInt8>) -> UnsafeMutablePointer<{ctype}>? {{")
    o(f"        {fn}__unpack(nil, count, data)")
    o(f"    }}")
    o(f"    static func _cFree(_ p: UnsafeMutablePointer<{ctype}>) {{ {fn}__free_unpacked(p, nil) }}")
    o(f"    static func _cPackedSize(_ p: UnsafePointer<{ctype}>) -> Int {{ {fn}__get_packed_size(p) }}")
    o(f"    static func _cPack(_ p: UnsafePointer<{ctype}>, _ out: UnsafeMutablePointer<UInt8>) -> Int {{ {fn}__pack(p, out) }}")
    o()
    if m.name == "Envelope":
        o(f"    /// Encodes the frame, validating every field first; fails with `.oversized` above")
        o(f"    /// `WireLimits.default.maxFrameBytes`.")
    else:
        o(f"    /// Encodes this message alone (not wrapped in an Envelope, e.g. to sign it), validating")
        o(f"    /// every field first.")
    o(f"    public func encoded() throws(WireError) -> [UInt8] {{ try _wireEncode(self, limits: .default, validate: true) }}")
    o()
    o(f"    /// Decodes and validates `{m.name}`{'' if m.name == 'Envelope' else ' encoded alone'}. Never crashes; any bad input is a `WireError`.")
    o(f"    public init(decoding bytes: [UInt8], limits: WireLimits = .default) throws(WireError) {{")
    o(f"        self = try _wireDecode(bytes, limits)")
    o(f"    }}")
    o()
    o(f"    /// Decodes and validates `{m.name}` from borrowed memory, without copying it first.")
    o(f"    public init(decoding bytes: UnsafeRawBufferPointer, limits: WireLimits = .default) throws(WireError) {{")
    o(f"        self = try _wireDecode(bytes, limits)")
    o(f"    }}")
    o()
    o(f"    /// The message as one line of JSON (lowerCamelCase names, enums by name, bytes as hex).")
    o(f"    public func jsonLine() -> String {{")
    o(f"        var w = _JSONWriter()")
    o(f"        _json(&w)")
    o(f"        return w.output")
    o(f"    }}")
    o()
    gen_fill(o, m)
    o()
    gen_decode(o, m)
    o()
    gen_json(o, m)
    o(f"}}")


def swift_file_name(pf):
    base = os.path.splitext(os.path.basename(pf.rel))[0]
    return upper_camel(base) + ".pb.swift"


HEADER = "// Generated by tools/protoc-swift-gen.py from {src}. DO NOT EDIT: run `make proto`.\n"


def gen_swift_file(pf):
    o = Out()
    o.raw(HEADER.format(src="proto/" + pf.rel))
    if pf.doc:
        o("//")
        for l in pf.doc:
            o(f"// {l}".rstrip())
    o()
    o("import CNetplayProto")
    for en in pf.enums:
        o()
        gen_enum(o, en, "")
    for m in pf.messages:
        o()
        gen_struct(o, m, "")

    def walk(m):
        o()
        gen_bridge(o, m)
        for sub in m.messages:
            walk(sub)

    for m in pf.messages:
        walk(m)
    return o.text()
