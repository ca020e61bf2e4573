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


def main():
    raw, root = sys.argv[1], sys.argv[2]
    rows, loads, notes = parse(raw)
    copy = [float(r["copy_gbps"]) for r in rows if r["bench"] == "copy"]
    read = [float(r["read_gbps"]) for r in rows if r["bench"] == "copy"]
    copy_med = med(copy)
    commit = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print("# Aggregation throughput\n")
    print(f"Commit {commit}; {cpu}, {os.cpu_count()} cores shared with other work; "
          f"{platform.platform()}. One thread everywhere.\n")
    print("GB/s = bytes of client updates consumed (n x d x 4) / median time of one full aggregation. "
          "`sextant batch`: `WeightedAverage::Reset` + one `AddBatch` of all n updates (the mean is then "
          "in place); `sextant stream`: n separate `Add` calls, as updates arriving one by one. "
          "`numpy`: Flower's `aggregate` (`layer * num_examples`, `reduce(np.add)`, `/ total`), "
          "/usr/bin/python3 with Debian's numpy. Copy: `memcpy` between two 512 MiB arrays, "
          "counted as STREAM does (bytes read + bytes written). Each cell is the median over "
          f"{len(copy) - 1 if len(copy) > 1 else len(copy)} interleaved sweeps of per-run medians.\n")
    print(f"Memory bandwidth (STREAM-style copy): **{copy_med:.1f} GB/s** "
          f"(runs: {', '.join(f'{c:.1f}' for c in copy)}); read-only pass: {med(read):.1f} GB/s.\n")
    print("| n | d | sextant batch GB/s | % of copy | sextant stream GB/s | numpy GB/s | batch / numpy | batch = numpy checksum |")
    print("|---|---|---|---|---|---|---|---|")
    configs = []
    for r in rows:
        if r["bench"] == "fedavg":
            key = (int(r["n"]), int(float(r["d"])))
            if key not in configs:
                configs.append(key)
    for n, d in configs:
        def pick(impl, mode=None):
            return [r for r in rows if r["bench"] == "fedavg" and r.get("impl") == impl
                    and int(r["n"]) == n and int(float(r["d"])) == d and "failed" not in r
                    and (mode is None or r.get("mode") == mode)]
        b, s, p = pick("sextant", "batch"), pick("sextant", "stream"), pick("numpy_flower")
        gb = med([float(r["gbps"]) for r in b])
        gs = med([float(r["gbps"]) for r in s])
        gp = med([float(r["gbps"]) for r in p])
        # Batch (one rounding) and numpy should agree to float precision; stream folds n times
        # and may differ within its bound (n * 2^-24 relative per coordinate).
        sums = {r["checksum"][:8] for r in b + p}
        agree = "yes" if len(sums) == 1 else " / ".join(sorted(sums))
        np_cell = f"{gp:.2f}" if p else "did not fit"
        ratio = f"{gb / gp:.1f}x" if p else "-"
        print(f"| {n} | {d:.0e} | {gb:.2f} | {100 * gb / copy_med:.0f}% | {gs:.2f} | {np_cell} | {ratio} | {agree} |")
    print(f"\nLoad average while measuring (1 min): {', '.join(f'{l:.2f}' for l in loads)}; "
          + "; ".join(notes) + ".\n")
    print("Raw lines: bench/aggregation/raw.txt. Reproduce: "
          "`cmake --build build --target aggregation_bench && bench/aggregation/run.sh build`.")


if __name__ == "__main__":
    main()
