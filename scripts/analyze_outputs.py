"""Every `tracer trace analyze` output of the fixtures, one file each, to compare two trees byte for
byte after a change that must not change behaviour (issue 27's start-up work did):

    python scripts/analyze_outputs.py OUT_BEFORE --tree /path/to/main/checkout
    python scripts/analyze_outputs.py OUT_AFTER
    diff -r OUT_BEFORE OUT_AFTER && echo identical

Inputs: tests/data/{traces,hazards,nsys}/*.sqlite, the job directories of tests/data/jobs and the
shared fixtures beside the checkout (../shared/fixtures) where present, each read by the tree given
(default: this one) from the same paths, with the text, --json, --pairs all (text and JSON),
--explain and --no-hazards --json. Each file holds the exit code, stdout and stderr.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = {"text": [], "json": ["--json"], "all": ["--pairs", "all"], "alljson": ["--pairs", "all", "--json"],
            "explain": ["--explain"], "nohaz": ["--no-hazards", "--json"]}


def inputs(root: Path) -> list[Path]:
    data, shared = root / "tests" / "data", root.parent / "shared" / "fixtures"
    return sorted([*data.glob("traces/*.sqlite"), *data.glob("hazards/*.sqlite"), *data.glob("nsys/*.sqlite"),
                   *(p for p in data.glob("jobs/*") if p.is_dir()), *shared.glob("*/*.sqlite"), *shared.glob("*/*.json.gz")])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="folder for the outputs (created)")
    ap.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose tracer runs (default: this one)")
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=str(args.tree.resolve()))
    args.out.mkdir(parents=True, exist_ok=True)
    sources = inputs(ROOT)
    for src in sources:
        for name, extra in VARIANTS.items():
            res = subprocess.run([sys.executable, "-m", "tracer", "trace", "analyze", str(src), *extra], env=env, cwd=ROOT,
                                 capture_output=True, text=True, timeout=600)
            (args.out / f"{src.parent.name}__{src.name}__{name}.txt").write_text(
                f"rc={res.returncode}\n--stdout--\n{res.stdout}\n--stderr--\n{res.stderr}")
    print(f"{len(sources)} inputs x {len(VARIANTS)} variants written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
