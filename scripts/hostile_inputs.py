"""Run the hostile corpus against the CLI and print what each bad input gets: the table of
docs/bad-inputs.md, regenerated rather than written by hand.

    python scripts/hostile_inputs.py                          # print the table
    python scripts/hostile_inputs.py --write docs/bad-inputs.md
    python scripts/hostile_inputs.py --only sanitizer         # cases whose class contains a word

Each case builds its input in a folder of its own and runs `tracer.cli.main(argv)` in a forked
child (so a crash, a hang or a memory blow-up of one case is recorded, not fatal): a fake
compute-sanitizer on PATH for tool faults, a file-size limit (RLIMIT_FSIZE) for a full disk.
A case is handled when its exit code is the expected one, nothing escaped as a traceback, and an
error is one line. Needs no GPU and no Nsight tool.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import signal
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests import fake_tools

DATA = ROOT / "tests" / "data"
CTD = DATA / "traces" / "cast_transpose_dgrad.sqlite"
SAN = DATA / "sanitizer" / "unfiltered-1024"
DEMO = ROOT / "tracer" / "data" / "demo"
CASE_TIMEOUT_S = 120
MEMORY_LIMIT = 4 << 30  # a case that needs more is recorded as a blow-up
FULL_DISK_BYTES = 512

Setup = Callable[[Path], "dict[str, str] | None"]  # builds the input in the case folder; env changes


@dataclass(frozen=True)
class Case:
    klass: str
    what: str
    argv: list[str]  # "{d}" is the case folder
    expect: tuple[int, ...]
    setup: Setup | None = None
    full_disk: bool = False
    verdict: bool = False  # read the sanitizer verdict from --json output
    after: Callable[[Path, str], str] | None = None  # (case folder, stdout+stderr) -> what is wrong, "" if nothing


@dataclass
class Outcome:
    code: int | None
    stdout: str = ""
    stderr: str = ""
    failure: str = ""  # "traceback ...", "crash (signal N)", "hang", set when it did not end cleanly
    notes: list[str] = field(default_factory=list)


# -- inputs -------------------------------------------------------------------------------------

def write(name: str, data: str | bytes) -> Setup:
    def make(d: Path) -> None:
        (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())
    return make


def copy(src: Path, name: str, mutate: Callable[[bytes], bytes] = lambda b: b) -> Setup:
    def make(d: Path) -> None:
        (d / name).write_bytes(mutate(src.read_bytes()))
    return make


def sql(name: str, *statements: str) -> Setup:
    """A copy of the CUPTI capture with statements applied."""
    def make(d: Path) -> None:
        (d / name).write_bytes(CTD.read_bytes())
        con = sqlite3.connect(d / name)
        for st in statements:
            con.execute(st)
        con.commit()
        con.close()
    return make


def flip(data: bytes) -> bytes:
    mid = len(data) // 2
    return data[:mid] + bytes(b ^ 0xFF for b in data[mid:mid + 4096]) + data[mid + 4096:]


def fake(**behaviour: object) -> Setup:
    def make(d: Path) -> dict[str, str]:
        bin_dir, cfg = fake_tools.install(d)
        fake_tools.configure(cfg, **behaviour)
        return fake_tools.environ(bin_dir, cfg)
    return make


def both(*setups: Setup) -> Setup:
    def make(d: Path) -> dict[str, str]:
        env: dict[str, str] = {}
        for s in setups:
            env.update(s(d) or {})
        return env
    return make


def held_store(d: Path) -> None:
    """A campaign store whose run lock stays held by this case's parent process (a run in flight)."""
    from tracer.store.lock import run_lock

    (d / "c.yaml").write_text(CAMPAIGN)
    HELD.append(run_lock(d / "s.sqlite"))


HELD: list[object] = []
WORKLOAD = "schema: 1\nworkload: linear_backward\n"
BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(8))
CAMPAIGN = "schema: 1\nname: t\nworkload: cpu_reference\nvariants: [none, device_before_atomic]\ntrials_per_cell: 4\n"
KINETO = {"traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "step0/x", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 5, "args": {"correlation": 1}},
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 20, "dur": 10,
     "args": {"device": 0, "stream": 7, "correlation": 1}}]}


def kineto(mutate: Callable[[dict], object]) -> Setup:
    """A small valid Kineto trace (one range, one launch, one kernel), changed in place by `mutate`."""
    doc = json.loads(json.dumps(KINETO))
    mutate(doc)
    return write("t.json", json.dumps(doc))


def _set(doc: dict, index: int, key: str, value: object) -> None:
    doc["traceEvents"][index][key] = value


def _xml(path: Path, old: str, new: str) -> bytes:
    return path.read_text().replace(old, new, 1).encode()


# -- the corpus ---------------------------------------------------------------------------------

