"""protoc-swift-gen's naming rules (proto, Swift and protoc-c names) and the resolved schema
with its checks."""

import re

from .model import *  # noqa: F401,F403

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


def enum_value_body(enum, value_name):
    """A value's name without its enumeration's prefix: SERVICE_STATE_READY -> READY."""
    prefix = camel_to_upper_snake(enum.name) + "_"
    return value_name[len(prefix):] if value_name.startswith(prefix) else value_name


def enum_short_name(enum, value_name):
    """The lower-case name logs, events and command lines use: SERVICE_STATE_READY -> ready."""
    return enum_value_body(enum, value_name).lower()


def enum_case_name(enum, value_name):
    name = lower_camel(enum_value_body(enum, value_name).lower())
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
