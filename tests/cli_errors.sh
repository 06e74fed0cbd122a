#!/bin/sh
# Bad input gets one clear line naming file:line:col or the argument, and
# exit status 2; never a crash. usage: cli_errors.sh SMOE_BINARY DATA_DIR
smoe=$1
data=$2
pass=0
fail=0
err=$(mktemp)
trap 'rm -f "$err"' EXIT

# expect PATTERN ARGS...: exit status 2, one line on stderr matching PATTERN
expect() {
  pattern=$1
  shift
  "$smoe" "$@" >/dev/null 2>"$err"
  rc=$?
  lines=$(wc -l <"$err")
  if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && grep -Eq "$pattern" "$err"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL: smoe $* -> exit $rc, $lines line(s):" >&2
    sed 's/^/    /' "$err" >&2
    echo "    expected: $pattern" >&2
  fi
}

expect "broken_rules.yml:[0-9]+:[0-9]+: malformed YAML" plan --devices 4 --rules "$data/bad/broken_rules.yml"
expect "bad_axis.yml:2:[0-9]+: unknown mesh axis 'experts'" plan --devices 4 --rules "$data/bad/bad_axis.yml"
expect "argument 'ici_expert_parallelism=-1': .*at most one" plan --devices 16 ici_expert_parallelism=-1
# an enum's values listed once, in one pair of braces
expect "'weight_dtype' must be one of \\{bfloat16,float32,float16\\}, got 'float8' \\(MaxTextConfig: enum" \
  plan --devices 4 weight_dtype=float8
