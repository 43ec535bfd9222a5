"""Nsight Compute on the GPU machine, through `tracer profile` itself: the test fixtures of
tests/data/ncu/ and the fence-variant table of issue #19 (duration, DRAM % of peak, memory-barrier
stall share against `none`, at 4096x4096 and 8192x8192), with bench_cast_transpose.py side by side.

    python scripts/capture_ncu.py OUT [--steps info,fixtures,triton,nokernel,perm,nvtx,table4096,bench,table8192,md]
    python scripts/capture_ncu.py OUT --steps agree      # on a machine with ncu-report (no GPU needed)

Every step runs in its own subprocess with a timeout, its output in OUT/logs/STEP.log; a failed
step is recorded and the next one runs. Steps can be split over several calls into the same OUT
(or copies of it): `md` and `agree` read what the others left and run on a CPU machine.
OUT/tests_data_ncu/ holds the fixtures to copy into tests/data/ncu/ (each file under ~1 MB).
`agree`: `tracer profile import` of each kept .ncu-rep (through ncu-report) and of its CSV export
against the GPU run's own profile.json, per metric the largest difference (OUT/agree.json, agree.md).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tracer import proc

ALL_STEPS = ("info", "fixtures", "triton", "nokernel", "perm", "nvtx", "table4096", "bench", "table8192", "md")
CPU_STEPS = ("agree",)  # not in the default list: it needs ncu-report, which the GPU machine may lack
SMALL = "256x256x256"
FIXTURE_VARIANTS = ("none", "device_before_atomic", "system_before_atomic")
TRITON_KERNELS = "axpy|softmax|gemm|nvjet|xmma|cutlass"
MAX_FIXTURE = 1 << 20


class Step:
    def __init__(self, out: Path, name: str) -> None:
        self.out, self.name = out, name
        self.log = out / "logs" / f"{name}.log"
        self.detail: dict[str, object] = {}

    def run(self, argv: list[str], timeout: float, tag: str = "") -> proc.ProcResult:
        """argv in its own process group; stdout and stderr appended to this step's log."""
        stem = self.out / "logs" / f"{self.name}{tag}"
        res = proc.run(argv, timeout=timeout, stdout_path=stem.with_suffix(".out"), stderr_path=stem.with_suffix(".err"),
                       env=child_env())
        with open(self.log, "a") as fh:
            fh.write(f"$ {' '.join(argv)}\n{res.stdout()}{res.stderr()}[exit {res.returncode}, timed out "
                     f"{res.timed_out}, {res.seconds:.0f} s]\n\n")
        return res


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def tracer(*args: str) -> list[str]:
    return [sys.executable, "-m", "tracer", *args]


def ok(res: proc.ProcResult, step: Step, what: str) -> None:
    if res.timed_out or res.returncode != 0:
        tail = " | ".join((res.stderr() or res.stdout()).strip().splitlines()[-3:])[-400:]
        raise RuntimeError(f"{what}: exit {res.returncode}, timed out {res.timed_out}: {tail}")


def keep(step: Step, run_dir: Path, name: str) -> list[str]:
    """Copy a run directory's reports, CSV exports and profile.json (each up to 1 MiB) into
    OUT/tests_data_ncu/NAME."""
    dest = step.out / "tests_data_ncu" / name
    dest.mkdir(parents=True, exist_ok=True)
    kept = []
    for src in sorted(run_dir.iterdir()):
        if src.suffix in (".ncu-rep", ".csv") or src.name == "profile.json":
            size = src.stat().st_size
            if size > MAX_FIXTURE:  # too big for the repository: stays in the run directory
                kept.append(f"{name}/{src.name} {size // 1024} KiB LEFT OUT (over 1 MiB)")
                continue
            shutil.copyfile(src, dest / src.name)
            kept.append(f"{name}/{src.name} {size // 1024} KiB")
    return kept


def step_info(step: Step) -> None:
    from tracer.ncu.tool import find_ncu

    ncu = find_ncu()
    for tag, argv in (("ncu", [ncu, "--version"]), ("smi", ["nvidia-smi", "-q", "-d", "CLOCK,PERFORMANCE"]),
                      ("doctor", tracer("doctor"))):
        res = step.run(argv, 120, f".{tag}")
        step.detail[tag] = (res.stdout().strip().splitlines() or ["?"])[-1]