def sanitizer_cases() -> list[Case]:
    imp = ["sanitize", "import"]
    half = copy(SAN / "memcheck-clean.xml", "memcheck.xml", lambda b: b[: len(b) // 2])
    return [
        Case("sanitizer output", "truncated XML (half of a clean memcheck run)", [*imp, "{d}/memcheck.xml", "--json"], (1,), half, verdict=True),
        Case("sanitizer output", "empty XML", [*imp, "{d}/memcheck.xml", "--json"], (1,), write("memcheck.xml", ""), verdict=True),
        Case("sanitizer output", "malformed XML (garbage after 5 kB)", [*imp, "{d}/memcheck.xml", "--json"], (1,),
             copy(SAN / "memcheck-clean.xml", "memcheck.xml", lambda b: b[:5000] + b"<<<&&&"), verdict=True),
        Case("sanitizer output", "XML of a crashed target, no text output", [*imp, "{d}/initcheck.xml", "--json"], (1,),
             copy(SAN / "initcheck-crash.xml", "initcheck.xml"), verdict=True),
        Case("sanitizer output", "XML with its text as FILE.txt", [*imp, "{d}/initcheck.xml", "--json"], (1,),
             both(copy(SAN / "initcheck-crash.xml", "initcheck.xml"), copy(SAN / "initcheck-crash.log", "initcheck.txt")), verdict=True),
        Case("sanitizer output", "XML with a foreign root element", [*imp, "{d}/x.xml"], (6,), write("x.xml", "<html><body/></html>")),
        Case("sanitizer output", "XML entity bomb", [*imp, "{d}/x.xml"], (6,), write("x.xml", '<?xml version="1.0"?><!DOCTYPE x ['
             '<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;">]>'
             '<ComputeSanitizerOutput>&c;</ComputeSanitizerOutput>')),
        Case("sanitizer output", "XML external entity", [*imp, "{d}/x.xml"], (6,), write("x.xml", '<?xml version="1.0"?>'
             '<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><ComputeSanitizerOutput>&e;</ComputeSanitizerOutput>')),
        Case("sanitizer output", "racecheck XML with a non-numeric <count>", [*imp, "{d}/racecheck.xml", "--json"], (1, 6),
             write("racecheck.xml", _xml(DATA / "sanitizer" / "filtered-128" / "racecheck-analysis-planted_race.xml",
                                         "<count>", "<count>many")), verdict=True),
        Case("sanitizer output", "README.md", [*imp, str(ROOT / "README.md")], (6,)),
        Case("sanitizer output", "a tracer report.json", [*imp, str(DEMO / "sanitize" / "report.json")], (6,)),
        Case("sanitizer output", "empty .log", [*imp, "{d}/memcheck.log"], (6,), write("memcheck.log", "")),
        Case("sanitizer output", "binary .log", [*imp, "{d}/memcheck.log"], (6,), write("memcheck.log", bytes(range(256)) * 8)),
        Case("sanitizer output", "--log naming a foreign file", [*imp, "{d}/s.xml", "--log", str(ROOT / "README.md")], (6,),
             copy(SAN / "synccheck-clean.xml", "s.xml")),
        Case("sanitizer output", "text log counting 2 leak errors it does not print", [*imp, "{d}/memcheck.log", "--json"], (1,),
             write("memcheck.log", "========= LEAK SUMMARY: 1024 bytes leaked in 2 allocations\n========= ERROR SUMMARY: 2 errors\n"),
             verdict=True),
        Case("sanitizer output", "text log cut before its summary", [*imp, "{d}/memcheck.log", "--json"], (1,),
             write("memcheck.log", "========= COMPUTE-SANITIZER\ntarget output\n"), verdict=True),
        Case("sanitizer output", "a file that does not exist", [*imp, "{d}/nothing.xml"], (2,)),
    ]


def tool_fault_cases() -> list[Case]:
    run = ["sanitize", "--tool", "synccheck", "-o", "{d}/out", "--json", "--", "python", "t.py"]
    clean, empty = fake_tools.CLEAN_TEXT, fake_tools.EMPTY_XML
    return [
        Case("sanitizer faults (fake tool)", "leaves a truncated XML", run, (1,), fake(xml=empty[:50], text=clean), verdict=True),
        Case("sanitizer faults (fake tool)", "leaves an empty XML", run, (1,), fake(xml="", text=clean), verdict=True),
        Case("sanitizer faults (fake tool)", "exits 86 with no record", run, (1,), fake(xml=empty, text=clean, exit=86), verdict=True),
        Case("sanitizer faults (fake tool)", "writes no XML", run, (1,), fake(text=clean), verdict=True),
        Case("sanitizer faults (fake tool)", "prints no text", run, (1,), fake(xml=empty), verdict=True),
        Case("sanitizer faults (fake tool)", "killed by SIGKILL", run, (1,), fake(xml=empty, text=clean, signal=9), verdict=True),
        Case("sanitizer faults (fake tool)", "hangs (--timeout 1)", [*run[:-3], "--timeout", "1", *run[-3:]], (8,), fake(hang=True),
             verdict=True),
        Case("sanitizer faults (fake tool)", "--timeout nan", ["sanitize", "--timeout", "nan", "--", "python", "t.py"], (2,)),
        Case("sanitizer faults (fake tool)", "--timeout -5", ["sanitize", "--timeout", "-5", "--", "python", "t.py"], (2,)),
        Case("sanitizer faults (fake tool)", "--timeout 0", ["trace", "run", "--timeout", "0", "--", "python", "t.py"], (2,)),
    ]


def trace_cases() -> list[Case]:
    an = ["trace", "analyze"]
    kern = "CUPTI_ACTIVITY_KIND_KERNEL"
    return [
        Case("pair specs", "globs matching no kernel, --fail-on-unordered", [*an, str(CTD), "--pairs", "nosuch/*:*/dgrad",
                                                                               "--fail-on-unordered"], (2,)),
        Case("pair specs", "globs forming no pair", [*an, str(CTD), "--pairs", "*/dgrad:*/cast_transpose", "--fail-on-unordered"], (2,)),
        Case("pair specs", "'*:*' (a kernel with itself)", [*an, str(CTD), "--pairs", "*:*", "--fail-on-unordered"], (0,)),
        Case("pair specs", "'step1/*:step1/*'", [*an, str(CTD), "--pairs", "step1/*:step1/*", "--fail-on-unordered"], (0,)),
        Case("pair specs", "malformed --pairs 'a:b:c'", [*an, str(CTD), "--pairs", "a:b:c"], (2,)),
        Case("trace files", "README.md", [*an, str(ROOT / "README.md")], (6,)),
        Case("trace files", "empty .sqlite", [*an, "{d}/t.sqlite"], (6,), write("t.sqlite", "")),
        Case("trace files", "SQLite with 4 kB of flipped bytes", [*an, "{d}/t.sqlite"], (6,), copy(CTD, "t.sqlite", flip)),
        Case("trace files", "SQLite with TEXT in integer columns", [*an, "{d}/t.sqlite"], (6,), sql("t.sqlite", f"UPDATE {kern} SET start = 'abc'")),
        Case("trace files", "SQLite with NULL kernel starts", [*an, "{d}/t.sqlite"], (6,), sql(
            "t.sqlite", f"CREATE TABLE k2 AS SELECT * FROM {kern}", f"DROP TABLE {kern}",  # the copy has no NOT NULL
            f"ALTER TABLE k2 RENAME TO {kern}", f"UPDATE {kern} SET start = NULL")),
        Case("trace files", "SQLite with 64-bit overflowing times", [*an, "{d}/t.sqlite"], (6,),
             sql("t.sqlite", f"UPDATE {kern} SET start = -9223372036854775808, end = 9223372036854775807")),
        Case("trace files", "SQLite with BLOB strings", [*an, "{d}/t.sqlite"], (0, 6), sql("t.sqlite", "UPDATE StringIds SET value = X'00ff80'")),
        Case("trace files", "a campaign store as a trace", [*an, "{d}/t.sqlite"], (6,), lambda d: _store(d / "t.sqlite")),
        Case("trace files", "Kineto JSON cut in half", [*an, "{d}/t.json"], (6,), write("t.json", json.dumps(KINETO)[:100])),
        Case("trace files", "Kineto JSON with string timestamps", [*an, "{d}/t.json"], (6,), kineto(lambda doc: _set(doc, 2, "ts", "abc"))),
        Case("trace files", "Kineto JSON with NaN timestamps", [*an, "{d}/t.json"], (6,), kineto(lambda doc: _set(doc, 2, "ts", float("nan")))),
        Case("trace files", "Kineto JSON with args as a list", [*an, "{d}/t.json"], (0, 6), kineto(lambda doc: _set(doc, 2, "args", [1, 2]))),
        Case("trace files", "Kineto JSON with a kernel without a name", [*an, "{d}/t.json"], (0, 6),
             kineto(lambda doc: doc["traceEvents"][2].pop("name"))),
        Case("trace files", "Kineto JSON nested 100,000 deep", [*an, "{d}/t.json"], (6,),
             write("t.json", '{"traceEvents": ' + "[" * 100_000 + "]" * 100_000 + "}")),
    ]


def _store(path: Path) -> None:
    from tracer.campaign.grid import load_campaign
    from tracer.campaign.trials_db import Store

    (path.parent / "c.yaml").write_text(CAMPAIGN)
    store = Store.open(path, create=True)
    store.init(load_campaign(str(path.parent / "c.yaml")), {})
    store.con.close()


def picture_cases() -> list[Case]:
    tl = ["plot", "stream-timeline", str(CTD), "-o", "{d}/t.png"]
    return [
        Case("pictures", "--range '('", [*tl, "--range", "("], (2,)),
        Case("pictures", "--range '['", [*tl, "--range", "["], (2,)),
        Case("pictures", "--range matching nothing", [*tl, "--range", "^nosuch/"], (2,)),
        Case("pictures", "--window 1e999:2e999", [*tl, "--window", "1e999:2e999"], (2,)),
        Case("pictures", "--window 5000:1000", [*tl, "--window", "5000:1000"], (2,)),
        Case("pictures", "--size nanxnan", [*tl, "--size", "nanxnan"], (2,)),
        Case("pictures", "-o t.gif", ["plot", "stream-timeline", str(CTD), "-o", "{d}/t.gif"], (2,)),
        Case("pictures", "plot verdicts of README.md", ["plot", "verdicts", str(ROOT / "README.md"), "-o", "{d}/v.png"], (6,)),
        Case("pictures", "plot ablation of README.md", ["plot", "ablation", str(ROOT / "README.md"), "-o", "{d}/a.png"], (2, 6)),
        Case("pictures", "report --range '['", ["report", str(CTD), "-o", "{d}/r.html", "--range", "["], (2,)),
    ]


def profile_cases() -> list[Case]:
    run = ["run", "{d}/w.yaml"]
    return [
        Case("workload profiles", "YAML alias bomb (10^9 values)", run, (2,), write("w.yaml", WORKLOAD + BOMB.replace("a:", "description:", 0))),
        Case("workload profiles", "recursive YAML alias", run, (2,), write("w.yaml", WORKLOAD + "trace: {pairs: &p [*p]}\n")),
        Case("workload profiles", "YAML nested 100,000 deep", run, (2,), write("w.yaml", WORKLOAD + "description: " + "[" * 100_000 + "]" * 100_000)),
        Case("workload profiles", "not UTF-8", run, (2,), write("w.yaml", WORKLOAD.encode() + b"description: caf\xe9\n")),
        Case("workload profiles", "tolerance .nan", run, (2,), write("w.yaml", WORKLOAD + "tolerance: {gemm_rel: .nan}\n")),
        Case("workload profiles", "tolerance .inf", run, (2,), write("w.yaml", WORKLOAD + "tolerance: {grad_norm_ratio: .inf}\n")),
        Case("workload profiles", "!!python/object", run, (2,), write("w.yaml", WORKLOAD + "description: !!python/object/apply:os.system [ls]\n")),
        Case("workload profiles", "a list, not a mapping", run, (2,), write("w.yaml", "- a\n- b\n")),
        Case("workload profiles", "a 5 MB file", run, (2,), write("w.yaml", WORKLOAD + "#" * (5 << 20))),
        Case("command-line values", "--shape 99999999984x16", ["run", "linear_backward", "--shape", "99999999984x16"], (2,)),
        Case("command-line values", "--shape ''", ["run", "linear_backward", "--shape", ""], (2,)),
        Case("command-line values", "--seed 1e23", ["run", "linear_backward", "--seed", "1e23"], (2,)),
        Case("command-line values", "--seed -1", ["run", "linear_backward", "--seed", "-1"], (2,)),
        Case("command-line values", "--steps 99999999999", ["run", "linear_backward", "--steps", "99999999999"], (2,)),
        Case("command-line values", "sanitize --steps 99999999999", ["sanitize", "linear_backward", "--steps", "99999999999"], (2,)),
        Case("command-line values", "unknown workload", ["run", "resnet"], (2,)),
    ]


def campaign_cases() -> list[Case]:
    def prof(extra: str) -> Setup:
        return write("c.yaml", CAMPAIGN + extra)
    run = ["campaign", "run", "{d}/c.yaml", "-o", "{d}/s.sqlite", "--no-progress"]
    return [
        Case("campaign profiles", "nested list of variants", run, (2,),
             write("c.yaml", CAMPAIGN.replace("[none, device_before_atomic]", "[[none]]"))),
        Case("campaign profiles", "variants: []", run, (2,), write("c.yaml", CAMPAIGN.replace("[none, device_before_atomic]", "[]"))),
        Case("campaign profiles", "duplicate variants", run, (2,), write("c.yaml", CAMPAIGN.replace("[none, device_before_atomic]", "[none, none]"))),
        Case("campaign profiles", "shape 'abc'", run, (2,), prof("shapes: [abc]\n")),
        Case("campaign profiles", "shape '0x5'", run, (2,), prof("shapes: ['0x5']\n")),
        Case("campaign profiles", "executor tasks 100000000", run, (2,), prof("executor: {tasks: 100000000}\n")),
        Case("campaign profiles", "sample_rows .nan", run, (2,), prof("sample_rows: .nan\n")),
        Case("campaign profiles", "--workers -1", [*run, "--workers", "-1"], (2,), prof("")),
        Case("campaign stores", "status of a trace SQLite (left unmodified)", ["campaign", "status", "{d}/t.sqlite"], (6,), copy(CTD, "t.sqlite")),
        Case("campaign stores", "report of README.md", ["campaign", "report", str(ROOT / "README.md")], (6,)),
        Case("campaign stores", "run into a trace SQLite", ["campaign", "run", "{d}/c.yaml", "-o", "{d}/t.sqlite"], (6,),
             both(prof(""), copy(CTD, "t.sqlite"))),
        Case("campaign stores", "report --baseline nosuch", ["campaign", "report", "{d}/s.sqlite", "--baseline", "nosuch"], (2,),
             lambda d: _store(d / "s.sqlite")),
        Case("campaign stores", "a second run while one is in flight", run, (2,), held_store),
    ]


def full_disk_cases() -> list[Case]:
    xml = str(SAN / "memcheck-planted_oob.xml")
    return [Case("full disk", what, argv, (9,), full_disk=True) for what, argv in [
        ("plot stream-timeline", ["plot", "stream-timeline", str(CTD), "-o", "{d}/t.png"]),
        ("plot ablation", ["plot", "ablation", str(DEMO / "campaign.json"), "-o", "{d}/a.png"]),
        ("report", ["report", str(CTD), "-o", "{d}/r.html"]),
        ("trace export --perfetto", ["trace", "export", str(CTD), "--perfetto", "-o", "{d}/p.json"]),
        ("trace import", ["trace", "import", str(CTD), "-o", "{d}/run"]),
        ("sanitize --junit", ["sanitize", "import", xml, "--junit", "{d}/j.xml"]),
        ("sanitize --sarif", ["sanitize", "import", xml, "--sarif", "{d}/s.sarif"]),
        ("campaign run", ["campaign", "run", str(ROOT / "profiles" / "campaigns" / "cpu_smoke.yaml"), "-o", "{d}/s.sqlite"]),
    ]]


def copy_sql(src: Path, name: str, *statements: str) -> Setup:
    """A copy of src (read through SQLite's backup, so a WAL store comes whole) with statements applied."""
    def make(d: Path) -> None:
        from tests.trace_synthetic import copy_with
        copy_with(src, d / name, *statements)
    return make


def two_processes(d: Path) -> None:
    """Two real captures (both with streams 7 and 13) merged as two processes of one export."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from merge_nsys_processes import merge
    merge(DATA / "traces" / "planted_cross_stream.sqlite", DATA / "traces" / "event_ordered_dgrad.sqlite", d / "t.sqlite", 4242)


def fan_out(d: Path) -> None:
    """One op with 3,000 accesses launched 3,000 times: 9M (launch, access) rows from 6,000 stored."""
    from tests.trace_synthetic import fan_out as build
    build(d / "t.sqlite")


def stored_store(value: str) -> Setup:
    """A campaign store with its trials run, then one trial's `failed` flag set to value."""
    def make(d: Path) -> None:
        from tracer.cli import main as tracer_main
        (d / "c.yaml").write_text(CAMPAIGN.replace("[none, device_before_atomic]", "[none]"))
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            tracer_main(["campaign", "run", str(d / "c.yaml"), "-o", str(d / "s.sqlite"), "--no-progress"])
        with contextlib.closing(sqlite3.connect(d / "s.sqlite")) as con:
            con.execute(f"UPDATE trials SET failed = {value} WHERE trial = 0")
            con.commit()
    return make


def damaged_cases() -> list[Case]:
    """Damaged input that once read as nothing to report (0 pairs, 0 UNORDERED, 0 hazards, exit 0),
    and exports of several processes that once shared stream ids."""
    an = ["trace", "analyze"]
    kern, hz = "CUPTI_ACTIVITY_KIND_KERNEL", DATA / "hazards" / "raw_no_wait.sqlite"
    dup_rule = ("schema: 1\nsuppressions:\n  - id: x\n    tool: racecheck\n    kind: '*'\n    kernel: 'nvjet_*'\n"
                "    kernel: '*'\n    reason: widened by a second key\n")
    return [
        Case("damaged traces", "every kernel with one correlation id, --fail-on-unordered", [*an, "{d}/t.sqlite", "--fail-on-unordered"],
             (6,), sql("t.sqlite", f"UPDATE {kern} SET correlationId = 1")),
        Case("damaged traces", "an nsys export whose kernel table has 0 rows", [*an, "{d}/t.sqlite", "--fail-on-unordered"], (6,),
             sql("t.sqlite", f"DELETE FROM {kern}", "DELETE FROM META_DATA_EXPORT WHERE name = 'TRACER_PRODUCER'")),
        Case("damaged traces", "a tracer capture with 0 kernels, --fail-on-unordered", [*an, "{d}/t.sqlite", "--fail-on-unordered"], (1,),
             sql("t.sqlite", f"DELETE FROM {kern}")),
        Case("damaged traces", "a runtime call starting at -3,000 ns (before the session start)", [*an, "{d}/t.sqlite"], (6,),
             sql("t.sqlite", "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET start = -3000, end = -500 WHERE rowid = 1")),
        Case("damaged traces", "TRACER_MEMORY=1 without TRACER_MEMORY_ACCESS, --fail-on-hazard", [*an, "{d}/t.sqlite", "--fail-on-hazard"],
             (6,), copy_sql(hz, "t.sqlite", "DROP TABLE TRACER_MEMORY_ACCESS")),
        Case("damaged traces", "memory accesses pointing at no op, --fail-on-hazard", [*an, "{d}/t.sqlite", "--fail-on-hazard"], (6,),
             copy_sql(hz, "t.sqlite", "UPDATE TRACER_MEMORY_ACCESS SET opId = opId + 1000000000")),
        Case("damaged traces", "one op launched 3,000 times with 3,000 accesses (9M rows)", [*an, "{d}/t.sqlite", "--fail-on-hazard"],
             (6,), fan_out),
        Case("damaged traces", "Kineto JSON with a second traceEvents key", [*an, "{d}/t.json"], (6,),
             write("t.json", '{"traceEvents": [], ' + json.dumps(KINETO)[1:])),
        Case("damaged traces", "Kineto event with a duplicate key", [*an, "{d}/t.json"], (6,),
             write("t.json", json.dumps(KINETO).replace('"ph": "X", "cat": "kernel"', '"ph": "X", "ph": "i", "cat": "kernel"'))),
        Case("damaged traces", "two processes on one GPU, both with streams 7 and 13, --fail-on-unordered",
             [*an, "{d}/t.sqlite", "--fail-on-unordered"], (1,), two_processes),
        Case("damaged traces", "Kineto JSON of two processes whose launches share correlation id 1", [*an, "{d}/t.json"], (6,),
             write("t.json", json.dumps({"traceEvents": [*KINETO["traceEvents"], {**KINETO["traceEvents"][1], "pid": 2, "tid": 2}]}))),
        Case("duplicate keys", "suppressions YAML whose second `kernel:` is '*'",
             ["sanitize", "import", str(SAN / "memcheck-planted_oob.xml"), "--suppressions", "{d}/s.yaml"], (2,), write("s.yaml", dup_rule)),
        Case("duplicate keys", "workload profile with `workload:` twice", ["run", "{d}/w.yaml"], (2,),
             write("w.yaml", WORKLOAD + "workload: cpu_reference\n")),
        Case("duplicate keys", "campaign profile with `trials_per_cell:` twice",
             ["campaign", "run", "{d}/c.yaml", "-o", "{d}/s.sqlite", "--no-progress"], (2,), write("c.yaml", CAMPAIGN + "trials_per_cell: 9\n")),
        *(Case("campaign stores", f"a trial whose `failed` flag is {v}", ["campaign", "report", "{d}/s.sqlite"], (6,), stored_store(v))
          for v in ("'x'", "-1", "7")),
        Case("scale", "10,000 streams, trace analyze (--pairs all)", [*an, "{d}/t.sqlite"], (0,), many_streams(10_000)),
        Case("scale", "10,000 streams, plot stream-timeline (lanes folded)", ["plot", "stream-timeline", "{d}/t.sqlite", "-o", "{d}/t.png"],
             (0,), many_streams(10_000)),
        Case("scale", "5,000 streams, each waiting on the previous one's event before its kernels, trace analyze", [*an, "{d}/t.sqlite"],
             (0,), many_streams(5_000, "chain-first")),
        Case("scale", "10,000 streams, each waiting on the previous one's event, plot stream-timeline",
             ["plot", "stream-timeline", "{d}/t.sqlite", "-o", "{d}/t.png"], (0,), many_streams(10_000, "chain")),
        Case("scale", "ablation JSON of 5,000 variants", ["plot", "ablation", "{d}/a.json", "-o", "{d}/a.png"], (0,),
             write("a.json", json.dumps({"variants": {f"v{i}": {"failures": i % 3, "trials": 10} for i in range(5000)}}))),
    ]


def many_streams(n: int, case: str = "plain") -> Setup:
    def make(d: Path) -> None:
        sys.path.insert(0, str(ROOT / "scripts"))
        from bench_streams import make as build
        build(n, case, d / "t.sqlite")
    return make


# -- round two (issue 25): names read as URIs, outputs over inputs, unbounded readers, names ----

JOB = DATA / "jobs" / "ddp_gloo_2ranks"
NCU = DATA / "ncu" / "cast_transpose_1024.raw.csv"
NCU_PROFILE = DATA / "ncu" / "table-4096" / "profile.json"
EVIL_NAMES = ["\x1b[2J\x1b[H", "a\rUNORDERED: 0 pair(s)", "b\nUNORDERED: 0 pair(s)", "c\x00d", "e\u202efdp.exe", "f\x9b2J",
              "g\u2028h", "$\\frac{$", "k\ud800"]
RAW = "\x1b\r\x00\x07\x7f\x9b\u202e\u2028\ud800"


def link(name: str, target: str | Path) -> Setup:
    def make(d: Path) -> None:
        (d / name).symlink_to(target)
    return make


def fifo(name: str) -> Setup:
    def make(d: Path) -> None:
        os.mkfifo(d / name)
    return make


def folder(name: str) -> Setup:
    def make(d: Path) -> None:
        (d / name).mkdir()
    return make


def job_with(change: Callable[[Path], object]) -> Setup:
    """A copy of a real two-rank job run directory, changed by `change(run_dir)`."""
    def make(d: Path) -> None:
        import shutil

        shutil.copytree(JOB, d / "run")
        change(d / "run")
    return make


def _marker(run: Path) -> Path:
    return sorted((run / "procs").glob("*.json"))[0]


def _replace(path: Path, data: str | None = None, target: str | None = None, make_fifo: bool = False) -> None:
    path.unlink()
    if make_fifo:
        os.mkfifo(path)
    elif target is not None:
        path.symlink_to(target)
    else:
        path.write_text(data or "")


def store_profile(value: str) -> Setup:
    def make(d: Path) -> None:
        _store(d / "s.sqlite")
        con = sqlite3.connect(d / "s.sqlite")
        con.execute("UPDATE campaign SET value = ? WHERE key = 'profile'", (value,))
        con.commit()
        con.close()
    return make


def exclusive_lock(d: Path) -> None:
    """t.sqlite held with an EXCLUSIVE lock by this case's parent process for the case's length."""
    (d / "t.sqlite").write_bytes(CTD.read_bytes())
    con = sqlite3.connect(d / "t.sqlite", isolation_level=None)
    con.execute("PRAGMA locking_mode=EXCLUSIVE")
    con.execute("BEGIN EXCLUSIVE")
    HELD.append(con)


def hot_journal(d: Path) -> None:
    """A copy of a database and its journal taken in the middle of a write (a writer that crashed)."""
    from tests.trace_synthetic import hot_journal as build
    (d / "w").mkdir()
    build(d / "w", d).rename(d / "t.sqlite")
    (d / "h.sqlite-journal").rename(d / "t.sqlite-journal")


def long_line_log(d: Path) -> None:
    """A text log whose target printed one 200 MB line (written in pieces: the parent stays small)."""
    with open(d / "memcheck.log", "wb") as fh:
        fh.write(b"========= COMPUTE-SANITIZER\n")
        for _ in range(200):
            fh.write(b"x" * (1 << 20))
        fh.write(b"\n========= ERROR SUMMARY: 0 errors\n")


def gzip_bomb(d: Path) -> None:
    """Under 1 MB of gzip that expands to 100M empty events (300 MB), written in pieces."""
    import gzip

    with gzip.open(d / "t.json.gz", "wb", compresslevel=9) as fh:
        fh.write(b'{"traceEvents": [')
        for _ in range(100):
            fh.write(b"{}," * 1_000_000)
        fh.write(b"{}]}")


def kineto_named(names: list[str]) -> Setup:
    """A Kineto trace with one NVTX range and one kernel per name, each kernel on its own stream."""
    events = []
    for i, name in enumerate(names):
        events += [{"ph": "X", "cat": "user_annotation", "name": f"step0/{name}", "pid": 1, "tid": 1, "ts": i * 100, "dur": 90},
                   {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": i * 100 + 10, "dur": 5,
                    "args": {"correlation": i + 1}},
                   {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7 + i, "ts": i * 100 + 20, "dur": 10,
                    "args": {"device": 0, "stream": 7 + i, "correlation": i + 1}}]
    return write("t.json", json.dumps({"traceEvents": events}))


def ncu_csv(column: str, value: str) -> Setup:
    def make(d: Path) -> None:
        import csv

        rows = list(csv.reader(io.StringIO(NCU.read_text(encoding="utf-8-sig"))))
        rows[2][rows[0].index(column)] = value
        out = io.StringIO()
        csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
        (d / "r.csv").write_text(out.getvalue())
    return make


def unchanged(name: str, src: Path) -> Callable[[Path, str], str]:
    def check(d: Path, _: str) -> str:
        return "" if (d / name).read_bytes() == src.read_bytes() else f"{name} was overwritten"
    return check


def only(*names: str) -> Callable[[Path, str], str]:
    def check(d: Path, _: str) -> str:
        extra = sorted(set(os.listdir(d)) - set(names))
        return f"created {', '.join(extra)}" if extra else ""
    return check


def no_raw(d: Path, text: str) -> str:
    bad = sorted({f"U+{ord(c):04X}" for c in text if c in RAW})
    return f"raw {', '.join(bad)} reached the terminal" if bad else ""


def svg_parses(name: str) -> Callable[[Path, str], str]:
    def check(d: Path, text: str) -> str:
        import xml.dom.minidom

        try:
            xml.dom.minidom.parse(str(d / name))
        except Exception as exc:  # any parse failure is the finding
            return f"{name} is not XML ({type(exc).__name__})"
        return no_raw(d, text)
    return check


def says(words: str) -> Callable[[Path, str], str]:
    def check(d: Path, text: str) -> str:
        return "" if words in text else f"does not say {words!r}"
    return check


def path_cases() -> list[Case]:
    an = ["trace", "analyze"]
    return [
        Case("file names as URIs", "run%41.sqlite (a README) beside runA.sqlite (a trace)", [*an, "{d}/run%41.sqlite"], (6,),
             both(copy(CTD, "runA.sqlite"), copy(ROOT / "README.md", "run%41.sqlite"))),
        Case("file names as URIs", "missing a?b.sqlite beside a (a trace): nothing created", [*an, "{d}/a?b.sqlite"], (6,),
             copy(CTD, "a"), after=only("a")),
        Case("file names as URIs", "missing a#b.sqlite beside a (a trace): nothing created", [*an, "{d}/a#b.sqlite"], (6,),
             copy(CTD, "a"), after=only("a")),
        Case("file names as URIs", "a trace named x?mode=rwc#y.sqlite", [*an, "{d}/x?mode=rwc#y.sqlite"], (0,),
             copy(CTD, "x?mode=rwc#y.sqlite"), after=only("x?mode=rwc#y.sqlite")),
        Case("file names as URIs", "a trace named file:t.sqlite (relative)", [*an, "file:t.sqlite"], (0,), copy(CTD, "file:t.sqlite")),
        Case("file names as URIs", "campaign store s?mode=ro.sqlite", ["campaign", "run", "{d}/c.yaml", "-o", "{d}/s?mode=ro.sqlite",
             "--no-progress", "--workers", "1"], (0,), write("c.yaml", CAMPAIGN.replace("trials_per_cell: 4", "trials_per_cell: 1"))),
    ]


def output_cases() -> list[Case]:
    xml = "memcheck-planted_oob.xml"
    return [
        Case("outputs over inputs", "report t.sqlite -o t.sqlite", ["report", "{d}/t.sqlite", "-o", "{d}/t.sqlite"], (2,),
             copy(CTD, "t.sqlite"), after=unchanged("t.sqlite", CTD)),
        Case("outputs over inputs", "trace export --perfetto -o t.sqlite t.sqlite", ["trace", "export", "{d}/t.sqlite", "--perfetto",
             "-o", "{d}/t.sqlite"], (2,), copy(CTD, "t.sqlite"), after=unchanged("t.sqlite", CTD)),
        Case("outputs over inputs", "plot -o a symlink to the input", ["plot", "stream-timeline", "{d}/t.sqlite", "-o", "{d}/l.png"],
             (2,), both(copy(CTD, "t.sqlite"), link("l.png", "t.sqlite")), after=unchanged("t.sqlite", CTD)),
        Case("outputs over inputs", "report -o the trace of an input run directory", ["report", "{d}/run", "-o",
             "{d}/run/procs/vm-2556.sqlite"], (2,), job_with(lambda run: None)),
        Case("outputs over inputs", "sanitize import x.xml --junit x.xml", ["sanitize", "import", f"{{d}}/{xml}", "--junit",
             f"{{d}}/{xml}"], (2,), copy(SAN / xml, xml), after=unchanged(xml, SAN / xml)),
        Case("outputs over inputs", "sanitize import x.xml --sarif x.txt (its text log)", ["sanitize", "import", "{d}/m.xml", "--sarif",
             "{d}/m.txt"], (2,), both(copy(SAN / xml, "m.xml"), copy(SAN / "memcheck-planted_oob.log", "m.txt")),
             after=unchanged("m.txt", SAN / "memcheck-planted_oob.log")),
        Case("outputs over inputs", "report -o /dev/null", ["report", str(CTD), "-o", "/dev/null"], (2,),
             after=lambda d, t: "" if Path("/dev/null").is_char_device() else "/dev/null replaced"),
        Case("outputs over inputs", "report -o a FIFO", ["report", str(CTD), "-o", "{d}/o.html"], (2,), fifo("o.html")),
        Case("outputs over inputs", "report -o a directory", ["report", str(CTD), "-o", "{d}/o.html"], (2,), folder("o.html")),
        Case("outputs over inputs", "trace export -o a symlink to /dev/zero", ["trace", "export", str(CTD), "--perfetto", "-o",
             "{d}/p.json"], (2,), link("p.json", "/dev/zero")),
        Case("outputs over inputs", "report -o a 250-character name (temp name fits NAME_MAX)", ["report", str(CTD), "-o",
             "{d}/" + "r" * 245 + ".html"], (0,)),
        Case("outputs over inputs", "report -o a 300-character name", ["report", str(CTD), "-o", "{d}/" + "r" * 295 + ".html"], (2,)),
        Case("outputs over inputs", "campaign name: /tmp/evil", ["campaign", "run", "{d}/c.yaml", "--no-progress"], (2,),
             write("c.yaml", CAMPAIGN.replace("name: t", "name: /tmp/evil"))),
        Case("outputs over inputs", "campaign name: ../../evil", ["campaign", "run", "{d}/c.yaml", "--no-progress"], (2,),
             write("c.yaml", CAMPAIGN.replace("name: t", "name: ../../evil"))),
        Case("outputs over inputs", "campaign name: a/b", ["campaign", "run", "{d}/c.yaml", "--no-progress"], (2,),
             write("c.yaml", CAMPAIGN.replace("name: t", "name: a/b"))),
    ]


def reader_cases() -> list[Case]:
    an = ["trace", "analyze"]
    deep = "[" * 100_000 + "]" * 100_000
    return [
        Case("special files as input", "trace analyze a FIFO", [*an, "{d}/t.sqlite"], (6,), fifo("t.sqlite"), after=says("is a FIFO")),
        Case("special files as input", "trace analyze /dev/zero", [*an, "/dev/zero"], (6,), after=says("is a character device")),
        Case("special files as input", "trace analyze a symlink to /dev/urandom", [*an, "{d}/t.json"], (6,),
             link("t.json", "/dev/urandom"), after=says("is a character device")),
        Case("special files as input", "sanitize import a FIFO", ["sanitize", "import", "{d}/m.xml"], (6,), fifo("m.xml"),
             after=says("is a FIFO")),
        Case("special files as input", "campaign status of a FIFO", ["campaign", "status", "{d}/s.sqlite"], (6,), fifo("s.sqlite"),
             after=says("is a FIFO")),
        Case("special files as input", "campaign status of a directory", ["campaign", "status", "{d}/s.sqlite"], (6,),
             folder("s.sqlite"), after=says("is a directory")),
        Case("special files as input", "campaign run of a FIFO profile", ["campaign", "run", "{d}/c.yaml"], (2,), fifo("c.yaml"),
             after=says("is a FIFO")),
        Case("special files as input", "run a profile symlinked to /dev/zero", ["run", "{d}/w.yaml"], (2,), link("w.yaml", "/dev/zero"),
             after=says("is a character device")),
        Case("run directories", "a FIFO in procs/", [*an, "{d}/run"], (6,), job_with(lambda r: os.mkfifo(r / "procs" / "x.json")),
             after=says("is a FIFO")),
        Case("run directories", "a marker symlinked to /dev/zero", [*an, "{d}/run"], (6,),
             job_with(lambda r: _replace(_marker(r), target="/dev/zero")), after=says("is a character device")),
        Case("run directories", "a marker nested 100,000 deep", [*an, "{d}/run"], (6,), job_with(lambda r: _replace(_marker(r), deep))),
        Case("run directories", "a 5 MB marker", [*an, "{d}/run"], (6,),
             job_with(lambda r: _replace(_marker(r), '{"x": "' + "a" * (5 << 20) + '"}'))),
        Case("run directories", "command.json nested 100,000 deep", [*an, "{d}/run"], (6,),
             job_with(lambda r: _replace(r / "command.json", deep))),
        Case("run directories", "command.json is a FIFO", [*an, "{d}/run"], (6,),
             job_with(lambda r: _replace(r / "command.json", make_fifo=True))),
        Case("run directories", "verdict.json nested 100,000 deep", [*an, "{d}/run"], (6,),
             job_with(lambda r: (r / "verdict.json").write_text(deep))),
        Case("run directories", "profile.json nested 100,000 deep", ["report", "{d}", "-o", "{d}/r.html"], (6,), write("profile.json", deep)),
        Case("run directories", "campaign store profile nested 100,000 deep", ["campaign", "report", "{d}/s.sqlite"], (6,),
             store_profile(deep)),
        Case("run directories", "campaign store profile that is not JSON", ["campaign", "report", "{d}/s.sqlite"], (6,),
             store_profile("not json {")),
        Case("unbounded inputs", "a sanitizer log with one 200 MB line", ["sanitize", "import", "{d}/memcheck.log"], (0, 1),
             long_line_log),
        Case("unbounded inputs", "1 MB of gzip expanding to 100M empty events", [*an, "{d}/t.json.gz"], (6,),
             gzip_bomb),
    ]


def name_cases() -> list[Case]:
    return [
        Case("names on terminals and pictures", "control, bidi and mathtext names: trace analyze", ["trace", "analyze", "{d}/t.json"], (0,),
             kineto_named(EVIL_NAMES), after=no_raw),
        Case("names on terminals and pictures", "the same: stream-timeline SVG", ["plot", "stream-timeline", "{d}/t.json", "-o",
             "{d}/t.svg"], (0,), kineto_named(EVIL_NAMES), after=svg_parses("t.svg")),
        Case("names on terminals and pictures", "the same: report", ["report", "{d}/t.json", "-o", "{d}/r.html"], (0,),
             kineto_named(EVIL_NAMES)),
        Case("names on terminals and pictures", "ablation JSON with those labels (SVG)", ["plot", "ablation", "{d}/a.json", "-o",
             "{d}/a.svg"], (0,), write("a.json", json.dumps({"variants": {n: {"trials": 4, "failures": 1} for n in EVIL_NAMES}})),
             after=svg_parses("a.svg")),
        Case("names on terminals and pictures", "campaign with a hostile cell label: report", ["campaign", "report", "{d}/s.sqlite"],
             (0,), lambda d: _labelled_store(d / "s.sqlite", "x\x1b[2J\nUNORDERED"), after=no_raw),
        Case("names on terminals and pictures", "a file name holding ESC and a newline", ["trace", "analyze", "{d}/x\x1b[2J\ny.sqlite"],
             (6,), after=no_raw),
        Case("names on terminals and pictures", "sanitizer log with a control character in a kernel", ["sanitize", "import",
             "{d}/memcheck.log"], (1,), write("memcheck.log", (SAN / "memcheck-planted_oob.log").read_text().replace(
                 "at cast_transpose+", "at cast\x1b[2J_transpose+")), after=no_raw),
    ]


def _labelled_store(path: Path, label: str) -> None:
    _store(path)
    con = sqlite3.connect(path)
    con.execute("UPDATE cells SET label = ?", (label,))
    con.execute("UPDATE campaign SET value = ? WHERE key = 'name'", (label,))
    con.commit()
    con.close()


def message_cases() -> list[Case]:
    return [
        Case("misleading messages", "EXCLUSIVE lock held by another process", ["trace", "analyze", "{d}/t.sqlite"], (6,), exclusive_lock,
             after=says("locked by another process")),
        Case("misleading messages", "a hot journal beside the trace", ["trace", "analyze", "{d}/t.sqlite"], (6,), hot_journal,
             after=says("hot journal")),
        Case("misleading messages", "racecheck text naming race_kernel(float *)", ["sanitize", "import", "{d}/racecheck.log"], (1,),
             write("racecheck.log", (SAN / "racecheck-analysis-planted_race.log").read_text().replace(
                 "at cast_transpose+", "at race_kernel(float *)+")), after=says("race_kernel(float *)")),
        Case("misleading messages", "kernels config --sms 1000000000000", ["kernels", "config", "--shape", "4096x4096", "--sms",
             "1000000000000"], (2,)),
        Case("misleading messages", "sanitize --jobs 100000", ["sanitize", "--jobs", "100000", "--", "true"], (2,)),
        Case("misleading messages", "trace run --timeout 1e300", ["trace", "run", "--timeout", "1e300", "--", "true"], (2,)),
        Case("tracebacks", "ncu CSV with a 200,000-character kernel name", ["profile", "import", "{d}/r.csv", "-o", "{d}/run"], (0,),
             ncu_csv("Kernel Name", "void k<" + "A" * 200_000 + ">()")),
        Case("tracebacks", "ncu CSV with launch id inf", ["profile", "import", "{d}/r.csv", "-o", "{d}/run"], (6,), ncu_csv("ID", "inf")),
        Case("tracebacks", "ncu CSV with launch id 1e999", ["profile", "import", "{d}/r.csv", "-o", "{d}/run"], (6,),
             ncu_csv("ID", "1e999")),
        Case("tracebacks", "ncu CSV with grid (1e400, 1, 1)", ["profile", "import", "{d}/r.csv", "-o", "{d}/run"], (6,),
             ncu_csv("Grid Size", f"({'9' * 400}, 1, 1)")),
    ]


# -- round three (issue 25): new members of each class, tried on copies of real outputs ---------

NSYS_EXPORT = DATA / "nsys" / "planted_cross_stream.sqlite"
NOT_UTF8 = os.fsdecode(b"t\xff.sqlite")
FORMAT_CHARS = ["e\u202efdp.exe", "zero\u200bwidth", "tag\U000e0041", "soft\u00adhyphen", "iso\u2066late", "nul\x00", "esc\x1b[2J"]
INVISIBLE = "\u202e\u200b\U000e0041\u00ad\u2066\x00\x1b"


def no_invisible(name: str | None = None) -> Callable[[Path, str], str]:
    """No format, bidi, NUL or ESC character raw on the terminal (and in the named file)."""
    def check(d: Path, text: str) -> str:
        where = [("the terminal", text)] + ([(name, (d / name).read_text(errors="replace"))] if name else [])
        for label, body in where:
            bad = sorted({f"U+{ord(c):04X}" for c in body if c in INVISIBLE})
            if bad:
                return f"raw {', '.join(bad)} in {label}"
        return ""
    return check


def socket_at(path: Path) -> None:
    import socket

    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    HELD.append(sock)


def replaced_by(make: Callable[[Path], object]) -> Callable[[Path], object]:
    def change(path: Path) -> None:
        path.unlink()
        make(path)
    return change


def deep_nvtx(n: int) -> Setup:
    """The real nsys export with n NVTX ranges nested around its first one."""
    def make(d: Path) -> None:
        from tests.trace_synthetic import copy_with
        copy_with(NSYS_EXPORT, d / "t.sqlite")
        with contextlib.closing(sqlite3.connect(d / "t.sqlite")) as con:
            tid, s0, e0 = con.execute("SELECT globalTid, start, end FROM NVTX_EVENTS WHERE eventType = 59 LIMIT 1").fetchone()
            con.executemany("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES (?, ?, 59, ?, ?)",
                            [(s0 - n + i, e0 + n - i, f"level{i}", tid) for i in range(n)])
            con.commit()
    return make


def ncu_changed(change: Callable[[list[list[str]]], list[list[str]]]) -> Setup:
    def make(d: Path) -> None:
        import csv

        rows = change(list(csv.reader(io.StringIO(NCU.read_text(encoding="utf-8-sig")))))
        out = io.StringIO()
        csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
        (d / "r.csv").write_text(out.getvalue())
    return make


def store_sql(*statements: str) -> Setup:
    def make(d: Path) -> None:
        _store(d / "s.sqlite")
        with contextlib.closing(sqlite3.connect(d / "s.sqlite")) as con:
            for st in statements:
                con.execute(st)
            con.commit()
    return make


def _sql_on(path: Path, *statements: str) -> None:
    with contextlib.closing(sqlite3.connect(path)) as con:
        for st in statements:
            con.execute(st)
        con.commit()


def round_three_cases() -> list[Case]:
    an, kern = ["trace", "analyze"], "CUPTI_ACTIVITY_KIND_KERNEL"
    xml = str(SAN / "memcheck-planted_oob.xml")
    log = (SAN / "memcheck-planted_oob.log").read_text()
    ctx = f"UPDATE {kern} SET contextId = 2 WHERE rowid % 2 = 0"
    imp = ["profile", "import", "{d}/r.csv", "-o", "{d}/run"]
    return [
        Case("file names as URIs", "a trace whose name is not UTF-8 (b't\\xff.sqlite')", [*an, f"{{d}}/{NOT_UTF8}"], (0,),
             copy(CTD, NOT_UTF8), after=only(NOT_UTF8)),
        Case("file names as URIs", "the same name given to report -o", ["report", str(CTD), "-o", "{d}/" + os.fsdecode(b"r\xff.html")],
             (0,)),
        Case("file names as URIs", "a missing trace named with bidi, C1, zero-width and tag characters",
             [*an, "{d}/a\u202e\x85\x9b2J\u200b\U000e0041.sqlite"], (6,), after=no_invisible()),
        Case("file names as URIs", "a trace named T.SQLITE (upper-case suffix)", [*an, "{d}/T.SQLITE"], (0,), copy(CTD, "T.SQLITE")),
        Case("damaged traces", "two contexts of one process share stream 7 (tracer capture), --fail-on-unordered",
             [*an, "{d}/t.sqlite", "--fail-on-unordered"], (6,), sql("t.sqlite", ctx), after=says("stream ids are per context")),
        Case("damaged traces", "the same in a real nsys export", [*an, "{d}/t.sqlite", "--fail-on-unordered"], (6,),
             copy_sql(NSYS_EXPORT, "t.sqlite", ctx), after=says("stream ids are per context")),
        Case("damaged traces", "two-process export with globalPid NULL on half the kernels", [*an, "{d}/t.sqlite"], (6,),
             copy_sql(DATA / "nsys" / "nsys_two_procs.sqlite", "t.sqlite", f"UPDATE {kern} SET globalPid = NULL WHERE rowid % 2 = 0")),
        Case("damaged traces", "kernel table replaced by an empty view, --fail-on-unordered", [*an, "{d}/t.sqlite", "--fail-on-unordered"],
             (6,), copy_sql(NSYS_EXPORT, "t.sqlite", f"ALTER TABLE {kern} RENAME TO k0", f"CREATE VIEW {kern} AS SELECT * FROM k0 WHERE 0")),
        Case("damaged traces", "a kernel with start and end swapped", [*an, "{d}/t.sqlite"], (6,),
             copy_sql(NSYS_EXPORT, "t.sqlite", f"UPDATE {kern} SET start = end, end = start WHERE rowid = 3")),
        Case("damaged traces", "Kineto kernel with a negative dur", [*an, "{d}/t.json"], (6,), kineto(lambda doc: _set(doc, 2, "dur", -5))),
        Case("damaged traces", "Kineto stream as the string '7'", [*an, "{d}/t.json"], (6,),
             kineto(lambda doc: doc["traceEvents"][2]["args"].__setitem__("stream", "7"))),
        Case("damaged traces", "Kineto correlation 10**40 (beyond int64)", [*an, "{d}/t.json"], (6,),
             write("t.json", json.dumps(KINETO).replace('"correlation": 1}', '"correlation": 1' + "0" * 40 + "}"))),
        Case("damaged traces", "Kineto events in reverse order", [*an, "{d}/t.json"], (0,), kineto(lambda doc: doc["traceEvents"].reverse())),
        Case("campaign stores", "a store whose cells were deleted", ["campaign", "report", "{d}/s.sqlite"], (6,),
             store_sql("DELETE FROM cells"), after=says("no cells")),
        Case("campaign stores", "a store whose campaign table was emptied", ["campaign", "status", "{d}/s.sqlite"], (6,),
             store_sql("DELETE FROM campaign"), after=says("no campaign name")),
        Case("campaign stores", "a store whose trials table is a view", ["campaign", "report", "{d}/s.sqlite"], (6,),
             store_sql("ALTER TABLE trials RENAME TO t0", "CREATE VIEW trials AS SELECT * FROM t0")),
        Case("tracebacks", "ncu CSV naming one column twice", imp, (6,), ncu_changed(lambda r: [row + [row[0]] for row in r]),
             after=says("appears 2 times")),
        Case("tracebacks", "ncu CSV giving one launch ID twice", imp, (6,),
             ncu_changed(lambda r: [*r[:3], [r[2][0], *r[3][1:]], *r[4:]]), after=says("given twice")),
        Case("tracebacks", "ncu CSV of header rows only", imp, (6,), ncu_changed(lambda r: r[:2])),
        Case("duplicate keys", "suppression rule without `kernel:`", ["sanitize", "import", xml, "--suppressions", "{d}/s.yaml"], (2,),
             write("s.yaml", "schema: 1\nsuppressions:\n  - id: x\n    tool: memcheck\n    kind: '*'\n    reason: r\n")),
        Case("duplicate keys", "suppression rule with `tool: '*'`", ["sanitize", "import", xml, "--suppressions", "{d}/s.yaml"], (2,),
             write("s.yaml", "schema: 1\nsuppressions:\n  - id: x\n    tool: '*'\n    kind: '*'\n    kernel: '*'\n    reason: r\n")),
        Case("campaign profiles", "trials_per_cell: true (a YAML bool)", ["campaign", "run", "{d}/c.yaml", "-o", "{d}/s.sqlite",
             "--no-progress"], (2,), write("c.yaml", CAMPAIGN.replace("trials_per_cell: 4", "trials_per_cell: true"))),
        Case("campaign profiles", "variants: [no, none] (`no` is a YAML bool)", ["campaign", "run", "{d}/c.yaml", "--no-progress"], (2,),
             write("c.yaml", CAMPAIGN.replace("[none, device_before_atomic]", "[no, none]"))),
        Case("campaign profiles", "name: !!binary", ["campaign", "run", "{d}/c.yaml", "--no-progress"], (2,),
             write("c.yaml", CAMPAIGN.replace("name: t", "name: !!binary aGk="))),
        Case("campaign profiles", "a merge key (<<) of an alias bomb", ["campaign", "run", "{d}/c.yaml", "--no-progress"], (2,),
             write("c.yaml", CAMPAIGN + BOMB.replace("a:", "x1:", 1) + "extra: {<<: *i}\n")),
        Case("campaign profiles", "two YAML documents", ["campaign", "run", "{d}/c.yaml", "--no-progress"], (2,),
             write("c.yaml", CAMPAIGN + "---\n" + CAMPAIGN)),
        Case("outputs over inputs", "diff a.sqlite B --html a.sqlite", ["diff", "{d}/a.sqlite", str(CTD), "--html", "{d}/a.sqlite"], (2,),
             copy(CTD, "a.sqlite"), after=unchanged("a.sqlite", CTD)),
        Case("outputs over inputs", "diff A b.sqlite --plot (a symlink to b.sqlite)", ["diff", str(CTD), "{d}/b.sqlite", "--plot",
             "{d}/p.svg"], (2,), both(copy(CTD, "b.sqlite"), link("p.svg", "b.sqlite")), after=unchanged("b.sqlite", CTD)),
        Case("outputs over inputs", "report -o new/ (a name ending in '/')", ["report", str(CTD), "-o", "{d}/new/"], (2,), after=only()),
        Case("outputs over inputs", "trace export -o the input through a symlinked folder", ["trace", "export", "{d}/t.sqlite",
             "--perfetto", "-o", "{d}/ln/t.sqlite"], (2,), both(copy(CTD, "t.sqlite"), link("ln", ".")), after=unchanged("t.sqlite", CTD)),
        Case("outputs over inputs", "plot ablation a.svg -o a.svg (a JSON named .svg)", ["plot", "ablation", "{d}/a.svg", "-o",
             "{d}/a.svg"], (2,), copy(DEMO / "campaign.json", "a.svg"), after=unchanged("a.svg", DEMO / "campaign.json")),
        Case("outputs over inputs", "campaign run c.yaml -o c.yaml", ["campaign", "run", "{d}/c.yaml", "-o", "{d}/c.yaml", "--no-progress"],
             (2,), write("c.yaml", CAMPAIGN), after=lambda d, _: "" if (d / "c.yaml").read_text() == CAMPAIGN else "c.yaml was overwritten"),
        Case("outputs over inputs", "sanitize import m.xml --junit m.log (the log read beside it)", ["sanitize", "import", "{d}/m.xml",
             "--junit", "{d}/m.log"], (2,), both(copy(SAN / "memcheck-planted_oob.xml", "m.xml"),
                                                  copy(SAN / "memcheck-planted_oob.log", "m.log")),
             after=unchanged("m.log", SAN / "memcheck-planted_oob.log")),
        Case("outputs over inputs", "report -o a socket", ["report", str(CTD), "-o", "{d}/s.html"], (2,),
             lambda d: socket_at(d / "s.html"), after=says("is a socket")),
        Case("outputs over inputs", "report -o /proc/self/fd/1 (2 when stdout is a pipe; 9 when a file: /proc takes no new name)",
             ["report", str(CTD), "-o", "/proc/self/fd/1"], (2, 9)),
        Case("run directories", "procs/X.sqlite is a socket", [*an, "{d}/run"], (6,),
             job_with(lambda r: replaced_by(socket_at)(r / "procs" / "vm-2580-r0.sqlite")), after=says("is a socket")),
        Case("run directories", "procs/X.sqlite is a symlink loop", [*an, "{d}/run"], (6,),
             job_with(lambda r: _replace(r / "procs" / "vm-2580-r0.sqlite", target="vm-2580-r0.sqlite")),
             after=says("Too many levels of symbolic links")),
        Case("run directories", "procs/ is a symlink to its own run directory", [*an, "{d}/run"], (6,),
             job_with(lambda r: (__import__("shutil").rmtree(r / "procs"), (r / "procs").symlink_to(".")))),
        Case("run directories", "a sanitize report.json as the run's verdict.json", [*an, "{d}/run"], (0,),
             job_with(lambda r: (r / "verdict.json").write_bytes((DEMO / "sanitize" / "report.json").read_bytes()))),
        Case("run directories", "a marker whose pid is 1e400", [*an, "{d}/run"], (6,),
             job_with(lambda r: _marker(r).write_text(_marker(r).read_text().replace('"pid": 2556', '"pid": 1e400')))),
        Case("run directories", "a run folder whose Kineto trace is a FIFO", [*an, "{d}/run"], (6,),
             lambda d: ((d / "run").mkdir(), os.mkfifo(d / "run" / "x.pt.trace.json"))[0], after=says("is a FIFO")),
        Case("run directories", "a run folder whose trace.sqlite is a folder", [*an, "{d}/run"], (6,),
             lambda d: (d / "run" / "trace.sqlite").mkdir(parents=True), after=says("is a directory")),
        Case("scale", "NVTX ranges nested 50,000 deep: plot stream-timeline", ["plot", "stream-timeline", "{d}/t.sqlite", "-o",
             "{d}/t.png"], (0,), deep_nvtx(50_000)),
        Case("scale", "the same: report", ["report", "{d}/t.sqlite", "-o", "{d}/r.html"], (0,), deep_nvtx(50_000)),
        Case("scale", "a 50 MB kernel name", [*an, "{d}/t.sqlite"], (0,), copy_sql(NSYS_EXPORT, "t.sqlite",
             f"UPDATE StringIds SET value = printf('%.*c', 50000000, 'x') WHERE id = (SELECT demangledName FROM {kern} LIMIT 1)")),
        Case("names on terminals and pictures", "format characters (zero-width, tag, isolate, soft hyphen): report HTML",
             ["report", "{d}/t.json", "-o", "{d}/r.html"], (0,), kineto_named(FORMAT_CHARS), after=no_invisible("r.html")),
        Case("names on terminals and pictures", "the same: diff --html", ["diff", "{d}/t.json", "{d}/t.json", "--html", "{d}/r.html"],
             (0,), kineto_named(FORMAT_CHARS), after=no_invisible("r.html")),
        Case("names on terminals and pictures", "the same: trace analyze", [*an, "{d}/t.json"], (0,), kineto_named(FORMAT_CHARS),
             after=no_invisible()),
        Case("names on terminals and pictures", "the same: stream-timeline SVG", ["plot", "stream-timeline", "{d}/t.json", "-o",
             "{d}/t.svg"], (0,), kineto_named(FORMAT_CHARS), after=svg_parses("t.svg")),
        Case("names on terminals and pictures", "sanitizer log kernel with bidi and ESC: --junit", ["sanitize", "import",
             "{d}/memcheck.log", "--junit", "{d}/j.xml"], (1,), write("memcheck.log", log.replace("at cast_transpose+",
                                                                                              "at c\u202e\x1bz\u200b+")),
             after=svg_parses("j.xml")),
        Case("tracebacks", "kernels config --shape '\u00b2x4' (a digit to str.isdigit, not to int())", ["kernels", "config", "--shape",
             "\u00b2x4"], (2,)),
        Case("tracebacks", "run linear_backward --shape '\u00b2x4'", ["run", "linear_backward", "--shape", "\u00b2x4"], (2,)),
        Case("tracebacks", "sanitizer XML whose <line> is '\u00b2', --sarif", ["sanitize", "import", "{d}/m.xml", "--sarif", "{d}/s.sarif"],
             (1,), both(write("m.xml", __import__("re").sub(r"<line>\d+</line>", "<line>\u00b2</line>",
                                                            (SAN / "memcheck-planted_oob.xml").read_text())),
                        copy(SAN / "memcheck-planted_oob.log", "m.log"))),
        Case("misleading messages", "kernels config --shape 99999999999x99999999999", ["kernels", "config", "--shape",
             "99999999999x99999999999"], (2,)),
        Case("misleading messages", "diff --fail-on-regression nan (a gate that never trips)", ["diff", str(CTD), str(CTD),
             "--fail-on-regression", "nan"], (2,)),
        Case("campaign stores", "a run store whose trials point at no cell", ["campaign", "report", "{d}/s.sqlite"], (6,),
             both(stored_store("0"), lambda d: _sql_on(d / "s.sqlite", "UPDATE trials SET cell_id = 999")),
             after=says("of no cell it names")),
        Case("damaged traces", "Kineto kernels without args.stream (all on 'stream -1'), --fail-on-unordered",
             [*an, "{d}/t.json", "--fail-on-unordered"], (6,), kineto(lambda doc: doc["traceEvents"][2]["args"].pop("stream"))),
        Case("damaged traces", "Kineto kernel without args.device", [*an, "{d}/t.json"], (6,),
             kineto(lambda doc: doc["traceEvents"][2]["args"].pop("device"))),
        Case("special files as input", "sanitize import m.xml whose m.log beside it is a FIFO", ["sanitize", "import", "{d}/m.xml"], (6,),
             both(copy(SAN / "memcheck-clean.xml", "m.xml"), fifo("m.log")), after=says("is a FIFO")),
        Case("misleading messages", "memcheck text naming at::native::k<at::Half>(float *, int)", ["sanitize", "import",
             "{d}/memcheck.log", "--json"], (1,), write("memcheck.log", log.replace("at cast_transpose+",
                                                                                    "at at::native::k<at::Half>(float *, int)+")),
             after=says("at::native::k<at::Half>(float *, int)")),
    ]


CORPUS = (sanitizer_cases, tool_fault_cases, trace_cases, damaged_cases, picture_cases, profile_cases, campaign_cases,
          full_disk_cases, path_cases, output_cases, reader_cases, name_cases, message_cases, round_three_cases)


# -- running ------------------------------------------------------------------------------------

def run_case(case: Case, folder: Path) -> Outcome:
    """Fork; the child builds the input, runs main() and sends back what happened."""
    try:
        env = (case.setup(folder) if case.setup else None) or {}
    except Exception as exc:  # a corpus bug is reported in the table, not fatal
        return Outcome(None, failure=f"setup failed ({type(exc).__name__}: {exc})")
    argv = [a.replace("{d}", str(folder)) for a in case.argv]
    read, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read)
        _child(argv, env, folder, case.full_disk, write_end)
    os.close(write_end)
    o = _collect(pid, read)
    if case.after is not None and not o.failure:
        o.failure = case.after(folder, o.stdout + o.stderr)
    for where, name in ((str(folder), "DIR"), (str(ROOT), ".")):  # short, stable messages in the table
        o.stdout, o.stderr = o.stdout.replace(where, name), o.stderr.replace(where, name)
    return o


def _child(argv: list[str], env: dict[str, str], folder: Path, full_disk: bool, fd: int) -> None:
    try:
        os.environ.update(env)
        if "FAKE_SANITIZER" in env:  # the fake tools stand for a machine with a GPU
            from tracer import gpu

            gpu.probe = fake_tools.fake_probe
        os.chdir(folder)
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
        if full_disk:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (FULL_DISK_BYTES, FULL_DISK_BYTES))
        out = _call_main(argv)
        os.write(fd, json.dumps(out).encode())
    finally:
        os._exit(0)


