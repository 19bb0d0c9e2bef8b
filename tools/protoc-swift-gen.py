#!/usr/bin/env python3
"""protoc-swift-gen: Swift value types + protobuf-c bridging for the netplay.v1 schema.

Reads the schema as protoc parsed it: a FileDescriptorSet written by
`protoc --descriptor_set_out=FILE --include_source_info --include_imports` (read with the protobuf
Python module, Debian's python3-protobuf), so protoc is the only .proto parser; protoc-c reads the
same files. Writes, for the .proto files named on the command line:

  <swift-out>/<File>.pb.swift      one file per .proto: public structs/enums, conversion to and from
                                   the protobuf-c C structs, validation, JSON rendering
  <tests-out>/Fixtures.pb.swift    a `sample` per message (every field non-default), every Envelope
                                   body as a fixture, and one violation per validation rule

Supported proto3 subset: `syntax`, `package`, `import`, `option` (ignored), messages (nested
messages and enums allowed), top-level and nested enums, scalar fields of every scalar type,
string, bytes, enum and message fields, `repeated`, `oneof`, `reserved` (ignored).
Not supported (rejected with an error): `optional`, `map<>`, groups, extensions, services.

Docs and annotations come from the descriptor's source_code_info: a declaration's leading comment
(the `//` block right above it) followed by its trailing comment (protoc's rule: on the line of its
`;` or `{`, or a block right below it that a blank line or the closing `}` separates from the next
declaration). A file's doc is its first comment block, above `syntax`.

Validation annotations live in the comments of a field (leading or trailing):
  @max_len N     string (UTF-8 bytes) or bytes length; per element for repeated fields
  @max_count N   number of elements of a repeated field
  @range A..B    inclusive range of an integer field (per element when repeated)
  @required      message field must be present; string/bytes must be non-empty;
                 on a oneof: a member must be set
  @default V     default of the Swift memberwise initializer (scalars and bools only)
Every string, bytes and repeated field must declare its limit (@max_len / @max_count), so that
limits live in the schema only.
"""

import argparse
import os
import re
import sys

try:
    from google.protobuf import descriptor_pb2
except ImportError:
    sys.exit("protoc-swift-gen: error: the protobuf Python module is missing (apt-get install python3-protobuf)")

PACKAGE = "netplay.v1"
C_PREFIX = "Netplay__V1__"
C_FN_PREFIX = "netplay__v1__"
SWIFT_NAME_OVERRIDES = {"Error": "ErrorReply"}

SCALARS = {
    # proto type: (swift type, kind)
    "double": ("Double", "float"),
    "float": ("Float", "float"),
    "int32": ("Int32", "int"),
    "sint32": ("Int32", "int"),
    "sfixed32": ("Int32", "int"),
    "int64": ("Int64", "int"),
    "sint64": ("Int64", "int"),
    "sfixed64": ("Int64", "int"),
    "uint32": ("UInt32", "uint"),
    "fixed32": ("UInt32", "uint"),
    "uint64": ("UInt64", "uint"),
    "fixed64": ("UInt64", "uint"),
    "bool": ("Bool", "bool"),
    "string": ("String", "string"),
    "bytes": ("[UInt8]", "bytes"),
}
INT_BOUNDS = {
    "Int32": (-(2**31), 2**31 - 1),
    "Int64": (-(2**63), 2**63 - 1),
    "UInt32": (0, 2**32 - 1),
    "UInt64": (0, 2**64 - 1),
}
SWIFT_KEYWORDS = {
    "associatedtype", "class", "deinit", "enum", "extension", "fileprivate", "func", "import",
    "init", "inout", "internal", "let", "open", "operator", "private", "protocol", "public",
    "rethrows", "static", "struct", "subscript", "typealias", "var", "break", "case", "continue",
    "default", "defer", "do", "else", "fallthrough", "for", "guard", "if", "in", "repeat",
    "return", "switch", "where", "while", "as", "Any", "catch", "false", "is", "nil", "super",
    "self", "Self", "throw", "throws", "true", "try", "Type", "some", "any", "consume",
}
C_KEYWORDS = {
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while", "bool", "base",
}
ANNOTATIONS_WITH_ARG = {"max_len", "max_count", "range", "default"}
ANNOTATIONS_NO_ARG = {"required"}


