"""tracer diff against nsys-ai diff on the same before/after nsys SQLite exports: per kernel name the
launch counts and total GPU time on each side and the delta, where both report the same figure.

nsys-ai (pip install nsys-ai) runs as `nsys-ai diff BEFORE AFTER --format json --no-ai`; its kernel
rows (top_regressions, top_improvements) are matched to tracer's kernel keys by demangled name
(nsys-ai's key may be cut short: a tracer name that starts with it and is the only one that does).
Also its total GPU time per side against the sum of tracer's kernel totals.
Usage: python scripts/peer_nsys_ai.py BEFORE.sqlite AFTER.sqlite [--json OUT.json]
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def nsys_ai(before: Path, after: Path) -> dict:
    exe = shutil.which("nsys-ai") or str(Path(sys.executable).with_name("nsys-ai"))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "diff.json"
        subprocess.run([exe, "diff", str(before), str(after), "--format", "json", "--no-ai", "-o", str(out)],
                       check=True, capture_output=True, text=True, timeout=600)
        return json.loads(out.read_text())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--json")
    args = ap.parse_args()
    from tracer.app.diff import diff_paths
    from tracer.compare.timing import KeyKind

    theirs = nsys_ai(args.before, args.after)
    ours = diff_paths(args.before, args.after, hazards=False)
    kernels = {t.name: t for t in ours.timing if t.kind is KeyKind.KERNEL}
    rows, worst = [], 0.0
    for e in theirs["top_regressions"] + theirs["top_improvements"]:
        hits = [n for n in kernels if n == e["demangled"]] or [n for n in kernels if n.startswith(e["demangled"])]
        if len(hits) != 1:
            print(f"  not matched ({len(hits)} candidates): {e['demangled'][:70]}")
            continue
        t = kernels[hits[0]]
        mine = (t.n_a, t.total_a_ns, t.n_b, t.total_b_ns, t.total_b_ns - t.total_a_ns)
        their = (e["before_count"], e["before_total_ns"], e["after_count"], e["after_total_ns"], e["delta_ns"])
        rel = max(abs(x - y) / max(abs(y), 1) for x, y in zip(mine, their))
        worst = max(worst, rel)
        rows.append({"kernel": t.name, "tracer": mine, "nsys_ai": their, "max_rel_diff": rel, "tracer_change": t.change.value})
        print(f"  {t.name[:60]:<60} counts {t.n_a}->{t.n_b} vs {their[0]}->{their[2]}; delta ns {mine[4]} vs {their[4]} "
              f"(max rel diff {rel:.2e}); tracer: {t.change.value}")
    totals = (sum(t.total_a_ns for t in kernels.values()), sum(t.total_b_ns for t in kernels.values()))
    print(f"{len(rows)} kernel rows matched, largest relative difference {worst:.2e}; total GPU ns tracer {totals} "
          f"nsys-ai {(theirs['before']['total_gpu_ns'], theirs['after']['total_gpu_ns'])}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "totals": {"tracer": totals, "nsys_ai": [
            theirs["before"]["total_gpu_ns"], theirs["after"]["total_gpu_ns"]]}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
