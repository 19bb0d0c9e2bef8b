"""protoc-swift-gen's model of a schema: the names and limits it knows, the annotated
declarations, and how it reads them from protoc's FileDescriptorSet (docs: tools/protoc-swift-gen.py)."""

import re
import sys

try:
    from google.protobuf import descriptor_pb2  # noqa: F401 (the reader walks its messages)
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