class GenError(Exception):
    pass


# --------------------------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------------------------


class Ann:
    def __init__(self):
        self.max_len = None
        self.max_count = None
        self.range = None
        self.required = False
        self.default = None


def parse_comment(lines, where):
    """Splits comment lines into (doc lines, Ann)."""
    ann = Ann()
    doc = []
    for text in lines:
        words = text.split()
        kept = []
        i = 0
        while i < len(words):
            w = words[i]
            if w.startswith("@") and len(w) > 1 and w[1].isalpha():
                name = w[1:]
                if name in ANNOTATIONS_NO_ARG:
                    ann.required = True
                elif name in ANNOTATIONS_WITH_ARG:
                    if i + 1 >= len(words):
                        raise GenError(f"{where}: @{name} needs an argument")
                    arg = words[i + 1]
                    i += 1
                    if name == "max_len":
                        ann.max_len = int(arg)
                    elif name == "max_count":
                        ann.max_count = int(arg)
                    elif name == "range":
                        mm = re.fullmatch(r"(-?\d+)\.\.(-?\d+)", arg)
                        if not mm:
                            raise GenError(f"{where}: @range wants A..B, got {arg!r}")
                        ann.range = (int(mm.group(1)), int(mm.group(2)))
                    elif name == "default":
                        ann.default = arg
                else:
                    raise GenError(f"{where}: unknown annotation @{name}")
            else:
                kept.append(w)
            i += 1
        stripped = " ".join(kept) if kept else ""
        # keep the original spacing of the prose when no annotation was removed
        doc.append(text if len(kept) == len(words) else stripped)
    while doc and not doc[-1].strip():
        doc.pop()
    while doc and not doc[0].strip():
        doc.pop(0)
    return doc, ann


class Field:
    def __init__(self, name, type_name, number, repeated, doc, ann, oneof, where):
        self.name = name
        self.type_name = type_name
        self.number = number
        self.repeated = repeated
        self.doc = doc
        self.ann = ann
        self.oneof = oneof
        self.where = where
        self.resolved = None  # ("scalar", proto) | ("enum", Enum) | ("message", Message)
        self.message = None

    @property
    def kind(self):
        if self.resolved[0] == "scalar":
            return SCALARS[self.resolved[1]][1]
        return self.resolved[0]


class Oneof:
    def __init__(self, name, doc, ann, where):
        self.name = name
        self.doc = doc
        self.ann = ann
        self.fields = []
        self.where = where


class Enum:
    def __init__(self, name, parent, doc, where):
        self.name = name
        self.parent = parent
        self.doc = doc
        self.values = []  # (name, number, doc)
        self.where = where
        self.file = None

    @property
    def path(self):
        return (self.parent.path if self.parent else []) + [self.name]


class Message:
    def __init__(self, name, parent, doc, where):
        self.name = name
        self.parent = parent
        self.doc = doc
        self.fields = []
        self.oneofs = []
        self.messages = []
        self.enums = []
        self.where = where
        self.file = None

    @property
    def path(self):
        return (self.parent.path if self.parent else []) + [self.name]


class ProtoFile:
    def __init__(self, path, rel):
        self.path = path
        self.rel = rel
        self.doc = []
        self.imports = []
        self.messages = []
        self.enums = []


# --------------------------------------------------------------------------------------------
# Reading protoc's FileDescriptorSet
# --------------------------------------------------------------------------------------------

# Field numbers of the descriptor.proto fields that source_code_info paths walk through.
FILE_MESSAGE, FILE_ENUM, FILE_SYNTAX = 4, 5, 12
MSG_FIELD, MSG_NESTED, MSG_ENUM, MSG_ONEOF = 2, 3, 4, 8
ENUM_VALUE = 2


