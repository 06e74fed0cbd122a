#!/usr/bin/env python3
"""Write the pydantic coercion oracle for smoe's MaxText field table.

Imports MaxText's types.py with its heavy imports (jax, flax, numpy, jinja2,
maxtext.utils) replaced by stubs, and for one field of every distinct type
in data/maxtext/config_fields.tsv (plus a few named ones) validates a set of
YAML values the way pyconfig does: YAML typed by a PyYAML SafeLoader with
OmegaConf's float resolver, a string "none" (any case) turned into None,
then pydantic v2 (lax mode) on the field's own annotation and constraints.
Each row: field <TAB> YAML input <TAB> "error" or the validated value as JSON.

Usage: gen-pydantic-cases.py TYPES_PY COMMON_TYPES_PY FIELDS_TSV > cases.tsv
Needs pydantic 2 and PyYAML; the output is committed, so tests need neither.
"""
import enum
import importlib.util
import json
import re
import sys
import types as _t

import pydantic
import yaml


class _Any:
    def __or__(self, o): return self
    def __ror__(self, o): return self
    def __float__(self): return 1.0
    def __int__(self): return 1
    def __getattr__(self, k): return _Any()
    def __call__(self, *a, **k): return _Any()


def stub(name, **attrs):
    m = _t.ModuleType(name)
    m.__dict__.update(attrs)
    sys.modules[name] = m
    return m


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


for n in ("numpy", "jax.numpy", "jax"):
    stub(n, __getattr__=lambda k: _Any())
stub("flax", struct=_t.SimpleNamespace(dataclass=lambda *a, **k: a[0] if a else (lambda c: c)))
stub("jinja2", Environment=object, TemplateSyntaxError=Exception)
for n in ("maxtext", "maxtext.common", "maxtext.utils"):
    stub(n)
for n in ("gcs_utils", "max_utils", "elastic_utils", "accelerator_to_spec_map"):
    stub("maxtext.utils." + n, __getattr__=lambda k: _Any())
stub("maxtext.utils.globals", MAXTEXT_ASSETS_ROOT="/x", HF_IDS={})
load("maxtext.common.common_types", sys.argv[2])
T = load("mt_types", sys.argv[1])


class OmegaLoader(yaml.SafeLoader):
    pass


# OmegaConf's loader: floats also without a '.', e.g. 1e6
OmegaLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                |\.[0-9_]+(?:[eE][-+][0-9]+)?
                |[-+]?\.(?:inf|Inf|INF)
                |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."))

INPUTS = ["8", "8.0", "8.5", "-1", "0", "1", "2", "1_000", "1e3", "1.0e6", "-0.0",
          '"8"', "'8.0'", '" 7 "', "true", "false", "yes", "off", "null", "~", "none",
          "None", '"NONE"', '""', "abc", "bfloat16", "remat", "auto", "llama2",
          "fp8", "'true'", "'1'", "'0'", "[1, 2]", "[1.0, 2]", "[1.5]", "[a, b]",
          "'1_000'", "' 2.0 '", "'inf'", "'nan'", "'T'", "'off'", "' yes'", "'1e3'",
          "[]", "[[1, 2]]", "[true]", "[null]", "{a: 1}", "{}", "{algo: orpo}",
          "{lora_rank: 4}", "{bogus: 1}", ".inf", "0.5"]

NAMED = ["rope_factor", "rope_max_timescale", "image_size_for_vit", "vision_encoder_block",
         "decoder_block", "quantization", "custom_mesh_and_rule", "weight_dtype",
         "dpo", "lora", "xprof_tpu_power_trace_level", "lora.lora_rank"]
SKIP = {"logical_axis_rules", "data_sharding", "train_data_columns", "eval_data_columns",
        "trainable_parameters_mask", "adamw_mask", "model_name", "run_name", "tokenizer_path",
        "hf_train_files", "hf_eval_files", "hf_access_token", "hf_name", "hf_data_dir",
        "hf_eval_split", "dump_hlo_local_module_name", "dump_hlo_module_name",
        "constant_bound_config"}

rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[3], encoding="utf-8")
        if not l.startswith("#")]
typ_of = {r[0]: r[1] for r in rows}
picked, seen = [], set()
for name, typ, bounds, _default, _cls in rows:
    if name in SKIP:
        continue
    if (typ, bounds) not in seen or name in NAMED:
        seen.add((typ, bounds))
        picked.append(name)
for n in NAMED:
    if n not in picked:
        picked.append(n)


def field_info(name):
    model = T.MaxTextConfig
    parts = name.split(".")
    for p in parts[:-1]:
        model = model.model_fields[p].annotation
    return model.model_fields[parts[-1]]


def plain(v):
    if isinstance(v, enum.Enum):
        return v.value
    if isinstance(v, pydantic.BaseModel):
        return {k: plain(x) for k, x in v.model_dump().items()}
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    return v


print("# pydantic %s on MaxText's MaxTextConfig field annotations; see scripts/gen-pydantic-cases.py"
      % pydantic.VERSION)
for name in sorted(picked):
    fi = field_info(name)
    model = pydantic.create_model("M", x=(fi.annotation, fi))
    enums = [m for m in typ_of[name].split("|") if m.startswith("enum{") or m.startswith("intenum{")]
    extra = []
    for m in enums:
        vals = m[m.index("{") + 1:-1].split(",")
        extra += ['"%s"' % vals[0], '"%s"' % vals[-1], vals[-1], '"%s"' % vals[-1].upper(), "%s " % vals[0]]
    for text in INPUTS + extra:
        v = yaml.load("v: " + text, Loader=OmegaLoader)["v"]
        if isinstance(v, str) and v.lower() == "none":
            v = None
        try:
            out = json.dumps(plain(model(x=v).x), allow_nan=True)
        except pydantic.ValidationError:
            out = "error"
        if out in ("Infinity", "-Infinity", "NaN"):
            out = {"Infinity": ".inf", "-Infinity": "-.inf", "NaN": ".nan"}[out]
        print("%s\t%s\t%s" % (name, text, out))
