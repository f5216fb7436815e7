#!/usr/bin/env python3
"""Differential check of stepmix against Diffusers' own source, for bench/run-diffusers-differential.sh:
the UniPC and FlowMatch Euler schedulers (bench/diffusers_scheduler_part.py), the Cosmos3 transformer
(bench/diffusers_transformer_part.py) and the Wan2.2 VAE (bench/diffusers_vae_part.py), each on
seeded random configurations and a few fixed probes, in float32, the Diffusers files executed from a
checkout as written (bench/diffusers_reference.py, training/diffusers_schedulers.py).
Each case is one of:
- match: both ran and agree within the part's tolerance;
- mismatch: both ran and disagree beyond it;
- both-refused: Diffusers fails on the case and stepmix refuses it;
- refused-as-designed: stepmix refuses a case Diffusers runs, with a refusal on the part's list of
  deliberate ones, whose premise is checked in Diffusers' own run where it has one;
- refused-unexpectedly: any other refusal;
- only-reference-failed: Diffusers fails on a case stepmix runs.
usage: diffusers_differential.py --diffusers DIR --stepmix BIN --replay BIN --work DIR --json OUT
                                 [--part scheduler|transformer|vae|all] [--seed N] [--cases N]
exit status 1 on any mismatch, unexpected refusal or case only Diffusers fails on; 2 when the setup
is broken (no Diffusers checkout, no torch)
"""
import argparse, collections, json, math, os, platform, sys, time
import check_report  # bench/check_report.py, next to this script
from check_report import setup_error

try:
    import numpy as np
    import torch
except ImportError as e:
    setup_error(f"{e}; scripts/setup.sh --bench installs python3-torch and python3-numpy")

import diffusers_reference

OUTCOMES = ("match", "mismatch", "both-refused", "refused-as-designed", "refused-unexpectedly",
            "only-reference-failed")
FAILING = ("mismatch", "refused-unexpectedly", "only-reference-failed")
PARTS = ("scheduler", "transformer", "vae")
# Sized for about 5 minutes for all three parts on 2 cores; --cases N overrides each.
DEFAULT_CASES = {"scheduler": 5000, "transformer": 1000, "vae": 160}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def plain(value):
    """JSON-ready: numpy scalars and arrays become Python numbers and lists, non-finite numbers text."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, (np.floating, float)):
        return float(value) if math.isfinite(value) else str(float(value))
    if isinstance(value, np.integer):
        return int(value)
    return value


class Tally:
    """What a part found: outcome counts per row, the worst errors, the deliberate refusals by
    reason, notes, and every failing case in full."""

    def __init__(self):
        self.rows = collections.defaultdict(lambda: dict.fromkeys(OUTCOMES, 0))
        self.worst_errors, self.by_design, self.notes, self.failures = {}, collections.Counter(), {}, []

    def add(self, row, outcome, case, detail=None):
        self.rows[row][outcome] += 1
        if outcome == "refused-as-designed":
            self.by_design[(detail or {}).get("by_design") or (detail or {}).get("stepmix", "")[:120]] += 1
        if outcome in FAILING:
            self.failures.append(plain({"row": row, "outcome": outcome, "case": case, **(detail or {})}))

    def worst(self, key, value, case):
        """Keeps the largest error of each kind, with its case and how many were compared."""
        compared = self.worst_errors.get(key, {}).get("compared", 0) + 1
        if key not in self.worst_errors or value > self.worst_errors[key]["value"]:
            self.worst_errors[key] = {"value": value, "case": plain(case)}
        self.worst_errors[key]["compared"] = compared

    def note(self, key, detail, case, **values):
        """Counts cases of a kind worth reporting, keeping a few and the largest of each value given."""
        entry = self.notes.setdefault(key, {"count": 0, "examples": []})
        entry["count"] += 1
        for name, value in values.items():
            entry[name] = max(entry.get(name, value), value)
        if len(entry["examples"]) < 5:
            entry["examples"].append(plain({"case": case, **detail}))

    def total(self):
        return {k: sum(r[k] for r in self.rows.values()) for k in OUTCOMES}

    def print(self, part):
        print(f"\n== {part}")
        check_report.count_table(dict(self.rows), OUTCOMES, 26)
        for key, w in self.worst_errors.items():
            value = w["value"] if isinstance(w["value"], int) else f"{w['value']:.2e}"
            print(f"worst {key}: {value} over {w['compared']} compared")
        for key, entry in self.notes.items():
            worst = [f"{name.replace('_', ' ')} {v:.2e}" for name, v in entry.items() if name not in ("count", "examples")]
            print(f"{key}: {entry['count']}" + (f" (worst: {', '.join(worst)})" if worst else ""))
        for reason, n in self.by_design.most_common():
            print(f"refused as designed ({n}): {reason}")
        for f in self.failures[:10]:
            shown = {k: v for k, v in f.items() if k not in ("case", "row", "outcome")}
            print(f"{f['outcome'].upper()} {f['row']}: {json.dumps(shown)[:300]}\n    case {json.dumps(f['case'])[:400]}")
        if len(self.failures) > 10:
            print(f"(all {len(self.failures)} failing cases are in the results file)")

    def result(self, cases, seconds):
        return {"cases": cases, "seconds": round(seconds, 1), "total": self.total(), "rows": dict(self.rows),
                "worst": plain(self.worst_errors), "refused_as_designed": dict(self.by_design), "notes": self.notes,
                "failures": self.failures}


def relative(path):
    """A path inside the checkout as the checkout names it, so the results hold no machine's paths."""
    path = os.path.abspath(path)
    return os.path.relpath(path, ROOT) if path.startswith(ROOT + os.sep) else os.path.basename(path)


