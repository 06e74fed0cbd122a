"""The samples of `perf script -F comm,tid,ip,sym,dso` (call chains) on
stdin sorted into classes by what the sampled thread was doing (the first
class whose mark is in the chain), as shares of all samples, for the
training threads (those with at least 5 % of the samples) and the others
(progress threads, MPI's). bench/overlap_perf.sh runs it."""
import collections
import sys

# class, mark in the call chain (first match wins)
RULES = [("within-host copy (process_vm_readv)", "process_vm_"),
         ("poll() (the MPI event loop)", "__poll"),
         ("TCP send (writev: TCP, veth, tbf, rx)", "writev"),
         ("TCP receive (readv)", "readv"),
         ("receive softirq elsewhere", "net_rx_action"),
         ("sleep (nanosleep)", "nanosleep"),
         ("futex", "futex"),
         ("sched_yield", "sched_yield"),
         ("other interrupts", "asm_sysvec"),
         ("other interrupts", "asm_common_interrupt")]


def leaf(frames):
    top = frames[0] if frames else ""
    if "sgemm" in top:
        return "sgemm"
    if "[kernel" in top:
        return "other kernel"
    if "libopenblas" in top:
        return "OpenBLAS other"
    if any(x in top for x in ("libmpi", "mca_", "libopen-pal", "libevent", "libnbc")):
        return "MPI (user)"
    if "libc" in top:
        return "libc (memcpy, memset, locks)"
    if "(/" in top and top.rstrip(")").endswith("/smoe"):
        return "smoe (kernels, runtime)"
    return "other"


def main():
    samples, cur = [], None
    for line in sys.stdin:
        if not line.strip():
            if cur:
                samples.append(cur)
            cur = None
        elif not line[0].isspace():
            f = line.split()
            cur = (f[0], int(f[1]), [])
        elif cur is not None:
            cur[2].append(line.strip())
    if cur:
        samples.append(cur)
    per = collections.defaultdict(collections.Counter)
    for comm, tid, frames in samples:
        text = "\n".join(frames)
        c = next((name for name, mark in RULES if mark in text), None) or leaf(frames)
        per[tid][c] += 1
    n = sum(sum(c.values()) for c in per.values())
    if n == 0:
        print("no samples")
        return 1
    main_t = [t for t in per if sum(per[t].values()) >= 0.05 * n]
    tot = collections.Counter()
    for c in per.values():
        tot.update(c)
    print("%d samples; training threads %.1f %%, other threads %.1f %%"
          % (n, 100.0 * sum(sum(per[t].values()) for t in main_t) / n,
             100.0 * sum(sum(per[t].values()) for t in per if t not in main_t) / n))
    print("%-38s %7s %9s %7s" % ("class", "all", "training", "other"))
    for c, k in tot.most_common():
        m = sum(per[t][c] for t in main_t)
        print("%-38s %6.1f%% %8.1f%% %6.1f%%" % (c, 100.0 * k / n, 100.0 * m / n,
                                                100.0 * (k - m) / n))
    return 0


sys.exit(main())
