#!/usr/bin/env python3
"""One step of a smoe trace (smoe train --trace or smoe sim --trace) as a
timeline: the compute units of one rank with the gap before each (the
wait), and the gathers and reductions in batches (ops issued within 2 ms
of each other), each batch's issue, last end and ops, in ms from the
step's start.

usage: trace_steps.py TRACE.json [--pid N] [--step K]
  train: --pid is the rank (default 0), --step the step (default: the one
  of median length after the first); sim: --pid the schedule's row
  (baseline 0, prefetch 1, ...), its one step.
"""
import json
import statistics
import sys

LANES = {0: "compute", 1: "gathers", 2: "reductions"}
BATCH_GAP_US = 2000.0


def load(path):
    with open(path) as f:
        d = json.load(f)
    return d["traceEvents"] if isinstance(d, dict) else d


def step_bounds(spans):
    """Start of each step: a span named 'embed' on the compute lane."""
    starts = sorted(e["ts"] for e in spans if e["tid"] == 0 and e["name"] == "embed")
    end = max(e["ts"] + e["dur"] for e in spans)
    return [(a, b) for a, b in zip(starts, starts[1:] + [end])]


def batches(ops):
    out = []
    for e in sorted(ops, key=lambda e: e["ts"]):
        if out and e["ts"] - out[-1]["last_issue"] <= BATCH_GAP_US:
            b = out[-1]
            b["n"] += 1
            b["last_issue"] = e["ts"]
            b["end"] = max(b["end"], e["ts"] + e["dur"])
        else:
            out.append({"ts": e["ts"], "last_issue": e["ts"], "end": e["ts"] + e["dur"], "n": 1,
                        "name": e["name"]})
    return out


def main(argv):
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    path, pid, step = argv[1], 0, None
    args = argv[2:]
    while args:
        if args[0] == "--pid" and len(args) > 1:
            pid = int(args[1])
        elif args[0] == "--step" and len(args) > 1:
            step = int(args[1])
        else:
            sys.stderr.write(f"trace_steps.py: unknown argument {args[0]}\n")
            return 2
        args = args[2:]
    spans = [e for e in load(path)
             if e.get("ph") == "X" and e.get("pid") == pid and e.get("tid") in LANES]
    if not spans:
        sys.stderr.write(f"trace_steps.py: {path}: no spans for pid {pid}\n")
        return 1
    bounds = step_bounds(spans)
    if not bounds:
        sys.stderr.write(f"trace_steps.py: {path}: no step (no 'embed' span) for pid {pid}\n")
        return 1
    if step is None:
        later = bounds[1:] or bounds
        med = statistics.median_low([b - a for a, b in later])
        step = bounds.index(next(x for x in later if x[1] - x[0] == med))
    if not 0 <= step < len(bounds):
        sys.stderr.write(f"trace_steps.py: {path}: step {step} of {len(bounds)}\n")
        return 1
    t0, t1 = bounds[step]
    inside = [e for e in spans if t0 <= e["ts"] < t1]
    print(f"{path}: pid {pid}, step {step} of {len(bounds)}: {(t1 - t0) / 1e3:.1f} ms")
    rows = []
    prev_end = t0
    for e in sorted((e for e in inside if e["tid"] == 0), key=lambda e: e["ts"]):
        gap = max(0.0, e["ts"] - prev_end)
        rows.append((e["ts"], f"  compute    {(e['ts'] - t0) / 1e3:8.1f} {e['dur'] / 1e3:7.1f}"
                              f"   after a gap of {gap / 1e3:6.1f}  {e['name']}"))
        prev_end = max(prev_end, e["ts"] + e["dur"])
    for tid in (1, 2):
        for b in batches(e for e in inside if e["tid"] == tid):
            rows.append((b["ts"], f"  {LANES[tid]:10s} {(b['ts'] - t0) / 1e3:8.1f}"
                                  f" to {(b['end'] - t0) / 1e3:7.1f}  {b['n']:3d} ops, first {b['name']}"))
    for _, line in sorted(rows, key=lambda r: r[0]):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
