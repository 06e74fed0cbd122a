#!/usr/bin/python3
"""The rounds of bench/vs_torch.sh: smoe train and bench/torch_model.py,
alternating (the order swapped every round), and with BASE_SMOE a second
smoe build (e.g. main) as a third side, the three in rotating order. Each
process is timed by its own median step (wall time) and by its CPU time per
step: the CPU seconds of a run of STEPS + 1 steps less those of a 1-step run
of the same program (start-up, set-up and the first step cancel), which load
cannot stretch.
usage: vs_torch_rounds.py SMOE TORCH_MODEL ROUNDS STEPS "WIDE_KEYS" [BASE_SMOE]
"""
import json
import resource
import statistics
import subprocess
import sys

smoe, tmodel, rounds, steps, wide = sys.argv[1:6]
base = sys.argv[6] if len(sys.argv) > 6 and sys.argv[6] else None
rounds, steps = int(rounds), int(steps)


def cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(cmd):
    c0 = cpu()
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out), cpu() - c0


def smoe_cmd(binary, name, n):
    keys = wide.split() if name == "wide" else []
    return [binary, "train", "--steps", str(n), "--quiet", "--json"] + keys


def side(name, which):
    if which in ("smoe", "base"):
        binary = smoe if which == "smoe" else base
        j, c = run(smoe_cmd(binary, name, steps + 1))
        _, c1 = run(smoe_cmd(binary, name, 1))
        return j["summary"]["median_step_ms"], (c - c1) / steps * 1e3, j["summary"]["params"]
    j, c = run(["/usr/bin/python3", tmodel, name, str(steps)])
    _, c1 = run(["/usr/bin/python3", tmodel, name, "0"])
    return j["median_step_ms"], (c - c1) / steps * 1e3, j["params"]


def q(v):
    return f"{statistics.median(v):.2f} [{min(v):.2f}-{max(v):.2f}]"


sides = ["smoe", "torch"] + (["base"] if base else [])
for name in ("tiny", "wide"):
    rows = []
    for r in range(rounds):
        order = sides[r % len(sides):] + sides[:r % len(sides)]
        if not base and r % 2:
            order = order[::-1]
        rows.append({w: side(name, w) for w in order})
    ps, pt = rows[0]["smoe"][2], rows[0]["torch"][2]
    print(f"{name}: parameters smoe {ps}, PyTorch {pt} ({'equal' if ps == pt else 'DIFFERENT'})")
    for i, g in enumerate(rows):
        s, t = g["smoe"], g["torch"]
        line = (f"  round {i + 1}: wall step ms smoe {s[0]:8.2f} PyTorch {t[0]:8.2f} "
                f"ratio {t[0] / s[0]:.2f}; CPU ms/step smoe {s[1]:8.2f} PyTorch {t[1]:8.2f} "
                f"ratio {t[1] / s[1]:.2f}")
        if base:
            b = g["base"]
            line += f"; base CPU ms/step {b[1]:8.2f} (PyTorch / base {t[1] / b[1]:.2f})"
        print(line)
    for k, what in ((0, "wall step"), (1, "CPU per step")):
        sm = [g["smoe"][k] for g in rows]
        tm = [g["torch"][k] for g in rows]
        ratio = [t / s for s, t in zip(sm, tm)]
        print(f"  {what} ms: smoe {q(sm)}, PyTorch {q(tm)}; "
              f"smoe throughput / PyTorch's {q(ratio)} over {rounds} rounds")
        if base:
            bm = [g["base"][k] for g in rows]
            print(f"  {what} ms: base {q(bm)}; base throughput / PyTorch's "
                  f"{q([t / b for b, t in zip(bm, tm)])}; smoe / base "
                  f"{q([b / s for s, b in zip(sm, bm)])}")
    sys.stdout.flush()
