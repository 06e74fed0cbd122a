#!/usr/bin/env python3
"""Derive smoe's table of MaxText config fields from MaxText's own sources.

Reads MaxText's src/maxtext/configs/types.py (the pydantic MaxTextConfig) and
src/maxtext/common/common_types.py (the enums it uses) with Python's ast
module (nothing is imported or executed) and writes one row per field of
MaxTextConfig and of its nested models:

    name <TAB> type <TAB> constraints <TAB> default <TAB> declared in

type is a union ("|") of: int float bool str none any dict list list[T]
enum{v1,v2,...} (a str Enum or a Literal of strings: the accepted values)
intenum{0,1,...} model:NAME (a nested model; its fields are rows NAME.field).
constraints are pydantic's numeric bounds (gt= ge= lt= le=, space separated),
extra=forbid for a nested model that refuses unknown keys, or "-". default is the field's default as JSON, or "-" where it is computed.

Usage: gen-maxtext-fields.py TYPES_PY COMMON_TYPES_PY COMMIT > config_fields.tsv
"""
import ast
import json
import sys

types_src, common_src, commit = sys.argv[1], sys.argv[2], sys.argv[3]
mods = [ast.parse(open(p, encoding="utf-8").read()) for p in (types_src, common_src)]

classes = {}   # name -> ClassDef
aliases = {}   # name -> annotation node
for m in mods:
    for node in m.body:
        if isinstance(node, ast.ClassDef):
            classes[node.name] = node
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            aliases[node.targets[0].id] = node.value

def base_names(c):
    return [ast.unparse(b) for b in c.bases]

def is_enum(c):
    return any(b in ("Enum", "enum.Enum", "enum.IntEnum", "IntEnum") for b in base_names(c))

def enum_values(c):
    vals = []
    for b in c.body:
        if isinstance(b, ast.Assign):
            vals.append(ast.literal_eval(b.value))
    return vals

def is_model(c):
    if "BaseModel" in base_names(c):
        return True
    return any(n in classes and is_model(classes[n]) for n in base_names(c))

def fmt_values(kind, vals):
    for v in vals:
        s = str(v)
        if any(ch in s for ch in ",{}|\t\n"):
            raise SystemExit("value %r cannot be written in the table" % (v,))
    return "%s{%s}" % (kind, ",".join(str(v) for v in vals))

SIMPLE = {"int": "int", "float": "float", "bool": "bool", "str": "str", "Any": "any",
          "dict": "dict", "list": "list", "None": "none", "PathStr": "str", "AxisNames": "str"}
BOUNDED = {"NonNegativeInt": ("int", "ge=0"), "PositiveInt": ("int", "gt=0"),
           "NonNegativeFloat": ("float", "ge=0")}

def conv(a, bounds):
    """Annotation -> list of union members (strings); bounds collects constraints."""
    if isinstance(a, ast.Constant) and a.value is None:
        return ["none"]
    if isinstance(a, ast.BinOp) and isinstance(a.op, ast.BitOr):
        return conv(a.left, bounds) + conv(a.right, bounds)
    if isinstance(a, ast.Name):
        n = a.id
        if n in SIMPLE:
            return [SIMPLE[n]]
        if n in BOUNDED:
            bounds.append(BOUNDED[n][1])
            return [BOUNDED[n][0]]
        if n in classes:
            c = classes[n]
            if is_enum(c):
                vals = enum_values(c)
                if all(isinstance(v, int) for v in vals):
                    return [fmt_values("intenum", vals)]
                return [fmt_values("enum", vals)]
            if is_model(c):
                return ["model:" + n]
        if n in aliases:
            return conv(aliases[n], bounds)
        raise SystemExit("unknown annotation name " + n)
    if isinstance(a, ast.Subscript):
        head = ast.unparse(a.value)
        sl = a.slice
        if head == "Optional":
            return conv(sl, bounds) + ["none"]
        if head == "Literal":
            elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
            vals = [ast.literal_eval(e) for e in elts]
            if all(isinstance(v, str) for v in vals):
                return [fmt_values("enum", vals)]
            raise SystemExit("non-string Literal " + ast.unparse(a))
        if head == "list":
            inner = conv(sl, [])
            return ["list[%s]" % "|".join(inner)]
        if head == "dict":
            return ["dict"]
        if head == "NewType":
            raise SystemExit("NewType in annotation")
    if isinstance(a, ast.Call) and ast.unparse(a.func) == "NewType":
        return conv(a.args[1], bounds)
    raise SystemExit("cannot read annotation " + ast.unparse(a))

def default_of(value):
    """Field default as JSON text, or '-'."""
    if value is None:
        return "-"
    kw = {}
    if isinstance(value, ast.Call) and ast.unparse(value.func) in ("Field", "pydantic.Field"):
        kw = {k.arg: k.value for k in value.keywords}
        if value.args:
            value = value.args[0]
        elif "default" in kw:
            value = kw["default"]
        elif "default_factory" in kw:
            f = ast.unparse(kw["default_factory"])
            return {"list": "[]", "dict": "{}"}.get(f, "-")
        else:
            return "-"
    if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id in classes:
        for b in classes[value.value.id].body:
            if isinstance(b, ast.Assign) and b.targets[0].id == value.attr:
                return json.dumps(ast.literal_eval(b.value))
    try:
        return json.dumps(ast.literal_eval(value))
    except (ValueError, SyntaxError, TypeError):
        return "-"

def field_bounds(value):
    out = []
    if isinstance(value, ast.Call) and ast.unparse(value.func) == "Field":
        for k in value.keywords:
            if k.arg in ("gt", "ge", "lt", "le"):
                out.append("%s=%s" % (k.arg, ast.literal_eval(k.value)))
    return out

def forbids_extra(c):
    for b in c.body:
        if isinstance(b, ast.Assign) and ast.unparse(b.targets[0]) == "model_config":
            return "extra='forbid'" in ast.unparse(b.value)
    return False


def fields_of(cname, seen, rows, prefix=""):
    """Fields of a model class in pydantic's precedence (first base wins)."""
    c = classes[cname]
    own = []
    for b in c.body:
        if isinstance(b, ast.AnnAssign) and isinstance(b.target, ast.Name):
            n = b.target.id
            if n == "model_config" or n.startswith("_"):
                continue
            own.append((n, b))
    for n, b in own:
        if n in seen:
            continue
        seen.add(n)
        bounds = field_bounds(b.value)
        members = conv(b.annotation, bounds)
        for m in members:
            if m.startswith("model:") and forbids_extra(classes[m[6:]]):
                bounds.append("extra=forbid")
        rows.append((prefix + n, "|".join(members), " ".join(bounds) or "-",
                     default_of(b.value), cname))
        for m in members:
            if m.startswith("model:"):
                fields_of(m[6:], set(), rows, prefix + n + ".")
    for base in base_names(c):
        if base in classes and is_model(classes[base]):
            fields_of(base, seen, rows, prefix)

rows = []
fields_of("MaxTextConfig", set(), rows)
print("# MaxText configuration fields: MaxTextConfig in src/maxtext/configs/types.py")
print("# of https://github.com/AI-Hypercomputer/maxtext at commit %s" % commit)
print("# (Copyright Google LLC, Apache License 2.0), with the enums of")
print("# src/maxtext/common/common_types.py. Generated by scripts/gen-maxtext-fields.py;")
print("# do not edit by hand. Columns: name, type, constraints, default (JSON), declared in.")
for r in sorted(rows, key=lambda r: r[0]):
    print("\t".join(r))