def _call_main(argv: list[str]) -> dict[str, object]:
    from tracer.cli import main

    out, err, failure = io.StringIO(), io.StringIO(), ""
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code: int | None = main(argv)
        except SystemExit as exc:  # argparse
            code = exc.code if isinstance(exc.code, int) else 2
        except BaseException as exc:  # what escapes main is what the table is for
            code, failure = None, f"traceback ({type(exc).__name__}: {str(exc)[:80]})"
    return {"code": code, "stdout": out.getvalue()[-20000:], "stderr": err.getvalue()[-4000:], "failure": failure}


def _collect(pid: int, fd: int) -> Outcome:
    chunks, deadline = [], time.monotonic() + CASE_TIMEOUT_S
    os.set_blocking(fd, False)
    while True:
        with contextlib.suppress(BlockingIOError):
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            continue
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(fd)
            return Outcome(None, failure=f"hang (killed after {CASE_TIMEOUT_S} s)")
        time.sleep(0.02)
    os.close(fd)
    _, status = os.waitpid(pid, 0)
    if not chunks:
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        return Outcome(None, failure=f"crash (signal {sig})" if sig else "crash (no result)")
    data = json.loads(b"".join(chunks))
    return Outcome(data["code"], data["stdout"], data["stderr"], data["failure"])