def step_fixtures(step: Step) -> None:
    run_dir = step.out / "runs" / "variants"
    args = ["profile", "cast_transpose_dgrad", "--shape", SMALL, "-o", str(run_dir), "--timeout", "200"]
    for v in FIXTURE_VARIANTS:
        args += ["--variant", v]
    ok(step.run(tracer(*args), 600), step, "tracer profile (fixtures)")
    step.detail["kept"] = keep(step, run_dir, "variants")


def step_triton(step: Step) -> None:
    run_dir = step.out / "runs" / "triton"
    res = step.run(tracer("profile", "--kernel", TRITON_KERNELS, "--launch-count", "6", "-o", str(run_dir),
                          "--timeout", "240", "--", sys.executable, str(Path(__file__).resolve()), "--triton-target"), 300)
    ok(res, step, "tracer profile (torch + Triton program)")
    step.detail["kept"] = keep(step, run_dir, "triton")


def step_nokernel(step: Step) -> None:
    from tracer.ncu.tool import find_ncu

    target = [sys.executable, str(ROOT / "scripts" / "ncu_cast_transpose.py"), "256x256", "--launches", "1"]
    raw = step.run([find_ncu(), "--kernel-name", "regex:no_such_kernel_xyz", "--launch-count", "1", "--force-overwrite",
                    "--export", str(step.out / "runs" / "nokernel"), *target], 180, ".ncu")
    logs = step.out / "tests_data_ncu" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "no_kernels.log").write_text(raw.stdout() + raw.stderr())
    res = step.run(tracer("profile", "--kernel", "no_such_kernel_xyz", "-o", str(step.out / "runs" / "nokernel-tracer"),
                          "--timeout", "200", "--", *target), 420, ".tracer")
    (logs / "no_kernels.tracer.txt").write_text(res.stderr())
    for kind in ("ncu", "list"):  # that run's own ncu logs, kept by tracer in the failed run directory
        src = step.out / "runs" / "nokernel-tracer.failed" / "logs" / f"ncu_cast_transpose.{kind}.log"
        if src.is_file():
            shutil.copyfile(src, logs / f"no_kernels.tracer-{kind}.log")
    step.detail.update(ncu_exit=raw.returncode, tracer_exit=res.returncode, tracer_says=res.stderr().strip()[-300:])
    if res.returncode != 2:
        raise RuntimeError(f"expected exit 2 from tracer profile with a regex that matches nothing, got {res.returncode}")


NOBODY = 65534
DRIVER_PARAMS = Path("/proc/driver/nvidia/params")


def step_perm(step: Step) -> None:
    """What ncu says when the driver keeps the counters from a non-admin user (ERR_NVGPUCTRPERM):
    ncu run as `nobody` when the driver restricts profiling to admins (RmProfilingAdminOnly: 1)."""
    import tempfile

    from tracer.ncu.tool import find_ncu

    params = DRIVER_PARAMS.read_text() if DRIVER_PARAMS.is_file() else ""
    step.detail["RmProfilingAdminOnly"] = next((ln.split(":")[1].strip() for ln in params.splitlines()
                                                if ln.startswith("RmProfilingAdminOnly")), "unknown")
    home = Path(tempfile.mkdtemp(prefix="ncu-nobody-"))
    home.chmod(0o777)
    drop = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] if os.geteuid() == 0 else []
    target = [sys.executable, str(ROOT / "scripts" / "ncu_cast_transpose.py"), "256x256", "--launches", "1"]
    try:
        res = step.run([*drop, "env", f"HOME={home}", find_ncu(), "--metrics", "gpu__time_duration.sum",
                        "--launch-count", "1", "--export", str(home / "perm"), *target], 180, ".ncu")
    finally:
        shutil.rmtree(home, ignore_errors=True)
    text = res.stdout() + res.stderr()
    step.detail.update(ncu_exit=res.returncode, user="nobody" if drop else str(os.geteuid()))
    if "ERR_NVGPUCTRPERM" not in text:
        raise RuntimeError(f"ncu as a non-admin user did not hit ERR_NVGPUCTRPERM (exit {res.returncode}; "
                           f"RmProfilingAdminOnly {step.detail['RmProfilingAdminOnly']}): nothing to keep")
    logs = step.out / "tests_data_ncu" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "counter_permission.log").write_text(text)
    (logs / "counter_permission.exit").write_text(f"{res.returncode}\n")


