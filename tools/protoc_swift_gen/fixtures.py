"""protoc-swift-gen's test fixtures: a sample of every message, every Envelope body, and one
violation per validation rule."""

import re

from .model import *  # noqa: F401,F403
from .schema import *  # noqa: F401,F403
from .swift import *  # noqa: F401,F403

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