def comment_lines(text):
    """protoc's comment text (each `//` line without its slashes, joined by newlines) as the
    lines a doc comment is made of: one leading space dropped, trailing blanks stripped."""
    if not text:
        return []
    out = []
    for line in text.split("\n"):
        out.append((line[1:] if line.startswith(" ") else line).rstrip())
    if text.endswith("\n"):
        out.pop()
    return out


class DescriptorReader:
    """Builds the model from one .proto's FileDescriptorProto. Comments come from its
    source_code_info: a declaration's leading comment plus its trailing comment (on the line
    of its `;` or `{`) make its doc and annotations."""

    def __init__(self, fdp):
        self.fdp = fdp
        self.rel = fdp.name
        self.locs = {tuple(loc.path): loc for loc in fdp.source_code_info.location}
        if not self.locs:
            raise GenError(f"{self.rel}: the descriptor set has no source info (protoc --include_source_info)")

    def where(self, path):
        loc = self.locs.get(tuple(path))
        return f"{self.rel}:{loc.span[0] + 1}" if loc else self.rel

    def comment(self, path):
        loc = self.locs.get(tuple(path))
        if loc is None:
            return []
        return comment_lines(loc.leading_comments) + comment_lines(loc.trailing_comments)

    def read(self):
        fdp = self.fdp
        where = self.rel
        if fdp.syntax != "proto3":
            raise GenError(f"{self.where([FILE_SYNTAX])}: only proto3 is supported")
        if fdp.package != PACKAGE:
            raise GenError(f"{where}: package must be {PACKAGE}, got {fdp.package}")
        if fdp.service:
            raise GenError(f"{where}: service is not supported")
        if fdp.extension:
            raise GenError(f"{where}: extend is not supported")
        pf = ProtoFile(where, where)
        pf.imports = list(fdp.dependency)
        # File doc: the first comment block of the file, above `syntax` (attached to it or not).
        syntax = self.locs.get((FILE_SYNTAX,))
        if syntax is not None:
            if syntax.leading_detached_comments:
                pf.doc = comment_lines(syntax.leading_detached_comments[0])
            else:
                pf.doc = comment_lines(syntax.leading_comments)
        for i, e in enumerate(fdp.enum_type):
            pf.enums.append(self.read_enum(e, None, [FILE_ENUM, i]))
        for i, m in enumerate(fdp.message_type):
            pf.messages.append(self.read_message(m, None, [FILE_MESSAGE, i]))
        return pf

    def read_enum(self, ed, parent, path):
        doc, _ = parse_comment(self.comment(path), self.where(path))
        en = Enum(ed.name, parent, doc, self.where(path))
        for i, v in enumerate(ed.value):
            vpath = path + [ENUM_VALUE, i]
            vdoc, _ = parse_comment(self.comment(vpath), self.where(vpath))
            en.values.append((v.name, v.number, vdoc))
        return en

    def read_message(self, md, parent, path):
        where = self.where(path)
        if md.extension or md.extension_range:
            raise GenError(f"{where}: extensions are not supported by this generator")
        doc, _ = parse_comment(self.comment(path), where)
        msg = Message(md.name, parent, doc, where)
        for i, n in enumerate(md.nested_type):
            if n.options.map_entry:
                raise GenError(f"{where}: 'map' is not supported by this generator")
            msg.messages.append(self.read_message(n, msg, path + [MSG_NESTED, i]))
        for i, e in enumerate(md.enum_type):
            msg.enums.append(self.read_enum(e, msg, path + [MSG_ENUM, i]))
        for i, od in enumerate(md.oneof_decl):
            opath = path + [MSG_ONEOF, i]
            odoc, oann = parse_comment(self.comment(opath), self.where(opath))
            msg.oneofs.append(Oneof(od.name, odoc, oann, self.where(opath)))
        for i, fd in enumerate(md.field):
            msg.fields.append(self.read_field(fd, msg, path + [MSG_FIELD, i]))
        return msg

    def read_field(self, fd, msg, path):
        F = descriptor_pb2.FieldDescriptorProto
        where = self.where(path)
        if fd.proto3_optional:
            raise GenError(f"{where}: 'optional' is not supported by this generator")
        if fd.type == F.TYPE_GROUP:
            raise GenError(f"{where}: 'group' is not supported by this generator")
        if fd.label == F.LABEL_REQUIRED:
            raise GenError(f"{where}: 'required' is not supported by this generator")
        if fd.type in (F.TYPE_MESSAGE, F.TYPE_ENUM):
            type_name = fd.type_name  # fully qualified by protoc: ".netplay.v1.Outer.Inner"
        else:
            type_name = F.Type.Name(fd.type)[len("TYPE_"):].lower()
        doc, ann = parse_comment(self.comment(path), where)
        oneof = msg.oneofs[fd.oneof_index] if fd.HasField("oneof_index") else None
        f = Field(fd.name, type_name, fd.number, fd.label == F.LABEL_REPEATED, doc, ann, oneof, where)
        if oneof is not None:
            oneof.fields.append(f)
        return f


