"""The overlap benchmark's table and goals (bench/overlap.sh) from the JSON
of one `smoe train --compare` run (no-prefetch, prefetch and legacy taking
turns step by step, so the machine's load falls on the three alike).

Per schedule, over its steps after the warm-up round (the run's first
warmup_steps_skipped steps, all schedules' together: one step of each),
the median and quartiles of the step, the exposed all-gather wait, the
wait for gradient reductions (a gradient buffer, the final drain), the
all-to-all and the compute. Then the two goals:
  hidden = 1 - prefetch's exposed wait / no-prefetch's (median over steps);
  step / max(C, L), where C is what a step costs when transfers are free
  (no-prefetch's median of step - exposed all-gather - reduction waits:
  the compute, the all-to-all, the optimizer, the bookkeeping) and L the
  link's time per step (the busiest host's bytes sent per step over RATE,
  measured by overlap.sh on the link's interface; absent on one host).
Then the CPU time of the ranks' processes per step (every thread: training,
progress, MPI's; user and kernel, summed over ranks) over the machine's
cores (SMOE_CORES, else this machine's count): where the ranks share the
cores, no schedule's step is shorter than its own CPU time over the cores,
so the prefetch step is also given over that floor, and C over
no-prefetch's own floor (C below it: part of no-prefetch's CPU work runs
inside its waits, so C is no bound a schedule can reach). Also prefetch's
own step less its waits (its C), beside no-prefetch's.
usage: overlap_table.py RUN.json [HOST_BYTES_PER_STEP RATE_BITS_PER_S]
"""
import os
import json
import statistics
import sys


def quart(v):
    v = sorted(v)
    if len(v) == 1:
        return v[0], v[0], v[0]
    q = statistics.quantiles(v, n=4, method="inclusive")
    return q[1], q[0], q[2]


def fail(msg):
    sys.exit("overlap_table.py: " + msg)


def counted(name, r):
    """The steps of schedule `name` that its summary counts: those after the
    run's first warmup_steps_skipped steps (a count over the whole run, the
    schedules taking turns, not over this schedule's own steps)."""
    first = r["first_step"] + r["summary"]["warmup_steps_skipped"]
    steps = [s for s in r["steps"] if s["step"] >= first]
    if len(steps) != r["summary"]["steps_counted"]:
        fail("%s: %d steps after the warm-up round, but its summary counts %d"
             % (name, len(steps), r["summary"]["steps_counted"]))
    if not steps:
        fail("%s: no step after the warm-up round (run more steps)" % name)
    return steps


def main():
    run = json.load(open(sys.argv[1]))["runs"]
    link = None
    if len(sys.argv) > 3:
        link = float(sys.argv[2]) * 8 / float(sys.argv[3]) * 1e3  # ms
    cols = [("step", "step_ms"), ("exposed AG", "exposed_gather_ms"),
            ("reduce wait", "reduce_wait_ms"), ("a2a", "a2a_ms"), ("compute", "compute_ms"),
            ("CPU", "cpu_ms"), ("of which kernel", "sys_ms"), ("compute CPU", "compute_cpu_ms")]
    med = {}
    print("| schedule | steps | " + " | ".join(c[0] + " ms" for c in cols) + " |")
    print("|---" * (len(cols) + 2) + "|")
    for k in ("no_prefetch", "prefetch", "legacy"):
        r = run[k]
        steps = counted(k, r)
        med[k] = {f: quart([s[f] for s in steps]) for _, f in cols}
        free = [s["step_ms"] - s["exposed_gather_ms"] - s["reduce_wait_ms"] for s in steps]
        med[k]["free"] = quart(free)
        cells = ["%.1f [%.1f-%.1f]" % med[k][f] for _, f in cols]
        print("| %s | %d | %s |" % (k.replace("_", "-"), len(steps), " | ".join(cells)))
    np_, p = med["no_prefetch"], med["prefetch"]
    hid = 1 - p["exposed_gather_ms"][0] / np_["exposed_gather_ms"][0]
    print("hidden: %.1f%% of no-prefetch's exposed wait (%.1f -> %.1f ms/step; goal >= 95%%)"
          % (100 * hid, np_["exposed_gather_ms"][0], p["exposed_gather_ms"][0]))
    c = np_["free"][0]
    bound = max(c, link) if link is not None else c
    what = "C %.1f ms (no-prefetch step less its waits, IQR %.1f-%.1f)" % (c, np_["free"][1],
                                                                       np_["free"][2])
    if link is not None:
        what += ", L %.1f ms (link)" % link
    print("prefetch step / max(C, L): %.1f / %.1f = %.3f (goal <= 1.05); %s"
          % (p["step_ms"][0], bound, p["step_ms"][0] / bound, what))
    print("prefetch step / no-prefetch step: %.3f" % (p["step_ms"][0] / np_["step_ms"][0]))
    cores = int(os.environ.get("SMOE_CORES") or os.cpu_count())
    fp, fn = p["cpu_ms"][0] / cores, np_["cpu_ms"][0] / cores
    print("CPU floor (the ranks' CPU time per step over %d cores): prefetch %.1f ms "
          "(kernel %.1f of %.1f ms CPU), no-prefetch %.1f ms (kernel %.1f of %.1f)"
          % (cores, fp, p["sys_ms"][0], p["cpu_ms"][0], fn, np_["sys_ms"][0], np_["cpu_ms"][0]))
    print("prefetch step / its CPU floor: %.1f / %.1f = %.3f (the ranks had %.2f of the %d "
          "cores); C / no-prefetch's CPU floor: %.1f / %.1f = %.3f"
          % (p["step_ms"][0], fp, p["step_ms"][0] / fp, p["cpu_ms"][0] / p["step_ms"][0], cores,
             c, fn, c / fn))
    print("prefetch's CPU floor / C: %.3f (%s)" % (fp / c, "above 1.05: a prefetch step of "
          "1.05 x C is out of reach on these cores" if fp > 1.05 * c else "at most 1.05"))
    print("prefetch's own C (its step less its waits): %.1f ms; prefetch step / that: %.3f"
          % (p["free"][0], p["step_ms"][0] / p["free"][0]))


main()