def main():
    parser = argparse.ArgumentParser(description="stepmix against Diffusers' own source")
    parser.add_argument("--diffusers", required=True, help="a Diffusers checkout (its root folder)")
    parser.add_argument("--stepmix", required=True, help="the stepmix binary")
    parser.add_argument("--replay", help="the bench_scheduler_replay harness (scheduler part)")
    parser.add_argument("--work", required=True, help="folder for the cases' files")
    parser.add_argument("--json", required=True, help="results file")
    parser.add_argument("--part", default="all", choices=PARTS + ("all",))
    parser.add_argument("--seed", type=int, default=20251204)
    parser.add_argument("--cases", type=int, help="random configurations per part (default: "
                        + ", ".join(f"{k} {v}" for k, v in DEFAULT_CASES.items()) + ")")
    args = parser.parse_args()
    args.diffusers = os.path.abspath(args.diffusers)
    missing = [f for f in diffusers_reference.required_files() if not os.path.isfile(os.path.join(args.diffusers, f))]
    if missing:
        setup_error(f"{args.diffusers} is not a Diffusers checkout with the Cosmos3 and Wan files: no {missing[0]}")
    parts = PARTS if args.part == "all" else (args.part,)
    if "scheduler" in parts and not args.replay:
        setup_error("the scheduler part needs --replay (the bench_scheduler_replay harness)")
    diffusers_reference.set_root(args.diffusers)
    torch.set_num_threads(1)
    os.makedirs(args.work, exist_ok=True)

    modules = {part: __import__(f"diffusers_{part}_part") for part in parts}
    for part, module in modules.items():  # a checkout whose files do not load is a broken setup
        try:
            module.load(args)
        except Exception as e:
            setup_error(f"Diffusers' {part} files in {args.diffusers} do not load: {type(e).__name__}: {e}")

    results, failed, started = {}, False, time.monotonic()
    for part, module in modules.items():
        run_args = argparse.Namespace(**vars(args))
        run_args.cases = args.cases if args.cases is not None else DEFAULT_CASES[part]
        tally, t0 = Tally(), time.monotonic()
        module.run(tally, run_args, args.work)
        tally.print(part)
        results[part] = tally.result(run_args.cases, time.monotonic() - t0)
        failed |= any(results[part]["total"][k] for k in FAILING)
    print(f"\n{'FAILED' if failed else 'passed'}: " + "; ".join(
        f"{p} {sum(r['total'].values())} cases, " + ", ".join(f"{n} {k}" for k, n in r["total"].items() if n)
        for p, r in results.items()) + f" ({time.monotonic() - started:.0f} s)")

    result = {"source_commit": check_report.source_commit(), "stepmix": check_report.stepmix_version(args.stepmix),
              "stepmix_binary": relative(args.stepmix), "replay": relative(args.replay) if args.replay else None,
              "diffusers_commit": diffusers_reference.commit(args.diffusers), "python": sys.version.split()[0],
              "torch": torch.__version__, "numpy": np.__version__, "machine": platform.machine(),
              "seed": args.seed, "parts": results, "seconds": round(time.monotonic() - started, 1)}
    check_report.write_result(args.json, plain(result))
    return 1 if failed else 0


if __name__ == "__main__":
    check_report.run_main(main)