# --------------------------------------------------------------------------------------------
# Naming helpers
# --------------------------------------------------------------------------------------------


def lower_camel(snake):
    parts = snake.split("_")
    out = parts[0].lower() + "".join(p[:1].upper() + p[1:].lower() for p in parts[1:])
    return out


def upper_camel(snake):
    s = lower_camel(snake)
    return s[:1].upper() + s[1:]


def camel_to_upper_snake(name):
    out = ""
    for i, ch in enumerate(name):
        if ch.isupper() and i > 0 and not name[i - 1].isupper():
            out += "_"
        out += ch.upper()
    return out


def protoc_c_camel_to_lower(name):
    # Mirrors protoc-c's CamelToLower: an underscore before an upper-case letter that follows a
    # lower-case letter or digit.
    out = ""
    was_upper = True
    for ch in name:
        is_upper = ch.isupper()
        if is_upper and not was_upper:
            out += "_"
        out += ch.lower()
        was_upper = is_upper
    return out


def swift_ident(name):
    return f"`{name}`" if name in SWIFT_KEYWORDS else name


def swift_type_name(node):
    return ".".join(SWIFT_NAME_OVERRIDES.get(p, p) if i == 0 else p for i, p in enumerate(node.path))


def c_type_name(node):
    return C_PREFIX + "__".join(node.path)


def c_fn_prefix(node):
    return C_FN_PREFIX + "__".join(protoc_c_camel_to_lower(p) for p in node.path)


def swift_string_literal(s):
    out = '"'
    for ch in s:
        if ch == "\\":
            out += "\\\\"
        elif ch == '"':
            out += '\\"'
        elif ch == "\n":
            out += "\\n"
        elif ord(ch) < 0x20:
            out += "\\u{%x}" % ord(ch)
        else:
            out += ch
    return out + '"'


def doc_lines(doc, indent, fallback=None):
    lines = doc if doc else ([fallback] if fallback else [])
    return "".join(f"{indent}/// {l}".rstrip() + "\n" for l in lines)


def enum_case_name(enum, value_name):
    prefix = camel_to_upper_snake(enum.name) + "_"
    body = value_name[len(prefix):] if value_name.startswith(prefix) else value_name
    name = lower_camel(body.lower())
    if name[:1].isdigit():
        name = "_" + name
    return swift_ident(name)


# --------------------------------------------------------------------------------------------
# Schema: resolution and checks
# --------------------------------------------------------------------------------------------


