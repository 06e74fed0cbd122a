#!/bin/sh
# How far a machine's measured rates moved between two cpu-mpi profiles
# (smoe sim --calibrate before and after a measurement): the largest
# relative change of the compute, memory and gather rates, and with
# several hosts of the cross-host gathers' bandwidth and latency and the
# cross-host reductions' bandwidth (a
# latency under 1e-5 s counts as 1e-5: a fit's intercept at noise level,
# whose ratio means nothing; a profile of one host copies the within-host
# figures there, which are checked already). Where both profiles say the
# bytes of a cross-host step of the model's layers (`# dcn_step_bytes`,
# smoe sim --calibrate on the training's mesh), the cross-host figures are
# checked as the time of that step, latency + bytes / bandwidth, for the
# gathers and the reductions: what the simulator charges per step, where a
# latency of 1e-5 or 5e-5 s beside a 0.4 ms transfer is a 10 % change, not
# 400 %. Likewise within a host where both say `# ici_step_bytes` (one
# host: its figures fitted to a layer's gathers and reductions as smoe
# train issues them): ici_step and ici_reduce_step, latency + bytes /
# (bandwidth / 2), in place of ici_bandwidth. A benchmark on a shared
# machine whose rates moved more than LIMIT (default 0.15) during
# its run compares a prediction for one machine with a measurement on
# another: exit 1 then. Where the profiles say it (smoe sim --calibrate's
# "share" comment), the part of a core a rank had in each calibration is
# printed beside: a share that fell is others' load.
# usage: bench/profile_drift.sh BEFORE.yml AFTER.yml [LIMIT]
set -eu
limit=${3:-0.15}
awk -v limit="$limit" '
  FNR == 1 { f++ }
  /^# [0-9]+ host\(s\)/ { hosts[f] = $2 + 0 }
  /share [0-9.]+: the part of a core/ { for (i = 1; i < NF; i++) if ($i == "share") share[f] = $(i + 1) + 0 }
  /^(peak_flops|gemm_small_flops|hbm_bandwidth|ici_bandwidth|ici_latency|ici_reduce_bandwidth|ici_reduce_latency|compute_scale|dcn_bandwidth|dcn_latency|dcn_reduce_bandwidth|dcn_reduce_latency):/ {
    k = $1; sub(":", "", k); v[f, k] = $2 + 0; keys[k] = 1
  }
  /^# dcn_step_bytes [0-9]/ { step[f] = $3 + 0 }
  /^# ici_step_bytes [0-9]/ { istep[f] = $3 + 0 }
  END {
    delete keys["ici_latency"]; delete keys["ici_reduce_latency"]; delete keys["ici_reduce_bandwidth"]
    if (istep[1] > 0 && istep[2] > 0 && v[1, "ici_bandwidth"] > 0 && v[2, "ici_bandwidth"] > 0) {
      for (i = 1; i <= 2; i++) {
        v[i, "ici_step"] = v[i, "ici_latency"] + istep[i] / (v[i, "ici_bandwidth"] / 2)
        if (v[i, "ici_reduce_bandwidth"] > 0)
          v[i, "ici_reduce_step"] = v[i, "ici_reduce_latency"] + istep[i] / (v[i, "ici_reduce_bandwidth"] / 2)
      }
      delete keys["ici_bandwidth"]
      keys["ici_step"] = 1; keys["ici_reduce_step"] = 1
    }
    if (step[1] > 0 && step[2] > 0 && v[1, "dcn_bandwidth"] > 0 && v[2, "dcn_bandwidth"] > 0) {
      for (i = 1; i <= 2; i++) {
        v[i, "dcn_step"] = v[i, "dcn_latency"] + step[i] / v[i, "dcn_bandwidth"]
        if (v[i, "dcn_reduce_bandwidth"] > 0)
          v[i, "dcn_reduce_step"] = v[i, "dcn_reduce_latency"] + step[i] / v[i, "dcn_reduce_bandwidth"]
      }
      delete keys["dcn_latency"]; delete keys["dcn_bandwidth"]
      delete keys["dcn_reduce_latency"]; delete keys["dcn_reduce_bandwidth"]
      keys["dcn_step"] = 1; keys["dcn_reduce_step"] = 1
    } else
      delete keys["dcn_reduce_latency"]
    worst = 0; wk = ""
    for (k in keys) {
      a = v[1, k]; b = v[2, k]
      if (k ~ /^dcn_/ && hosts[1] < 2 && hosts[2] < 2) continue
      if (k == "dcn_latency") { a = a > 1e-5 ? a : 1e-5; b = b > 1e-5 ? b : 1e-5 }
      if (a <= 0 || b <= 0) continue
      d = (b > a ? b / a : a / b) - 1
      if (d > worst) { worst = d; wk = k }
    }
    void = (worst > limit)
    note = void ? sprintf(": more than %.0f%%, the comparison is void (load changed)", 100 * limit) : ""
    sh = (1 in share && 2 in share) ? sprintf("; a rank had %.2f then %.2f of a core", share[1], share[2]) : ""
    printf "machine drift during the run: %.0f%% (%s)%s%s\n", 100 * worst, wk, sh, note
    exit void
  }' "$1" "$2"
