"""Table and JSON of bench/run-transformer.sh from its samples file.

usage: summarize_transformer.py SAMPLES.jsonl OUT.json

Per case (hidden, tokens, mode, cfg, isa): stepmix and peer wall times
(median and best of the timed calls), CPU time per call / threads (what a call
costs with both cores to itself: the figure to read on a loaded machine), the
ratio peer / stepmix, and each side's fraction of the instruction peaks
measured in the same run (FLOPs = 2·M·K·N per Linear + 4·D·heads per visible
(query, key) pair of attention, counted by stepmix's profiling backend; the
peer does the same work). stepmix's attention alone is reported against the
same peaks.
"""
import collections
import json
import os
import statistics
import sys
import time


def main():
    samples_path, out_path = sys.argv[1:]
    runs = collections.defaultdict(list)
    peaks = []
    for line in open(samples_path):
        s = json.loads(line)
        if s["side"] == "peak":
            peaks.append(s)
            continue
        key = (s["hidden"], s["tokens"], s["mode"], s.get("cfg", "off"), s.get("isa", "auto"), s["side"])
        runs[key].append(s)

    vdp = max([p["vdpbf16ps_gflops"] for p in peaks] or [0])
    amx = max([p["amx_gflops"] for p in peaks] or [0])
    order = {"dense": 0, "w8a16": 1, "w8a8": 2}
    cases = sorted({k[:5] for k in runs if k[5] == "stepmix"}, key=lambda k: (k[0], k[1], order[k[2]], k[3], k[4]))
    rows = []
    for hidden, tokens, mode, cfg, isa in cases:
        ours = runs[(hidden, tokens, mode, cfg, isa, "stepmix")]
        peer = runs.get((hidden, tokens, mode, cfg, "-", "peer"), [])
        ms = [x for s in ours for x in s["ms"]]
        cpu = [x / s["threads"] for s in ours for x in s.get("cpu_ms", [])]
        flops = ours[0]["flops"]
        profile = ours[0].get("profile", {})
        threads = ours[0]["threads"]
        attention = profile.get("attention")
        row = {
            "config": {"hidden": hidden, "layers": 4, "head_dim": 128, "heads": hidden // 128, "kv_heads": hidden // 512,
                       "intermediate": 3 * hidden, "text_tokens": ours[0].get("text", 64)},
            "tokens": tokens, "mode": mode, "cfg": cfg, "isa": isa, "kernels": ours[0].get("kernels"),
            "gflop": round(flops / 1e9, 1),
            "ms": round(statistics.median(ms), 1), "best_ms": round(min(ms), 1),
            "cpu_ms_per_thread": round(min(cpu), 1) if cpu else None,
            "ms_samples": [round(x, 1) for x in ms],
            "load_average": [s["load_average"] for s in ours],
            "profile_cpu_ms_per_thread": {k: round(v["cpu_ms"] / threads, 1) for k, v in profile.items()},
        }
        def fraction(seconds, peak):
            return round(flops / seconds / 1e9 / peak, 3) if peak and seconds else None
        row["fraction_of_vdpbf16ps_peak"] = {"best_wall": fraction(min(ms) / 1e3, vdp),
                                             "cpu": fraction(min(cpu) / 1e3, vdp) if cpu else None}
        row["fraction_of_amx_peak"] = {"best_wall": fraction(min(ms) / 1e3, amx),
                                       "cpu": fraction(min(cpu) / 1e3, amx) if cpu else None}
        if attention and attention.get("cpu_ms"):
            gf = attention["flops"] / (attention["cpu_ms"] / threads / 1e3) / 1e9
            row["attention"] = {"gflop": round(attention["flops"] / 1e9, 1), "gflops_cpu": round(gf, 1),
                                "fraction_of_vdpbf16ps_peak": round(gf / vdp, 3) if vdp else None,
                                "fraction_of_amx_peak": round(gf / amx, 3) if amx else None}
        if peer:
            pms = [x for s in peer for x in s["ms"]]
            pcpu = [x / s.get("threads", threads) for s in peer for x in s.get("cpu_ms", [])]
            row.update({
                "peer_ms": round(statistics.median(pms), 1), "peer_best_ms": round(min(pms), 1),
                "peer_cpu_ms_per_thread": round(min(pcpu), 1) if pcpu else None,
                "peer_ms_samples": [round(x, 1) for x in pms],
                "ratio": round(statistics.median(pms) / statistics.median(ms), 2),
                "ratio_of_best": round(min(pms) / min(ms), 2),
                "ratio_of_cpu": round(min(pcpu) / min(cpu), 2) if pcpu and cpu else None,
                "peer_fraction_of_vdpbf16ps_peak": {"best_wall": fraction(min(pms) / 1e3, vdp),
                                                    "cpu": fraction(min(pcpu) / 1e3, vdp) if pcpu else None},
                "peer_fraction_of_amx_peak": {"best_wall": fraction(min(pms) / 1e3, amx),
                                              "cpu": fraction(min(pcpu) / 1e3, amx) if pcpu else None},
                "velocity_deviation_vs_peer": peer[0].get("deviation"),
            })
        rows.append(row)

    loads = [l for r in rows for l in r["load_average"]]
    meta = {
        "what": "one Cosmos3 transformer call (both streams, understanding cache off), random seeded weights; "
                "cfg separate/batched: a CFG step (conditional + unconditional pass)",
        "stepmix": "bench_transformer, bf16 activations, STEPMIX_THREADS=2",
        "peer": "bench/peer_transformer.py: PyTorch eager, bf16, torch.set_num_threads(2)",
        "peaks_gflops": {"vdpbf16ps_two_cores": vdp, "amx_two_cores": amx, "measurements": peaks},
        "statistic": "ms: median of the timed calls; best_ms: fastest; cpu_ms_per_thread: least process CPU time "
                     "of a call / threads; fractions: FLOPs / time / peak",
        "samples": os.path.basename(samples_path),  # beside this file
        "load_average_at_stepmix_runs": {"min": min(loads), "max": max(loads)} if loads else None,
        "written": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    with open(out_path, "w") as f:
        json.dump({"meta": meta, "results": rows}, f, indent=2)
        f.write("\n")

    print(f"peaks measured in this run (2 threads): vdpbf16ps {vdp:.0f} GFLOP/s, AMX {amx:.0f} GFLOP/s")
    head = (f"{'hidden':>6} {'tok':>5} {'mode':>6} {'cfg':>8} {'isa':>6} | {'GFLOP':>6} | {'ms':>8} {'best':>8} {'cpu/2':>8} | "
            f"{'peer ms':>8} {'best':>8} {'cpu/2':>8} | {'ratio':>5} {'best':>5} {'cpu':>5} | "
            f"{'%vdp':>5} {'%amx':>5} {'peer%vdp':>8} {'peer%amx':>8} | {'attn%vdp':>8} {'attn%amx':>8} | {'dev':>7}")
    print(head)
    print("-" * len(head))
    pct = lambda x: "-" if x is None else f"{100 * x:.0f}"
    num = lambda x, f=".1f": "-" if x is None else format(x, f)
    for r in rows:
        fv, fa = r["fraction_of_vdpbf16ps_peak"], r["fraction_of_amx_peak"]
        pv, pa = r.get("peer_fraction_of_vdpbf16ps_peak", {}), r.get("peer_fraction_of_amx_peak", {})
        at = r.get("attention", {})
        dev = r.get("velocity_deviation_vs_peer")
        print(f"{r['config']['hidden']:>6} {r['tokens']:>5} {r['mode']:>6} {r['cfg']:>8} {r['isa']:>6} | {r['gflop']:>6.0f} | "
              f"{r['ms']:>8.0f} {r['best_ms']:>8.0f} {num(r['cpu_ms_per_thread'], '.0f'):>8} | "
              f"{num(r.get('peer_ms'), '.0f'):>8} {num(r.get('peer_best_ms'), '.0f'):>8} {num(r.get('peer_cpu_ms_per_thread'), '.0f'):>8} | "
              f"{num(r.get('ratio'), '.2f'):>5} {num(r.get('ratio_of_best'), '.2f'):>5} {num(r.get('ratio_of_cpu'), '.2f'):>5} | "
              f"{pct(fv['cpu']):>5} {pct(fa['cpu']):>5} {pct(pv.get('cpu')):>8} {pct(pa.get('cpu')):>8} | "
              f"{pct(at.get('fraction_of_vdpbf16ps_peak')):>8} {pct(at.get('fraction_of_amx_peak')):>8} | "
              f"{'-' if dev is None else format(dev, '.1e'):>7}")
    print("ms: median wall time of one call; best: fastest; cpu/2: least process CPU time of a call / 2 threads;")
    print("ratio: peer / stepmix (median wall, best wall, CPU); %vdp / %amx: FLOPs per CPU-second-per-thread as a")
    print("fraction of the two-core vdpbf16ps / AMX peak; attn: stepmix's attention alone; dev: max|v_peer - v| / max|v|.")
    if loads:
        print(f"1-minute load average when stepmix runs started: {min(loads):.1f} .. {max(loads):.1f} (2 cores)")
    print(f"written to {out_path}")


if __name__ == "__main__":
    sys.exit(main())