class Schema:
    def __init__(self, files):
        self.files = files
        self.types = {}  # "A.B" -> Message | Enum
        for pf in files:
            for m in pf.messages:
                self._register(m, pf)
            for e in pf.enums:
                self._register(e, pf)
        for m in self.all_messages():
            for f in m.fields:
                self._resolve(m, f)
        self._check()

    def _register(self, node, pf):
        key = ".".join(node.path)
        if key in self.types:
            raise GenError(f"{node.where}: duplicate type {key}")
        node.file = pf
        self.types[key] = node
        if isinstance(node, Message):
            for n in node.messages:
                self._register(n, pf)
            for e in node.enums:
                self._register(e, pf)

    def all_messages(self):
        out = []

        def walk(m):
            out.append(m)
            for n in m.messages:
                walk(n)

        for pf in self.files:
            for m in pf.messages:
                walk(m)
        return out

    def all_enums(self):
        return [t for t in self.types.values() if isinstance(t, Enum)]

    def _resolve(self, msg, f):
        f.message = msg
        t = f.type_name
        if t in SCALARS:
            f.resolved = ("scalar", t)
            return
        # protoc has resolved the name already: ".netplay.v1.Outer.Inner".
        prefix = "." + PACKAGE + "."
        node = self.types.get(t[len(prefix):]) if t.startswith(prefix) else None
        if node is None:
            raise GenError(f"{f.where}: unknown type {f.type_name}")
        f.resolved = ("enum" if isinstance(node, Enum) else "message", node)

    def _check(self):
        for e in self.all_enums():
            if not e.values or e.values[0][1] != 0:
                raise GenError(f"{e.where}: the first value of enum {e.name} must be 0")
            for (vn, num, _) in e.values:
                if num < 0:
                    raise GenError(f"{e.where}: negative enum values are not supported ({vn})")
        for m in self.all_messages():
            seen = {}
            for f in m.fields:
                if f.number in seen:
                    raise GenError(f"{f.where}: field number {f.number} used twice in {m.name}")
                seen[f.number] = f
                if f.name in C_KEYWORDS:
                    raise GenError(f"{f.where}: field name {f.name!r} is a C keyword")
                if f.name != f.name.lower():
                    raise GenError(f"{f.where}: field names must be lower_snake_case ({f.name})")
                k = f.kind
                a = f.ann
                if k in ("string", "bytes") and a.max_len is None:
                    raise GenError(f"{f.where}: {m.name}.{f.name} needs @max_len")
                if f.repeated and a.max_count is None:
                    raise GenError(f"{f.where}: {m.name}.{f.name} needs @max_count")
                if a.max_len is not None and k not in ("string", "bytes"):
                    raise GenError(f"{f.where}: @max_len only applies to string/bytes")
                if a.max_count is not None and not f.repeated:
                    raise GenError(f"{f.where}: @max_count only applies to repeated fields")
                if a.range is not None and k not in ("int", "uint"):
                    raise GenError(f"{f.where}: @range only applies to integer fields")
                if a.range is not None:
                    lo, hi = a.range
                    tmin, tmax = INT_BOUNDS[swift_scalar(f)]
                    if lo > hi or lo < tmin or hi > tmax:
                        raise GenError(f"{f.where}: @range {lo}..{hi} is not valid for {f.type_name}")
                if a.required and (f.repeated or k not in ("message", "string", "bytes")):
                    raise GenError(f"{f.where}: @required applies to message, string and bytes fields")
                if a.required and f.oneof is not None:
                    raise GenError(f"{f.where}: put @required on the oneof, not its member")
                if a.default is not None and (f.repeated or k not in ("int", "uint", "bool", "float")):
                    raise GenError(f"{f.where}: @default applies to singular scalar fields")
            # recursion check: a struct cannot contain itself by value
        for m in self.all_messages():
            self._check_cycle(m, [m])

    def _check_cycle(self, m, stack):
        for f in m.fields:
            if f.kind == "message" and not f.repeated:
                sub = f.resolved[1]
                if sub in stack:
                    raise GenError(f"{f.where}: recursive message {sub.name} is not supported")
                self._check_cycle(sub, stack + [sub])


def swift_scalar(f):
    return SCALARS[f.resolved[1]][0]


def field_swift_elem(f):
    k = f.kind
    if k == "message" or k == "enum":
        return swift_type_name(f.resolved[1])
    return swift_scalar(f)


def field_swift_type(f):
    elem = field_swift_elem(f)
    if f.repeated:
        return f"[{elem}]"
    if f.kind == "message" and not f.ann.required:
        return f"{elem}?"
    return elem