expect "argument '--devices 16': the mesh has 8 devices" plan --devices 16 ici_fsdp_parallelism=4 ici_expert_parallelism=2
expect "argument '--devices 6': cannot fill ici_fsdp_parallelism" plan --devices 6 ici_expert_parallelism=4
expect "argument '--model nope': unknown model 'nope'" plan --devices 4 --model nope
expect "argument 'model_name=nope': unknown model 'nope'" plan --devices 4 model_name=nope
expect "argument '--rules nope': unknown rule set 'nope'" plan --devices 4 --rules nope
expect "$data/bad: is a directory, not a YAML file" plan --devices 4 --rules "$data/bad"
expect "$data/bad: is a directory, not a YAML file" plan --devices 4 --base "$data/bad"
expect "argument 'custom_mesh_and_rule=nope': unknown rule set" plan --devices 4 custom_mesh_and_rule=nope
expect "dup_logical.json:6:[0-9]+: .*logical axis 'mlp' is used twice" plan --devices 4 --params "$data/bad/dup_logical.json"
expect "broken.json:3:[0-9]+: malformed JSON" plan --devices 4 --params "$data/bad/broken.json"
expect "missing.json: cannot open file" plan --devices 4 --params "$data/bad/missing.json"
expect "/dev/zero: larger than 16 MiB" plan --devices 4 --params /dev/zero
expect "dup_key_late.json:4:3: duplicate key '.step'" plan --devices 4 --params "$data/bad/dup_key_late.json"
expect "argument 'ici_expert_parallelism=four': 'ici_expert_parallelism' must be an integer" plan --devices 4 ici_expert_parallelism=four
# compressed gathers: an unknown dtype, a block out of range or without int8,
# a stored size that is not fp32, an int8 block a weight's shard cannot hold
expect "^smoe: --gather-dtype 'fp16': not a gather dtype \\(fp32\\|bf16\\|int8\\)$" plan --devices 4 --gather-dtype fp16
expect "argument '--int8-block 1': must be between 2 and 4096" plan --devices 4 --gather-dtype int8 --int8-block 1
expect "argument '--int8-block': needs --gather-dtype int8" plan --devices 4 --int8-block 64
expect "argument '--int8-fallback': needs --gather-dtype int8" plan --devices 4 --int8-fallback bf16
expect "^smoe: --int8-fallback 'int8': not an int8 fallback dtype \\(fp32\\|bf16\\)$" plan --devices 4 --gather-dtype int8 --int8-fallback int8
expect "argument '--dtype-bytes': a bf16 gather converts fp32 master weights" plan --devices 4 --gather-dtype bf16 --dtype-bytes 2
expect "argument '--gather-dtype int8': [a-z_/0-9]+: int8 gather: the shard's last dim \\([0-9]+.*\\) is not a whole number of int8 blocks of 4096" plan --devices 4 --gather-dtype int8 --int8-block 4096
# built-in enumeration: what it does not have is refused by name
expect "argument 'mtp_num_layers=1': multi-token prediction .* deepseek only" plan --devices 4 mtp_num_layers=1
expect "argument 'decoder_block=simple': decoder_block 'simple' has no built-in enumeration" plan --devices 4 decoder_block=simple
expect "argument 'use_multimodal=true': the vision encoder 'none' is not in the built-in enumeration" plan --devices 4 use_multimodal=true
expect "argument 'use_audio=true': MaxText has no audio encoder for model 'default'" plan --devices 4 use_audio=true
expect "base.yml:[0-9]+:[0-9]+: decoder_block gemma4_small needs scan_layers=false" plan --devices 4 decoder_block=gemma4_small
expect "argument 'mhc_expansion_rate=30': mhc_expansion_rate must be >= 1" plan --devices 4 --model deepseek2-16b mhc_expansion_rate=30 enable_mhc_lite=true
expect "argument 'inhomogeneous_layer_cycle_interval=5': .*divide the number of decoder layers" plan --devices 4 decoder_block=olmo3 inhomogeneous_layer_cycle_interval=5
expect "argument 'base_emb_dim=1.5': 'base_emb_dim' must be an integer" plan --devices 4 base_emb_dim=1.5
expect "argument 'no_such_key=1': unknown key 'no_such_key'" plan --devices 4 no_such_key=1
expect "argument 'fsdp_shard_on_exp=true': 'fsdp_shard_on_exp' and 'shard_exp_on_fsdp' are one setting" plan --devices 4 shard_exp_on_fsdp=true fsdp_shard_on_exp=true
expect "argument 'tile_batch_seq=x': 'tile_batch_seq' must be an integer" plan --devices 4 tile_batch_seq=x
expect "argument 'ici_expert_parallelism': expected an option or KEY=VALUE" plan --devices 4 ici_expert_parallelism
expect "argument '--devices abc': expected an integer" plan --devices abc
expect "argument '--devices 0': must be between" plan --devices 0
expect "argument '--devices': is required" plan --model deepseek2-16b
expect "argument '--bogus': unknown option" plan --devices 4 --bogus
expect "argument '--dtype-bytes x': expected an integer" plan --devices 4 --dtype-bytes x
expect "argument '--legacy': cannot be combined with --compare" plan --devices 4 --compare --legacy
expect "argument 'frobnicate': unknown command" frobnicate
expect "nope.yml: cannot open config file" plan --devices 4 --base "$data/bad/nope.yml"
expect "argument 'base_emb_dim=4096': 'base_emb_dim' is set by the model file" plan --devices 4 --model deepseek2-16b base_emb_dim=4096
expect "argument 'logical_axis_rules=\[\[embed\]\]': .*logical axis rule must be" plan --devices 4 "logical_axis_rules=[[embed]]"
expect "argument '--topology v5p-7': unknown topology 'v5p-7' .*v5p-8" plan --topology v5p-7
expect "argument '--topology v5p-16': give --devices or --topology" plan --topology v5p-16 --devices 8
expect "argument 'weight_dtype=float8': 'weight_dtype' must be one of \{bfloat16,float32,float16\}" plan --devices 4 weight_dtype=float8
expect "argument 'rope_factor=8.5': 'rope_factor' must be an integer" plan --devices 4 rope_factor=8.5
expect "argument 'logical_axis_rules=\[\[exp, experts\]\]': resource axis 'experts' of the rule for 'exp' is not found in the mesh" plan --devices 64 --model deepseek2-16b ici_fsdp_parallelism=-1 ici_expert_parallelism=4 "logical_axis_rules=[[exp, experts]]"
expect "rule_missing_axis.yml:3:22: resource axis 'experts' of the rule for 'embed' is not found in the mesh" plan --devices 8 --model "$data/bad/rule_missing_axis.yml" ici_fsdp_parallelism=-1

expect "argument '--hardware nope': no hardware profile" sim --devices 4 --hardware nope
expect "argument '--scenario nope': no scenario file" sim --scenario nope
expect "argument '--hardware': is required" sim --devices 4
expect "^smoe: --gather-dtype 'fp8': not a gather dtype" sim --scenario seed --gather-dtype fp8
expect "argument '--gather-dtype int8': decoder/[a-z_/0-9]+: int8 gather: the shard's last dim \\(56 over" sim --scenario seed --gather-dtype int8
expect "argument '--remat sometimes': expected full, none or save-dot-products" sim --devices 4 --hardware tpu7x --remat sometimes
expect "bad_hw.yml:4:13: 'peak_flops' must be a number" sim --devices 4 --hardware "$data/bad/bad_hw.yml"
expect "argument '--hbm-budget lots': expected a byte count" sim --devices 4 --hardware tpu7x --hbm-budget lots
expect "argument '--progress-thread': is read only with --calibrate" sim --devices 4 --hardware tpu7x --progress-thread
expect "argument '--no-progress-thread': is read only with --calibrate" sim --devices 4 --hardware tpu7x --no-progress-thread
expect "argument '--no-progress-thread': contradicts the other progress-thread option" sim --calibrate --progress-thread --no-progress-thread