# -- the table ----------------------------------------------------------------------------------

def gets(case: Case, o: Outcome) -> str:
    """What the user sees: the error line, the sanitizer verdict, or how it ended."""
    if o.failure:
        return o.failure
    errors = [ln for ln in o.stderr.splitlines() if ln.startswith("tracer: error:") or ": error:" in ln]
    if case.verdict and o.stdout.strip().startswith("{"):
        run = json.loads(o.stdout)["runs"][0]
        return f"verdict `{run['verdict']}`" + (" (incomplete)" if run["incomplete"] else "")
    if errors:
        return errors[-1].replace("tracer: error: ", "")
    return "ok" if o.code == 0 else (o.stdout.strip().splitlines() or ["(nothing printed)"])[-1]


def handled(case: Case, o: Outcome) -> bool:
    if o.failure or o.code not in case.expect or "Traceback" in o.stderr:
        return False
    errors = [ln for ln in o.stderr.splitlines() if ln.startswith("tracer: error:")]
    return o.code in (0, 1) or len(errors) == 1 or (o.code == 2 and "error:" in o.stderr)


def cell(text: str, width: int = 140) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= width else text[: width - 3] + "..."


def table(rows: list[tuple[Case, Outcome]]) -> str:
    lines = ["| class | input | expected exit | exit | what it gets | handled |", "|---|---|---|---|---|---|"]
    for case, o in rows:
        exp = " or ".join(map(str, case.expect))
        lines.append(f"| {case.klass} | {cell(case.what, 60)} | {exp} | {o.code if o.code is not None else '-'} | "
                     f"{cell(gets(case, o))} | {'yes' if handled(case, o) else '**no**'} |")
    return "\n".join(lines)