def field_default(f):
    if f.repeated:
        return "[]"
    k = f.kind
    if k == "message":
        return f"{field_swift_elem(f)}()" if f.ann.required else "nil"
    if k == "enum":
        en = f.resolved[1]
        return "." + enum_case_name(en, en.values[0][0])
    if f.ann.default is not None:
        return f.ann.default
    return {"bool": "false", "string": '""', "bytes": "[]", "float": "0", "int": "0", "uint": "0"}[k]


def prop_name(f):
    return swift_ident(lower_camel(f.name))


def prop_plain(f):
    return lower_camel(f.name)


def field_path(f):
    return f"{f.message.name}.{f.name}"


def oneof_swift_type(oneof):
    return upper_camel(oneof.name)


def is_envelope_body(msg, oneof):
    return msg.name == "Envelope" and msg.parent is None and oneof.name == "body"


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


def gen_validate_scalar(o, f, expr, ind):
    """Encode-side checks for one value (element) of field f held in `expr`."""
    k = f.kind
    a = f.ann
    path = swift_string_literal(field_path(f))
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
    k = f.kind
    a = f.ann
    cf = f"c.pointee.{f.name}"
    path = swift_string_literal(field_path(f))
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
    k = f.kind
    a = f.ann
    cf = f"c.pointee.{f.name}"
    path = swift_string_literal(field_path(f))
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


# --------------------------------------------------------------------------------------------
# Test fixtures: samples, body list, violations
# --------------------------------------------------------------------------------------------