# hardware profiles and scenarios: every number range-checked at its
# file:line:col (the bundled files edited one value at a time)
cfg=$(dirname "$data")/../configs
[ -d "$cfg/hardware" ] || cfg=$(dirname "$0")/../configs
simtmp=$(mktemp -d)
trap 'rm -f "$err"; rm -rf "$simtmp"' EXIT
hw_edit() { # KEY VALUE: replaced, or added where the profile lacks the key
  if grep -q "^$1:" "$cfg/hardware/tpu7x.yml"; then
    sed "s/^$1: .*/$1: $2/" "$cfg/hardware/tpu7x.yml" >"$simtmp/hw.yml"
  else
    (cat "$cfg/hardware/tpu7x.yml"; echo "$1: $2") >"$simtmp/hw.yml"
  fi
}
scn_edit() { sed "s/^$1: .*/$1: $2/" "$cfg/scenarios/seed.yml" >"$simtmp/scn.yml"; }
hw_edit ici_bandwidth 1e-300
expect "hw.yml:[0-9]+:16: 'ici_bandwidth' = 1e-300 must be in" sim --scenario seed --hardware "$simtmp/hw.yml"
hw_edit devices_per_node 1e30
expect "hw.yml:[0-9]+:19: 'devices_per_node' = 1e30 must be in" sim --scenario seed --hardware "$simtmp/hw.yml"
hw_edit devices_per_node 2.5
expect "'devices_per_node' = 2.5 must be an integer" sim --scenario seed --hardware "$simtmp/hw.yml"
hw_edit collective_engines 1e19
expect "'collective_engines' = 1e19 must be in" sim --scenario seed --hardware "$simtmp/hw.yml"
hw_edit compute_efficiency 7
expect "'compute_efficiency' = 7 must be 0 or in" sim --scenario seed --hardware "$simtmp/hw.yml"
hw_edit compute_efficiency 0
expect "hw.yml:[0-9]+:[0-9]+: 'gemm_efficiency' needs a compute_efficiency" sim --scenario seed --hardware "$simtmp/hw.yml"
hw_edit dcn_latency -1
expect "'dcn_latency' = -1 must be in" sim --scenario seed --hardware "$simtmp/hw.yml"
scn_edit prefetch_depth 1e12
expect "scn.yml:[0-9]+:17: 'prefetch_depth' = 1e12 must be in \\[0, 64\\]" sim --scenario "$simtmp/scn.yml"
scn_edit seq_len 1e300
expect "'seq_len' = 1e300 must be in" sim --scenario "$simtmp/scn.yml"
scn_edit devices 130
expect "scn.yml:[0-9]+:10 \\(devices: 130\\): cannot fill ici_fsdp_parallelism" sim --scenario "$simtmp/scn.yml"
(cat "$cfg/scenarios/seed.yml"; echo "slices: 1e300") >"$simtmp/scn.yml"
expect "'slices' = 1e300 must be in" sim --scenario "$simtmp/scn.yml"
expect "argument 'num_experts_per_tok=300': num_experts_per_tok = 300 exceeds num_experts = 256" sim --scenario seed num_experts_per_tok=300
expect "argument '--prefetch-depth 65': must be between 0 and 64" sim --scenario seed --prefetch-depth 65
# a key that restates a fact the scenario or an option fixes must agree with it
expect "argument 'max_target_length=4096': max_target_length contradicts --seq 8192 \\(or the scenario's seq_len\\): give it one way" sim --scenario seed max_target_length=4096
expect "argument 'per_device_batch_size=2': per_device_batch_size contradicts --batch 1" sim --scenario seed per_device_batch_size=2
expect "argument 'remat_policy=minimal': remat_policy contradicts --remat full" sim --scenario seed remat_policy=minimal
expect "argument 'weight_dtype=float32': weight_dtype contradicts --dtype-bytes 2" sim --scenario seed --dtype-bytes 2 weight_dtype=float32
expect "argument 'max_target_length=-5': max_target_length contradicts --seq 4096" sim --model deepseek2-16b --hardware tpu7x --devices 8 --seq 4096 max_target_length=-5
export MAXTEXT_MAX_TARGET_LENGTH=4096 # the environment restates it as well
expect "^smoe: environment variable MAXTEXT_MAX_TARGET_LENGTH: max_target_length contradicts --seq 8192" sim --scenario seed
unset MAXTEXT_MAX_TARGET_LENGTH
# smoe's compressed gathers take fp32 weights: a reading of bf16 ones is named
# a trace's layer times are one shape's: readings may not vary the tokens
expect "argument '--profile [^']*profile.json': its layer times are one shape's, and the scenario's readings vary seq_len: fix it with --seq" sim --scenario seed --profile "$data/sim/profile.json"
expect "argument '--gather-dtype bf16': reading R4 stores 2-byte weights \\(dtype_bytes\\).*--dtype-bytes 4" sim --scenario seed --gather-dtype bf16

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
