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
import sys

sys.dont_write_bytecode = True  # no __pycache__ in tools/
from protoc_swift_gen.model import *  # noqa: E402,F401,F403
from protoc_swift_gen.schema import *  # noqa: E402,F401,F403
from protoc_swift_gen.swift import *  # noqa: E402,F401,F403
from protoc_swift_gen.fixtures import *  # noqa: E402,F401,F403

# The parts, in tools/protoc_swift_gen/: model.py (names, limits, the annotated declarations, the
# descriptor reader), schema.py (naming rules, resolution and checks), swift.py (the Swift writer),
# fixtures.py (the test fixtures). This file is the program.


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