def sample_scalar(f, index=0):
    """A non-default Swift literal for one element of field f."""
    k = f.kind
    a = f.ann
    n = f.number + index
    if k == "bool":
        return "false" if a.default == "true" else "true"
    if k == "float":
        return f"{n}.5" if f.resolved[1] == "double" else f"{n}.25"
    if k in ("int", "uint"):
        if a.range is not None:
            lo, hi = a.range
            cands = [hi - index, lo + index, (lo + hi) // 2]
            for c in cands:
                if lo <= c <= hi and c != 0 and str(c) != (a.default or ""):
                    return str(c)
            return str(hi)
        t = swift_scalar(f)
        if t == "UInt64":
            return str((1 << 40) + n)
        if t == "Int64":
            return str(-((1 << 33) + n))
        if t == "UInt32":
            return str(4_000_000_000 + n)
        return str(-(1000 + n))
    if k == "string":
        s = f"{f.name}-{n}"
        return swift_string_literal(s[: a.max_len])
    if k == "bytes":
        b = [0x01 + index, 0xAB, 0x00, 0xFF, n & 0xFF][: a.max_len]
        return "[" + ", ".join("0x%02X" % x for x in b) + "]"
    if k == "enum":
        en = f.resolved[1]
        vn = en.values[-1 - (index % max(1, len(en.values) - 1))][0]
        return "." + enum_case_name(en, vn)
    if k == "message":
        return f"{swift_type_name(f.resolved[1])}.sample"
    raise GenError(k)


def sample_field(f):
    if f.repeated:
        count = min(2, f.ann.max_count)
        return "[" + ", ".join(sample_scalar(f, i) for i in range(count)) + "]"
    return sample_scalar(f)


def gen_samples(o, schema):
    for m in schema.all_messages():
        st = swift_type_name(m)
        args = []
        for f in m.fields:
            if f.oneof is None:
                args.append(f"{prop_plain(f)}: {sample_field(f)}")
        for oneof in m.oneofs:
            f = oneof.fields[0]
            args.append(f"{lower_camel(oneof.name)}: .{prop_plain(f)}({sample_scalar(f)})")
        o(f"extension {st} {{")
        o(f"    /// A `{m.name}` with every field set to a non-default, valid value.")
        if not args:
            o(f"    static var sample: {st} {{ {st}() }}")
        else:
            o(f"    static var sample: {st} {{")
            o(f"        {st}(")
            for i, a in enumerate(args):
                o(f"            {a}{',' if i < len(args) - 1 else ''}")
            o(f"        )")
            o(f"    }}")
        o(f"}}")
        o()


def violation_cases(f):
    """(label, swift expression assigning the bad value given `target`, expected WireError)."""
    a = f.ann
    k = f.kind
    path = swift_string_literal(field_path(f))
    out = []
    if f.repeated:
        out.append((
            f"{field_path(f)} @max_count {a.max_count}",
            lambda t, f=f: f"{t} = Array(repeating: {sample_scalar(f)}, count: {a.max_count + 1})",
            f".tooLong(field: {path}, limit: {a.max_count})",
        ))
    if a.max_len is not None:
        if k == "string":
            bad = f'String(repeating: "x", count: {a.max_len + 1})'
        else:
            bad = f"[UInt8](repeating: 7, count: {a.max_len + 1})"
        if f.repeated:
            bad = f"[{bad}]"
        out.append((f"{field_path(f)} @max_len {a.max_len}", lambda t, bad=bad: f"{t} = {bad}",
                    f".tooLong(field: {path}, limit: {a.max_len})"))
    if a.range is not None:
        lo, hi = a.range
        tmin, tmax = INT_BOUNDS[swift_scalar(f)]
        for bad in ([hi + 1] if hi < tmax else []) + ([lo - 1] if lo > tmin else []):
            val = f"[{bad}]" if f.repeated else str(bad)
            detail = swift_string_literal(f"{bad} is outside {lo}...{hi}")
            out.append((f"{field_path(f)} @range {lo}..{hi} ({bad})", lambda t, val=val: f"{t} = {val}",
                        f".outOfRange(field: {path}, detail: {detail})"))
    if a.required and not f.repeated:
        if k == "message":
            # a required message is non-optional in Swift; its absence can only be produced on
            # the wire, which the hand-written tests cover.
            pass
        else:
            empty = '""' if k == "string" else "[]"
            out.append((f"{field_path(f)} @required", lambda t, empty=empty: f"{t} = {empty}",
                        f".missingField({path})"))
    return out


def gen_violations(o, schema, envelope):
    body = envelope.oneofs[0]
    # shortest access path from an Envelope body to every reachable message type
    paths = {}
    queue = []
    for f in body.fields:
        if f.kind == "message":
            sub = f.resolved[1]
            if sub not in paths:
                paths[sub] = (f, [])
                queue.append(sub)
    while queue:
        msg = queue.pop(0)
        root, steps = paths[msg]
        for f in msg.fields:
            if f.kind != "message" or f.oneof is not None:
                continue
            sub = f.resolved[1]
            if sub in paths:
                continue
            if f.repeated:
                step = f".{prop_name(f)}[0]"
            elif f.ann.required:
                step = f".{prop_name(f)}"
            else:
                step = f".{prop_name(f)}?"
            paths[sub] = (root, steps + [step])
            queue.append(sub)
    count = 0
    o("/// One broken field value per validation rule in the schema, reached from an Envelope body,")
    o("/// with the error encoding (and decoding the unvalidated encoding) must report.")
    o("let wireViolations: [WireViolation] = [")
    for msg in schema.all_messages():
        if msg not in paths:
            continue
        root, steps = paths[msg]
        rmsg = root.resolved[1]
        for f in msg.fields:
            if f.oneof is not None:
                continue
            for (label, assign, expected) in violation_cases(f):
                target = "m" + "".join(steps) + f".{prop_name(f)}"
                o(f"    WireViolation(")
                o(f"        label: {swift_string_literal(label)},")
                o(f"        body: {{ var m = {swift_type_name(rmsg)}.sample; {assign(target)}; return .{prop_plain(root)}(m) }}(),")
                o(f"        expected: {expected}")
                o(f"    ),")
                count += 1
    o("]")
    return count


def gen_fixtures(schema):
    envelope = schema.types.get("Envelope")
    if envelope is None or not envelope.oneofs:
        raise GenError("the schema needs an Envelope message with a oneof body")
    body = envelope.oneofs[0]
    o = Out()
    o.raw(HEADER.format(src="proto/netplay/v1/*.proto"))
    o("//")
    o("// Test fixtures: a valid sample of every message, every Envelope body, and every rule broken once.")
    o()
    o("import NetplayWire")
    o()
    gen_samples(o, schema)
    o("/// One sample Envelope body per member of the `Envelope.body` oneof, in field-number order.")
    o("let allBodySamples: [Envelope.Body] = [")
    for f in sorted(body.fields, key=lambda f: f.number):
        o(f"    .{prop_plain(f)}({sample_scalar(f)}),")
    o("]")
    o()
    o("/// The sample of every message of the schema, nested ones included.")
    o("let allMessageSamples: [any WireMessage] = [")
    for m in schema.all_messages():
        if m.name == "Envelope" and m.parent is None:
            continue
        o(f"    {swift_type_name(m)}.sample,")
    o("]")
    o()
    o(f"/// The number of messages in the schema (Envelope excluded).")
    o(f"let schemaMessageCount = {len(schema.all_messages()) - 1}")
    o()
    o(f"/// The number of members of the `Envelope.body` oneof in the schema.")
    o(f"let schemaBodyMemberCount = {len(body.fields)}")
    o()
    o("/// A validation rule broken on purpose.")
    o("struct WireViolation: Sendable {")
    o("    /// The rule, e.g. `Room.room_id @max_len 64`.")
    o("    var label: String")
    o("    /// The body holding the broken value.")
    o("    var body: Envelope.Body")
    o("    /// What NetplayWire must report.")
    o("    var expected: WireError")
    o("}")
    o()
    n = gen_violations(o, schema, envelope)
    o()
    o(f"/// The number of validation rules in the schema reachable from an Envelope body.")
    o(f"let schemaViolationCount = {n}")
    return o.text()


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------


def load(descriptor_set, files):
    """The model of the named .proto files (paths relative to the proto root, as protoc names
    them) from a FileDescriptorSet written by protoc --include_source_info --include_imports."""
    fds = descriptor_pb2.FileDescriptorSet()
    with open(descriptor_set, "rb") as fh:
        fds.ParseFromString(fh.read())
    by_name = {fdp.name: fdp for fdp in fds.file}
    out = []
    for name in sorted(files):
        if name not in by_name:
            raise GenError(f"{name}: not in the descriptor set {descriptor_set}")
        out.append(DescriptorReader(by_name[name]).read())
    return Schema(out)


def check_c_names(schema, header_dir):
    """Every C symbol the Swift code uses must exist in the protoc-c headers."""
    text = ""
    for root, _, names in os.walk(header_dir):
        for n in names:
            if n.endswith(".pb-c.h"):
                with open(os.path.join(root, n), encoding="utf-8") as fh:
                    text += fh.read()
    for m in schema.all_messages():
        for sym in (c_fn_prefix(m) + "__init", c_fn_prefix(m) + "__unpack", "struct  " + c_type_name(m)):
            if sym not in text:
                raise GenError(f"{m.where}: protoc-c did not generate {sym!r}; the name mapping is wrong")


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--descriptor-set", required=True,
                    help="protoc --descriptor_set_out output, with --include_source_info --include_imports")
    ap.add_argument("--swift-out", required=True)
    ap.add_argument("--tests-out", required=True)
    ap.add_argument("--c-headers", help="protoc-c output to check symbol names against")
    ap.add_argument("protos", nargs="+", help="the .proto files to generate, as protoc names them (netplay/v1/x.proto)")
    args = ap.parse_args()
    try:
        schema = load(args.descriptor_set, args.protos)
        if args.c_headers:
            check_c_names(schema, args.c_headers)
        for pf in schema.files:
            write(os.path.join(args.swift_out, swift_file_name(pf)), gen_swift_file(pf))
        write(os.path.join(args.tests_out, "Fixtures.pb.swift"), gen_fixtures(schema))
    except GenError as e:
        print(f"protoc-swift-gen: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