DOC_HEAD = """# Bad inputs and what each gets

Regenerated by `python scripts/hostile_inputs.py --write docs/bad-inputs.md` (CPU only, about
{minutes}); do not edit the table by hand. Each case builds its input and runs
`tracer.cli.main` in a forked child: a fake `compute-sanitizer` on PATH for tool faults (it
writes the XML, text and exit code it is told to, hangs or kills itself), a file-size limit
(RLIMIT_FSIZE, so writes fail with EFBIG as a full disk fails with ENOSPC) for the full-disk rows.
A case is **handled** when its exit code is the expected one (0 clean or ordered, 1 findings or a
non-clean verdict, 2 usage or profile error, 6 bad input file, 8 timeout, 9 output not written),
nothing escaped as a traceback, and an error is one line (argparse's own errors print their usage
line first). Cases of rounds two and three also check what is left afterwards (the input unchanged, no file
created, no raw control or bidi character on stdout or stderr, the SVG parses as XML, the message
says what it must): a failed check is shown as what the case gets. A row marked **no** is a bug to
fix, not documented behaviour.

Sanitizer verdicts beyond `clean`: `incomplete` (no error read, but the outputs cannot prove the
run was checked to the end: empty, truncated or malformed XML, a text output without its ERROR
SUMMARY, exit 86 with no record) and `no-errors-recorded` (an XML without its text output: the
target's exit and the tool's totals are unknown). Both exit 1, like every verdict but `clean`.

{handled} of {total} handled.

"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", type=Path, help="write the markdown document here")
    ap.add_argument("--only", help="only cases whose class or input contains this word")
    args = ap.parse_args(argv)
    cases = [c for make in CORPUS for c in make()
             if not args.only or args.only.lower() in f"{c.klass} {c.what}".lower()]
    start, rows = time.monotonic(), []
    with tempfile.TemporaryDirectory(prefix="tracer-hostile-") as tmp:
        for i, case in enumerate(cases):
            folder = Path(tmp) / f"case{i:03d}"
            folder.mkdir()
            rows.append((case, run_case(case, folder)))
            print(f"[{i + 1}/{len(cases)}] {case.klass}: {case.what}: {gets(case, rows[-1][1])[:100]}", file=sys.stderr)
    text = table(rows)
    ok = sum(handled(c, o) for c, o in rows)
    print(text)
    print(f"\n{ok} of {len(rows)} handled", file=sys.stderr)
    if args.write:
        n = max(1, round((time.monotonic() - start) / 60))
        head = DOC_HEAD.format(minutes=f"{n} minute" + ("" if n == 1 else "s"), handled=ok, total=len(rows))
        args.write.write_text(head + text + "\n")
    return 0 if ok == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
