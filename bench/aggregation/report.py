"""Turns bench/aggregation/raw.txt into RESULTS.md (medians over sweeps, and ratios)."""
import os
import platform
import statistics
import subprocess
import sys


def parse(path):
    rows, loads, notes = [], [], []
    for line in open(path):
        line = line.strip()
        if line.startswith("load "):
            loads.append(float(line.split()[1]))
        elif line.startswith("load_"):
            notes.append(line)
        elif line.startswith("bench="):
            rows.append(dict(kv.split("=", 1) for kv in line.split()))
    return rows, loads, notes


def med(values):
    return statistics.median(values) if values else float("nan")


def threads(r):
    return int(r.get("threads", "1"))


def main():
    raw, root = sys.argv[1], sys.argv[2]
    rows, loads, notes = parse(raw)
    copies = [r for r in rows if r["bench"] == "copy"]
    top = max(threads(r) for r in copies)
    copy = {t: [float(r["copy_gbps"]) for r in copies if threads(r) == t] for t in (1, top)}
    read = {t: [float(r["read_gbps"]) for r in copies if threads(r) == t] for t in (1, top)}
    machine = med(copy[top])
    commit = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print("# Aggregation throughput\n")
    print(f"Commit {commit}; {cpu}, {os.cpu_count()} cores shared with other work; "
          f"{platform.platform()}.\n")
    print("GB/s = bytes of client updates consumed (n x d x 4) / median time of one full aggregation. "
          "`batch`: `WeightedAverage::Reset` + one `AddBatch` of all n updates (the mean is then "
          "in place); `stream`: n separate `Add` calls, as updates arriving one by one (what the "
          "round coordinator does). `1T`: one thread; "
          f"`{top}T`: the fold split over {top} threads (every core of this machine; the round "
          "coordinator's default). "
          "`numpy`: Flower's `aggregate` (`layer * num_examples`, `reduce(np.add)`, `/ total`), "
          "/usr/bin/python3 with Debian's numpy, single-threaded as numpy's element-wise operations "
          "are. Copy: `memcpy` between two 512 MiB arrays, split over the same threads, counted as "
          "STREAM does (bytes read + bytes written). Each cell is the median over the interleaved "
          "sweeps of per-run medians. `read`: the fold's access pattern without its arithmetic, as many "
          "updates read at once as the fold reads (n up to 12, else a group of 8), summed in float "
          f"on {top} threads (`aggregation_bench read`): the memory's ceiling for that pattern.\n")
    for t in (1, top):
        print(f"- STREAM-style copy, {t} thread{'s' if t > 1 else ''}: **{med(copy[t]):.1f} GB/s** "
              f"(runs: {', '.join(f'{c:.1f}' for c in copy[t])}); read-only pass: {med(read[t]):.1f} GB/s.")
    print(f"\nThe machine's memory bandwidth is the {top}-thread copy, {machine:.1f} GB/s; "
          "`% of copy` is against it.\n")
    print(f"| n | d | batch 1T | batch {top}T | % of copy | stream 1T | stream {top}T | numpy | "
          f"batch {top}T / numpy | batch 1T / numpy | read {top}T | batch {top}T / read | "
          "batch = numpy checksum |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    configs = []
    for r in rows:
        if r["bench"] == "fedavg":
            key = (int(r["n"]), int(float(r["d"])))
            if key not in configs:
                configs.append(key)
    for n, d in configs:
        def pick(impl, mode=None, t=None):
            return [r for r in rows if r["bench"] == "fedavg" and r.get("impl") == impl
                    and int(r["n"]) == n and int(float(r["d"])) == d and "failed" not in r
                    and (mode is None or r.get("mode") == mode) and (t is None or threads(r) == t)]

        def gbps(rs):
            return med([float(r["gbps"]) for r in rs])
        b1, bt = pick("sextant", "batch", 1), pick("sextant", "batch", top)
        s1, st = pick("sextant", "stream", 1), pick("sextant", "stream", top)
        p = pick("numpy_flower")
        streams = n if n <= 12 else 8
        rd = med([float(r["gbps"]) for r in rows if r["bench"] == "read" and threads(r) == top
                  and int(r["streams"]) == streams and int(float(r["d"])) == d])
        gp = gbps(p)
        # Batch (one rounding) and numpy should agree to float precision; stream folds n times
        # and may differ within its bound (n * 2^-24 relative per coordinate).
        sums = {r["checksum"][:8] for r in b1 + bt + p}
        agree = "yes" if len(sums) == 1 else " / ".join(sorted(sums))
        np_cell = f"{gp:.2f}" if p else "did not fit"
        r_top = f"{gbps(bt) / gp:.1f}x" if p else "-"
        r_one = f"{gbps(b1) / gp:.1f}x" if p else "-"
        print(f"| {n} | {d:.0e} | {gbps(b1):.2f} | {gbps(bt):.2f} | {100 * gbps(bt) / machine:.0f}% | "
              f"{gbps(s1):.2f} | {gbps(st):.2f} | {np_cell} | {r_top} | {r_one} | "
              + (f"{rd:.2f} | {100 * gbps(bt) / rd:.0f}% | " if rd == rd else "- | - | ")
              + f"{agree} |")
    print(f"\nLoad average while measuring (1 min): {', '.join(f'{l:.2f}' for l in loads)}; "
          + "; ".join(notes) + ".\n")
    print("Raw lines: bench/aggregation/raw.txt. Reproduce: "
          "`cmake --build build --target aggregation_bench && bench/aggregation/run.sh build`.")


if __name__ == "__main__":
    main()
