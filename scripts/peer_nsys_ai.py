"""tracer diff against nsys-ai diff on the same before/after nsys SQLite exports: per kernel name the
launch counts and total GPU time on each side and the delta, where both report the same figure.

nsys-ai (pip install nsys-ai) runs as `nsys-ai diff BEFORE AFTER --format json --no-ai`; its kernel
rows (top_regressions, top_improvements) are matched to tracer's kernel keys by demangled name
(nsys-ai's key may be cut short: a tracer name that starts with it and is the only one that does).
Also its total GPU time per side (kernels only) against the sum of tracer's kernel totals; tracer's
diff also keys copies and memsets ("[memcpy HtoD]", "[memset]"), which are reported beside it.
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


def compare(before: Path, after: Path, log=print) -> dict:
    """nsys-ai's kernel rows and totals against tracer's diff of the same two files."""
    from tracer.app.diff import diff_paths
    from tracer.compare.timing import KeyKind

    theirs = nsys_ai(before, after)
    ours = diff_paths(before, after, hazards=False)
    kernels = {t.name: t for t in ours.timing if t.kind is KeyKind.KERNEL}
    rows, worst, unmatched = [], 0.0, 0
    for e in theirs["top_regressions"] + theirs["top_improvements"]:
        hits = [n for n in kernels if n == e["demangled"]] or [n for n in kernels if n.startswith(e["demangled"])]
        if len(hits) != 1:
            log(f"  not matched ({len(hits)} candidates): {e['demangled'][:70]}")
            unmatched += 1
            continue
        t = kernels[hits[0]]
        mine = (t.n_a, t.total_a_ns, t.n_b, t.total_b_ns, t.total_b_ns - t.total_a_ns)
        their = (e["before_count"], e["before_total_ns"], e["after_count"], e["after_total_ns"], e["delta_ns"])
        rel = max(abs(x - y) / max(abs(y), 1) for x, y in zip(mine, their))
        worst = max(worst, rel)
        rows.append({"kernel": t.name, "tracer": mine, "nsys_ai": their, "max_rel_diff": rel, "tracer_change": t.change.value})
        log(f"  {t.name[:60]:<60} counts {t.n_a}->{t.n_b} vs {their[0]}->{their[2]}; delta ns {mine[4]} vs {their[4]} "
            f"(max rel diff {rel:.2e}); tracer: {t.change.value}")
    ops = {n: t for n, t in kernels.items() if n.startswith(("[memcpy ", "[memset]"))}  # copies and memsets: tracer's operations
    totals = (sum(t.total_a_ns for n, t in kernels.items() if n not in ops), sum(t.total_b_ns for n, t in kernels.items() if n not in ops))
    copies = (sum(t.total_a_ns for t in ops.values()), sum(t.total_b_ns for t in ops.values()))
    out = {"rows": rows, "unmatched": unmatched, "worst": worst, "totals": {
        "tracer": totals, "nsys_ai": (theirs["before"]["total_gpu_ns"], theirs["after"]["total_gpu_ns"]), "tracer_copies_memsets": copies}}
    log(f"{len(rows)} kernel rows matched, largest relative difference {worst:.2e}; total kernel GPU ns tracer {totals} "
        f"nsys-ai {out['totals']['nsys_ai']}; tracer's copies and memsets besides ({len(ops)} keys): {copies} ns")
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--json")
    args = ap.parse_args()
    out = compare(args.before, args.after)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