def step_nvtx(step: Step) -> None:
    """Does --range (tracer's range name, '/' escaped for ncu) select the one launch inside it?"""
    name = "step0/layer0/mb0/cast_transpose"
    tries = [("--range", name), ("--nvtx-include", "regex:tracer@.*cast_transpose/"),
             ("--nvtx-include", f"tracer@{name}/")]
    for i, (flag, value) in enumerate(tries):
        run_dir = step.out / "runs" / f"nvtx{i}"
        res = step.run(tracer("profile", "cast_transpose_dgrad", "--variant", "none", "--shape", SMALL, flag, value,
                              "-o", str(run_dir), "--json", "--timeout", "150"), 200, f".{i}")
        found = []
        if res.returncode == 0:
            found = [x["nvtx"] for t in json.loads(res.stdout())["targets"] for x in t["report"]["launches"]]
        # the range holds one cast: selected means exactly it (or one launch when the reader saw no NVTX)
        selected = bool(found) and (all(p and p[-1].endswith(name) for p in found) or (found == [[]]))
        step.detail[f"{flag} {value}"] = {"exit": res.returncode, "launches_nvtx": found, "selected": selected}
        if selected:
            return
    raise RuntimeError("no NVTX filter form selected the cast_transpose range (see the log)")


def step_table(step: Step, size: int) -> None:
    run_dir = step.out / "runs" / f"table-{size}"
    shape = f"{size}x{size}x{size}"
    res = step.run(tracer("profile", "cast_transpose_dgrad", "--variant", "all", "--shape", shape, "-o", str(run_dir),
                          "--timeout", "200", "--plot", str(step.out / f"table-{size}.png")), 580)
    ok(res, step, f"tracer profile {shape}")
    (step.out / f"table-{size}.txt").write_text(res.stdout())
    dest = step.out / "tests_data_ncu" / f"table-{size}"  # the records only: the reports are 8 x 266 KB
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(run_dir / "profile.json", dest / "profile.json")
    print(res.stdout()[-2500:])


def step_bench(step: Step) -> None:
    res = step.run([sys.executable, str(ROOT / "scripts" / "bench_cast_transpose.py"), "--shapes", "4096x4096,8192x8192",
                    "--json", str(step.out / "bench.json")], 300)
    ok(res, step, "bench_cast_transpose.py")
    print(res.stdout()[-1500:])


