#!/usr/bin/python3
"""smoe against PyTorch eager on one GPU, bf16 matmul inputs with fp32
accumulation on both sides, in one run (the issue's speed benchmark).

Each round runs, for every model (tiny, wide, big: bench_models.h and
torch_model.py's configurations, parameter counts checked equal):
bench_train_dev --device cuda --matmul-dtype bf16 and torch_model.py
--device cuda --dtype bf16, the order swapped every other round, then a
bf16 GEMM of 8192^3 through torch.matmul (cuBLAS) timed with CUDA events.
Per model it reports the medians over the rounds of both sides' median
step, the speed-up (PyTorch's step / smoe's), smoe's model FLOP rate
(3 x the forward's FLOPs at its mean step) and that rate over the GEMM
rate of the same run. It asserts nothing; --out writes the JSON.
usage: vs_torch_gpu.py BIN_DIR CONFIG_DIR DATA_FILE [--rounds R] [--steps S]
       [--models tiny,wide,big] [--out FILE] [--device cuda|cpu]
  BIN_DIR holds bench_train_dev; torch_model.py is beside this file.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def run_json(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd), p.returncode, p.stderr.strip()))
    return json.loads(p.stdout.strip().splitlines()[-1])


def gemm_tflops(device, n=8192, reps=20):
    import time
    import torch
    if device == "cpu":  # the driver's dry run: a small product
        n, reps = 512, 3
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        torch.matmul(a, b)
    if device == "cpu":
        t0 = time.perf_counter()
        for _ in range(reps):
            torch.matmul(a, b)
        return 2.0 * n ** 3 * reps / (time.perf_counter() - t0) / 1e12
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(reps):
        torch.matmul(a, b)
    e1.record()
    torch.cuda.synchronize()
    return 2.0 * n ** 3 * reps / (e0.elapsed_time(e1) * 1e-3) / 1e12


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin_dir")
    ap.add_argument("config_dir")
    ap.add_argument("data")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--models", default="tiny,wide,big")
    ap.add_argument("--out")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                    help="cpu: a dry run of the driver where there is no GPU")
    a = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    torch_model = os.path.join(here, "torch_model.py")
    models = a.models.split(",")
    res = {m: {"smoe": [], "torch": [], "smoe_tflops": [], "params": None} for m in models}
    gemm = []
    for r in range(a.rounds):
        for m in models:
            smoe = [os.path.join(a.bin_dir, "bench_train_dev"), a.config_dir, a.data,
                    "--device", a.device, "--matmul-dtype", "bf16", "--model", m,
                    "--steps", str(a.steps)]
            torch = [sys.executable, torch_model, m, str(a.steps), "--device", a.device,
                     "--dtype", "bf16"]
            sides = [("smoe", smoe), ("torch", torch)]
            if r % 2:
                sides.reverse()
            for name, cmd in sides:
                j = run_json(cmd)
                res[m][name].append(j["median_step_ms"])
                if name == "smoe":
                    res[m]["smoe_tflops"].append(j["tflops"])
                    res[m]["params"] = j["params"]
                elif res[m]["params"] not in (None, j["params"]):
                    raise RuntimeError("%s: %d parameters in smoe, %d in PyTorch"
                                       % (m, res[m]["params"], j["params"]))
        gemm.append(gemm_tflops(a.device))
        print("round %d: %s; GEMM %.1f TFLOP/s" % (r + 1, ", ".join(
            "%s smoe %.2f ms torch %.2f ms" % (m, res[m]["smoe"][-1], res[m]["torch"][-1])
            for m in models), gemm[-1]), flush=True)
    g = statistics.median(gemm)
    out = {"rounds": a.rounds, "steps": a.steps, "gemm_tflops": g, "models": {}}
    print("model   params        smoe_ms  torch_ms  speed-up  smoe_TFLOP/s  of_GEMM")
    for m in models:
        s, t = statistics.median(res[m]["smoe"]), statistics.median(res[m]["torch"])
        f = statistics.median(res[m]["smoe_tflops"])
        out["models"][m] = {"params": res[m]["params"], "smoe_ms": s, "torch_ms": t,
                            "speedup": t / s, "smoe_tflops": f, "of_gemm": f / g}
        print("%-6s  %-12d  %7.2f  %8.2f  %8.2f  %12.1f  %7.3f"
              % (m, res[m]["params"], s, t, t / s, f, f / g))
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
