#!/usr/bin/python3
"""The rounds of bench/vs_torch.sh: smoe train and bench/torch_model.py,
alternating (the order swapped every round). Each process is timed by its
own median step (wall time) and by its CPU time per step: the CPU seconds of
a run of STEPS + 1 steps less those of a 1-step run of the same program
(start-up, set-up and the first step cancel), which load cannot stretch.
usage: vs_torch_rounds.py SMOE TORCH_MODEL ROUNDS STEPS "WIDE_KEYS"
"""
import json
import resource
import statistics
import subprocess
import sys

smoe, tmodel, rounds, steps, wide = sys.argv[1:6]
rounds, steps = int(rounds), int(steps)


def cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(cmd):
    c0 = cpu()
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out), cpu() - c0


def smoe_cmd(name, n):
    keys = wide.split() if name == "wide" else []
    return [smoe, "train", "--steps", str(n), "--quiet", "--json"] + keys


def side(name, which):
    if which == "smoe":
        j, c = run(smoe_cmd(name, steps + 1))
        _, c1 = run(smoe_cmd(name, 1))
        return j["summary"]["median_step_ms"], (c - c1) / steps * 1e3, j["summary"]["params"]
    j, c = run(["/usr/bin/python3", tmodel, name, str(steps)])
    _, c1 = run(["/usr/bin/python3", tmodel, name, "0"])
    return j["median_step_ms"], (c - c1) / steps * 1e3, j["params"]


def q(v):
    return f"{statistics.median(v):.2f} [{min(v):.2f}-{max(v):.2f}]"


for name in ("tiny", "wide"):
    rows = []
    for r in range(rounds):
        order = ("smoe", "torch") if r % 2 == 0 else ("torch", "smoe")
        got = {w: side(name, w) for w in order}
        rows.append((got["smoe"], got["torch"]))
    ps, pt = rows[0][0][2], rows[0][1][2]
    print(f"{name}: parameters smoe {ps}, PyTorch {pt} ({'equal' if ps == pt else 'DIFFERENT'})")
    for i, (s, t) in enumerate(rows):
        print(f"  round {i + 1}: wall step ms smoe {s[0]:8.2f} PyTorch {t[0]:8.2f} "
              f"ratio {t[0] / s[0]:.2f}; CPU ms/step smoe {s[1]:8.2f} PyTorch {t[1]:8.2f} "
              f"ratio {t[1] / s[1]:.2f}")
    for k, what in ((0, "wall step"), (1, "CPU per step")):
        sm, tm = [s[k] for s, _ in rows], [t[k] for _, t in rows]
        ratio = [t / s for s, t in zip(sm, tm)]
        print(f"  {what} ms: smoe {q(sm)}, PyTorch {q(tm)}; "
              f"smoe throughput / PyTorch's {q(ratio)} over {rounds} rounds")
    sys.stdout.flush()
