"""A description and examples for every command and subcommand, applied to the parsers the command
modules build (tracer/cli.py); docs/cli.md is generated from the same parsers (scripts/gen_cli_reference.py).

Kept apart from the command modules so that they stay short and every example lives in one place
(tests/test_help.py checks that each parser has a description and 2-3 examples)."""
from __future__ import annotations

import argparse

# "command [subcommand]" -> (description, examples)
HELP: dict[str, tuple[str | None, tuple[str, ...]]] = {  # None: the module's own description
    "quickstart": (
        "The main job in one command. On a machine with a CUDA GPU: trace the seed workload (a cast-transpose "
        "kernel feeding a dgrad GEMM on another stream) and judge its ordering. Without a GPU: run `tracer demo` "
        "on sample data captured on an H200, and say so.",
        ("tracer quickstart", "tracer quickstart -o runs/first")),
    "kernels": (
        "The cast-transpose kernel family tracer ships: its fence variants, their PTX and SASS (compiled with "
        "NVRTC, no GPU needed), codegen diffs and the config heuristic.",
        ("tracer kernels list", "tracer kernels ptx device_before_atomic --config 16/16 --arch sm_90",
         "tracer kernels diff none device_before_atomic")),
    "kernels list": (
        "The kernel variants, what each fence does, and the LOAD/STORE configs.",
        ("tracer kernels list", "tracer kernels list --dtype fp32")),
    "kernels ptx": (None, ("tracer kernels ptx none --arch sm_90",
                           "tracer kernels ptx device_before_atomic --config 16/16 --arch sm_120")),
    "kernels sass": (None, ("tracer kernels sass none --arch sm_90",
                            "tracer kernels sass system_scope_atomic --arch sm_90")),
    "kernels diff": (
        "The SASS summary of two variants side by side (registers, instructions without NOP padding, fences, "
        "atomics and their scopes) and the diff of their opcodes.",
        ("tracer kernels diff none device_before_atomic", "tracer kernels diff none system_scope_atomic --full")),
    "kernels config": (
        "The LOAD/STORE config the heuristic picks for a shape and SM count.",
        ("tracer kernels config --shape 4096x4096", "tracer kernels config --shape 4096x4096 --sms 132")),
    "run": (
        "Run a built-in workload or a profile YAML with the corruption detector: every step checked against a "
        "reference; exit 1 when a check fails. On a CPU machine `--device cpu` runs the torch composite.",
        ("tracer run torch_composite --device cpu --shape 64x64",
         "tracer run linear_backward",
         "tracer run cast_transpose_dgrad --variant device_before_atomic --steps 10 --json")),
    "trace": (
        "Capture a trace (nsys, or CUPTI in-process) of a workload or of your own command, and judge the ordering "
        "of producer -> consumer kernel pairs across streams (happens-before) and, with --memory, memory hazards.",
        ("tracer trace run --memory -- python train.py", "tracer trace analyze runs/ctd",
         "tracer trace import profile.nsys-rep -o runs/imported")),
    "trace run": (
        "Run a workload (or the command after --) under the tracer, write a run directory (trace.sqlite, "
        "verdict.json, environment.json; a job's under procs/) and print the verdicts.",
        ("tracer trace run --memory -- python train.py",
         "tracer trace run -o runs/ddp -- torchrun --nproc-per-node 2 train.py",
         "tracer trace run cast_transpose_dgrad -o runs/ctd")),
    "trace analyze": (
        "Judge a run directory, a job directory or a trace file again: ordering verdicts of producer -> consumer "
        "pairs, memory hazards where the trace has access sets, stream statistics.",
        ("tracer trace analyze runs/ctd --pairs '*/cast_transpose:*/dgrad' --fail-on-unordered",
         "tracer trace analyze runs/mem --fail-on-hazard",
         "tracer trace analyze runs/ddp --json")),
    "trace import": (
        "Make a run directory from a trace made elsewhere: an .nsys-rep (exported with nsys), an nsys SQLite "
        "export, or a PyTorch profiler (Kineto) JSON.",
        ("tracer trace import profile.nsys-rep -o runs/imported", "tracer trace import trace.sqlite -o runs/imported",
         "tracer trace import kineto.json.gz -o runs/kineto")),
    "trace export": (
        "Export a trace for other viewers (Perfetto's JSON; a job gets one process track per rank).",
        ("tracer trace export --perfetto runs/ctd -o trace.json", "tracer trace export --perfetto runs/ddp -o ddp.json")),
    "sanitize": (
        "compute-sanitizer verdicts (memcheck, racecheck, initcheck, synccheck). `tracer sanitize WORKLOAD` is "
        "`tracer sanitize run WORKLOAD`.",
        ("tracer sanitize --tool all -- python train.py", "tracer sanitize import memcheck.xml",
         "tracer sanitize selftest")),
    "sanitize run": (
        "Run compute-sanitizer's tools on a workload or on the command after --, and turn their XML and text "
        "output into one verdict per tool (exit 1 on findings; a run that could not be judged is not clean).",
        ("tracer sanitize --tool all -- python train.py",
         "tracer sanitize --tool memcheck --only-kernel cast_transpose -- python train.py",
         "tracer sanitize --tool all cast_transpose_dgrad --shape 256x256x256 -o runs/san")),
    "sanitize import": (
        "Verdicts from compute-sanitizer output made elsewhere: FILE.xml (--xml --save FILE.xml; its text output "
        "FILE.log or FILE.txt beside it is read too), a text log, several files, or a folder of .xml files. "
        "Save the verdicts with --json for `tracer report` and `tracer plot verdicts` (which also take the XML).",
        ("tracer sanitize import memcheck.xml --log memcheck.txt",
         "tracer sanitize import memcheck.xml racecheck.xml --json > san.json",
         "tracer sanitize import sanitizer-out/ --sarif san.sarif")),
    "sanitize selftest": (
        "Every planted workload and the clean one under every tool: the detection matrix (needs a GPU).",
        ("tracer sanitize selftest", "tracer sanitize selftest --filter on")),
    "profile": (
        "Nsight Compute (ncu) counters per kernel launch: run, compare and import. `tracer profile WORKLOAD` is "
        "`tracer profile run WORKLOAD`.",
        ("tracer profile --kernel 'axpy|gemm' --launch-count 6 -- python train.py",
         "tracer profile compare runs/prof", "tracer profile import report.ncu-rep -o runs/imported")),
    "profile run": (
        "ncu on a workload's variants or on the command after --: one run directory of counters per launch.",
        ("tracer profile --kernel 'axpy|gemm' --launch-count 6 -- python train.py",
         "tracer profile cast_transpose_dgrad --variant all --shape 4096x4096x4096 -o runs/prof")),
    "profile compare": (
        "Medians per variant, deltas against a baseline, and the stall reason that grew most.",
        ("tracer profile compare runs/prof", "tracer profile compare runs/prof --baseline none --plot prof.png")),
    "profile import": (
        "A profile run directory from an .ncu-rep (read with NVIDIA's ncu-report package) or its raw CSV export.",
        ("tracer profile import report.ncu-rep -o runs/imported", "tracer profile import raw.csv -o runs/imported")),
    "campaign": (
        "Ablation campaigns: many trials per variant (local processes or Slurm), failure rates with confidence "
        "intervals and tests against a baseline; resumable.",
        ("tracer campaign run fence_ablation -o runs/fence.sqlite", "tracer campaign status runs/fence.sqlite",
         "tracer campaign report runs/fence.sqlite --json")),
    "campaign run": (
        "Run (or resume: run it again) a campaign profile; trials are stored in a SQLite store.",
        ("tracer campaign run fence_ablation -o runs/fence.sqlite",
         "tracer campaign run cpu_smoke --executor slurm --partition debug --time-min 30 --tasks 8")),
    "campaign status": (
        "Trials done per cell of a campaign store.",
        ("tracer campaign status runs/fence.sqlite", "tracer campaign status runs/cpu_smoke.sqlite")),
    "campaign report": (
        "Failure rates, 95% intervals and tests against the baseline variant.",
        ("tracer campaign report runs/fence.sqlite", "tracer campaign report runs/fence.sqlite --json --baseline none")),
    "plot": (
        "Pictures (.png or .svg): a stream timeline, a sanitizer verdict matrix, an ablation chart. The output's "
        "folder must exist (a missing one is refused, not created).",
        ("tracer plot stream-timeline runs/ctd -o timeline.png", "tracer plot verdicts runs/san -o verdicts.png",
         "tracer plot ablation runs/fence.sqlite -o ablation.png")),
    "plot stream-timeline": (
        "One lane per stream (per rank and device in a job), NVTX lanes, event edges and producer -> consumer "
        "pairs coloured by verdict; by default the densest part of the trace.",
        ("tracer plot stream-timeline runs/ctd -o timeline.png",
         "tracer plot stream-timeline runs/ctd --window 480ms:520ms --range '^step1/'",
         "tracer plot stream-timeline tests/data/jobs/ddp_nccl_2ranks --window 320ms:390ms -o ddp.png")),
    "plot verdicts": (
        "A tool x workload matrix of sanitizer verdicts from `tracer sanitize` output folders, their report.json, "
        "`sanitize import --json` files or raw compute-sanitizer XML.",
        ("tracer plot verdicts runs/san -o verdicts.png", "tracer plot verdicts memcheck.xml racecheck.xml")),
    "plot ablation": (
        "Failure rate per variant with 95% intervals, from a campaign store or a JSON of variant -> trials/failures.",
        ("tracer plot ablation runs/fence.sqlite -o ablation.png", "tracer plot ablation rates.json")),
    "report": (
        "One self-contained HTML page (pictures inline, no network) from trace and job run directories, sanitizer "
        "output (folders, JSON or raw XML), campaign stores and profile runs.",
        ("tracer report runs/ctd runs/san runs/fence.sqlite -o report.html", "tracer report runs/ddp -o ddp.html",
         "tracer report memcheck.xml -o san.html")),
    "demo": (
        "The whole product on sample data captured on an H200 and shipped in the package: verdicts, hazards, "
        "pictures, the HTML report and a Perfetto export, with no GPU needed.",
        ("tracer demo", "tracer demo -o demo-out")),
    "diff": (
        "Compare two runs of one kind (traces of any format, jobs, sanitize reports, campaigns, profile runs): "
        "ordering pairs changed, hazards and sanitizer findings new and gone (matched by NVTX path, kernel and memory "
        "role), campaign rates with intervals, and time per step, range and kernel with a rank test and a bootstrap "
        "interval (beyond noise or not). Gates for CI: --fail-on-new-hazard, --fail-on-new-finding, "
        "--fail-on-regression PCT (exit 1).",
        ("tracer diff runs/planted runs/fixed",
         "tracer diff runs/before runs/after --fail-on-new-hazard --fail-on-regression 5",
         "tracer diff runs/a runs/b --json --html diff.html --plot diff.png")),
    "serve": (
        "The tracing service for a team: every run under --runs in a browser (run list, run pages with hazards "
        "and an interactive timeline, diffs, downloads) and an allow-listed job queue per GPU, with a JSON API. "
        "Binds 127.0.0.1; any other address needs --token. Stop with Ctrl-C or SIGTERM.",
        ("tracer serve --runs runs/",
         "tracer serve --runs runs/ --read-only --port 9000",
         "tracer serve --runs /shared/runs --host 0.0.0.0 --token-file ~/.tracer-token --jobs jobs.yaml")),
    "doctor": (
        "What tracer needs on this machine, looked up as the commands look it up: shipped files, GPU, driver, "
        "torch, NVRTC, CUPTI, nsys, ncu, compute-sanitizer; with advice for each missing piece. Fails when a "
        "required one is missing (exit 5).",
        ("tracer doctor", "tracer doctor --json")),
    "completion": (
        "Print a shell completion script for tracer's commands, subcommands and options.",
        ("source <(tracer completion bash)", "tracer completion zsh > \"${fpath[1]}/_tracer\"",
         "tracer completion fish > ~/.config/fish/completions/tracer.fish")),
}


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """A parser's subcommands by name."""
    sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    return dict(sub.choices) if sub is not None else {}


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[str, argparse.ArgumentParser]]:
    """("command subcommand", parser) of every parser under this one, depth first, the root as ""."""
    out = [(" ".join(path), parser)]
    for name, child in subparsers(parser).items():
        out += walk(child, (*path, name))
    return out


def epilog(examples: tuple[str, ...]) -> str:
    return "examples:\n" + "\n".join(f"  {e}" for e in examples)


def apply(parser: argparse.ArgumentParser) -> None:
    """Descriptions and example epilogs onto every parser built (bare ones, built only as names, too)."""
    for name, p in walk(parser):
        if name not in HELP:
            continue
        description, examples = HELP[name]
        if description and not p.description:
            p.description = description
        p.epilog = epilog(examples)
        p.formatter_class = Formatter


class Formatter(argparse.HelpFormatter):
    """argparse's own, except that the examples keep one command a line."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("examples:\n"):
            return "\n".join(indent + line for line in text.splitlines())
        return super()._fill_text(text, width, indent)