def step_md(step: Step) -> None:
    """The table for docs/benchmarks.md from the table runs (and bench.json when present)."""
    from tracer.ncu.compare import GroupBy, compare_runs
    from tracer.ncu.profile_json import load_run

    bench = {}
    if (step.out / "bench.json").is_file():
        bench = {(r["shape"], r["what"]): r["ms"] for r in json.loads((step.out / "bench.json").read_text())["results"]}
    lines = ["| shape | variant | ncu us | vs none | DRAM % of peak | membar % of stalls | vs none (points) | "
             "bench us | bench vs none | ncu / bench |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for size in (4096, 8192):
        run_dir = step.out / "runs" / f"table-{size}"
        if not (run_dir / "profile.json").is_file():
            continue
        run = load_run(run_dir)
        c = compare_runs([run], "none", GroupBy.LABEL)
        deltas = {d.group: d for d in c.deltas}
        shape = f"{size}x{size}"
        for s in c.summaries:
            lines.append(md_row(shape, s, deltas.get(s.group), bench.get((shape, s.group)), bench.get((shape, "none"))))
        lines.append(f"<!-- {size}: clock control {c.clock_control}, cache control all, medians over "
                     f"{c.summaries[0].launches} launches per variant (weight cast E4M3 and grad cast E5M2) -->")
    (step.out / "table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def md_row(shape: str, s: object, d: object, bench_ms: float | None, bench_none_ms: float | None) -> str:
    def f(v: float | None, fmt: str) -> str:
        return "?" if v is None else format(v, fmt)

    us = None if s.duration_ns is None else s.duration_ns / 1e3  # type: ignore[attr-defined]  # s is an ncu Summary, typed object to keep this script loose
    mb = s.membar_share  # type: ignore[attr-defined]  # s is an ncu Summary, typed object to keep this script loose
    bench_us = None if bench_ms is None else bench_ms * 1e3
    bench_pct = 100 * (bench_ms / bench_none_ms - 1) if bench_ms and bench_none_ms else None
    bench_vs = "baseline" if not d else ("?" if bench_pct is None else f"{bench_pct:+.1f}%")
    return (f"| {shape} | {s.group} | {f(us, '.2f')} | {f(d.duration_pct, '+.1f') + '%' if d else 'baseline'} | "  # type: ignore[attr-defined]  # s and d are an ncu Summary and Delta, typed object here
            f"{f(s.dram_pct, '.1f')} | {f(None if mb is None else 100 * mb, '.2f')} | "  # type: ignore[attr-defined]  # s is an ncu Summary, typed object to keep this script loose
            f"{f(d.membar_share_pts, '+.2f') if d else '-'} | {f(bench_us, '.2f')} | {bench_vs} | "  # type: ignore[attr-defined]  # d is an ncu Delta, typed object to keep this script loose
            f"{f(us / bench_us if us and bench_us else None, '.3f')} |")


AGREE_SETS = ("variants", "triton")


def step_agree(step: Step) -> None:
    """Each kept report imported here (ncu-report, then its CSV) against the GPU run's profile.json."""
    from tracer.ncu.compare import agreement
    from tracer.ncu.reader import csv_beside
    from tracer.ncu.records import NcuReport, Source
    from tracer.ncu.profile_json import load_run

    found: dict[str, dict[str, object]] = {}
    for name in AGREE_SETS:
        folder = step.out / "runs" / name  # the run directory: the 20 MB Triton report is only there
        if not (folder / "profile.json").is_file():
            continue
        for t in load_run(folder).targets:
            rep = folder / t.report.path
            for how, src in (("ncu-report", rep), ("csv", csv_beside(rep))):
                if not src.is_file():
                    continue
                dest = step.out / "runs" / "agree" / f"{name}-{t.label}-{how}"
                shutil.rmtree(dest, ignore_errors=True)
                res = step.run(tracer("profile", "import", str(src), "-o", str(dest), "--json"), 300,
                               f".{name}.{t.label}.{how}")
                ok(res, step, f"tracer profile import {src.name}")
                got = NcuReport.from_json(json.loads(res.stdout())["targets"][0]["report"])
                if got.source is not Source(how):
                    raise RuntimeError(f"{src.name} was read through {got.source.value}, not {how} "
                                       f"(pip install ncu-report)")
                a = agreement(got.launches, t.report.launches)
                found[f"{name}/{t.label} {how}"] = {"launches": a.launches, "reader_version": got.reader_version,
                                                   "ncu_version": got.ncu_version, "max_relative": dict(a.max_relative),
                                                   "max_absolute": dict(a.max_absolute), "renamed": a.renamed}
    if not found:
        raise RuntimeError(f"no {'/'.join(AGREE_SETS)}/profile.json under {step.out / 'runs'}")
    (step.out / "agree.json").write_text(json.dumps(found, indent=1, default=str))
    (step.out / "agree.md").write_text(agree_md(found))
    step.detail["worst"] = {k: max(v["max_relative"].items(), key=lambda kv: kv[1])  # type: ignore[union-attr]  # the values of found are the dicts built above, typed object
                            for k, v in found.items()}
    print(agree_md(found))


def agree_md(found: dict[str, dict[str, object]]) -> str:
    """Per metric, per set and reader: the largest relative and absolute difference over its targets."""
    cols: dict[str, list[dict[str, object]]] = {}
    for key, v in found.items():
        name, how = key.split("/")[0], key.split(" ")[-1]
        cols.setdefault(f"{name} via {how}", []).append(v)
    metrics = list(dict.fromkeys(m for v in found.values() for m in v["max_relative"]))  # type: ignore[attr-defined]  # the values of found are the dicts built above, typed object
    head = [f"| metric | {' | '.join(f'{c} (rel / abs)' for c in cols)} |", "|---|" + "---:|" * len(cols)]
    rows = []
    for m in metrics:
        cells = []
        for vs in cols.values():
            rel = max((v["max_relative"].get(m, 0.0) for v in vs), default=0.0)  # type: ignore[attr-defined]  # the values of found are the dicts built above, typed object
            ab = max((v["max_absolute"].get(m, 0.0) for v in vs), default=0.0)  # type: ignore[attr-defined]  # the values of found are the dicts built above, typed object
            cells.append(f"{rel:.1e} / {ab:.1e}")
        rows.append(f"| {m} | {' | '.join(cells)} |")
    n = {c: sum(int(v["launches"]) for v in vs) for c, vs in cols.items()}  # type: ignore[call-overload]  # the values of found are the dicts built above, typed object
    renamed = sorted({f"`{a}` / `{b}`" for v in found.values() for a, b in v["renamed"]})  # type: ignore[attr-defined]  # the values of found are the dicts built above, typed object
    tail = [f"<!-- launches compared: {', '.join(f'{c} {k}' for c, k in n.items())} -->"]
    tail += [f"<!-- kernel names spelled differently: {'; '.join(renamed)} -->"] if renamed else []
    return "\n".join(head + rows + tail) + "\n"


STEP_FUNCS: dict[str, Callable[[Step], None]] = {
    "info": step_info, "fixtures": step_fixtures, "triton": step_triton, "nokernel": step_nokernel, "perm": step_perm,
    "nvtx": step_nvtx, "table4096": lambda s: step_table(s, 4096), "table8192": lambda s: step_table(s, 8192),
    "bench": step_bench, "md": step_md, "agree": step_agree,
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--steps", default=",".join(ALL_STEPS), help=f"comma-separated, from {', '.join(ALL_STEPS + CPU_STEPS)}")
    args = ap.parse_args()
    steps = [s for s in args.steps.split(",") if s]
    bad = [s for s in steps if s not in STEP_FUNCS]
    if bad:
        print(f"capture_ncu: unknown step(s) {', '.join(bad)} (allowed: {', '.join(ALL_STEPS + CPU_STEPS)})",
              file=sys.stderr)
        return 2
    (args.out / "logs").mkdir(parents=True, exist_ok=True)
    summary_file = args.out / "summary.json"
    summary = json.loads(summary_file.read_text()) if summary_file.is_file() else {}
    for name in steps:
        step, start = Step(args.out, name), time.monotonic()
        print(f"=== {name} {time.strftime('%H:%M:%S')}", flush=True)
        try:
            STEP_FUNCS[name](step)
            result = {"ok": True}
        except Exception as exc:  # recorded, and the next step runs: device time is scarce
            result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:600]}
        result.update(seconds=round(time.monotonic() - start, 1), detail=step.detail)
        summary[name] = result
        summary_file.write_text(json.dumps(summary, indent=1, default=str))
        print(f"--- {name}: {'ok' if result['ok'] else 'FAILED ' + result['error']} ({result['seconds']} s)", flush=True)
    return 0 if all(summary[s]["ok"] for s in steps) else 1


def triton_program(axpy: Callable[..., object]) -> int:
    """A small torch + Triton program for `tracer profile -- ...`: a Triton axpy, a cuBLAS GEMM and a
    torch softmax, each inside an NVTX range, twice."""
    import torch

    n = 1 << 22
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    a, b = torch.randn(1024, 1024, device="cuda"), torch.randn(1024, 1024, device="cuda")
    out = torch.empty_like(x)
    for i in range(2):
        torch.cuda.nvtx.range_push(f"iter{i}")
        torch.cuda.nvtx.range_push("axpy")
        axpy[(n // 1024,)](x, y, out, 2.0, n, BLOCK=1024)
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_push("gemm")
        c = a @ b
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_push("softmax")
        s = torch.softmax(c, dim=-1)
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    print(f"ok {float(out.sum()):.3f} {float(s.sum()):.3f}")
    return 0


if __name__ == "__main__" and sys.argv[1:] == ["--triton-target"]:
    import triton
    import triton.language as tl

    @triton.jit
    def axpy_kernel(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, alpha * tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

    sys.exit(triton_program(axpy_kernel))

if __name__ == "__main__":
    sys.exit(main())
