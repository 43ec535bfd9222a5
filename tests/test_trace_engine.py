"""The bulk ordering engine against the pair-by-pair one (order()), on real fixtures and random
synthetic traces; attribution rules; lost CUPTI records; corrupt SQLite files made from real captures."""
from __future__ import annotations

import random
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import DATA, shared_fixture
from tests.trace_synthetic import TraceBuilder, copy_with
from tracer.errors import TraceFormatError, UsageError
from tracer.analysis.analyze import MAX_LISTED_PAIRS, analyze, glob_regex
from tracer.analysis.attribution import attribute, latest_open
from tracer.readers.load import load_trace
from tracer.analysis.graphs import on_launch_streams
from tracer.model.trace import Trace, with_operations
from tracer.analysis.ordering import OrderingIndex, Verdict

DEMO = Path(__file__).resolve().parent.parent / "tracer" / "data" / "demo"
CAPTURES = [DATA / "traces" / f"{n}.sqlite" for n in ("cast_transpose_dgrad", "event_ordered_dgrad", "planted_cross_stream")]
CAPTURES.append(DEMO / "linear_backward_planted.sqlite")
SHARED_TRACES = ["nsys/h100_2gpu_1s.sqlite", "nsys/smoke_2025.5.2.sqlite", "nsys/torch_small.sqlite",
                 "kineto/event_sync.json.gz", "kineto/event_sync_multi_stream.json.gz"]
A, B, C = 7, 13, 14


def reference_all_pairs(trace: Trace) -> tuple[dict[str, int], list[tuple[int, int, Verdict]]]:
    """The old loop: every kernel against the last kernel submitted before it on each other stream of
    its device, judged by order(); the listing as verdict.json makes it (UNORDERED first)."""
    attr = attribute(trace)
    index = OrderingIndex(trace, attr.launch_tid, attr.launch_start)
    k = trace.kernels
    keys = sorted({(int(d), int(s)) for d, s in zip(k.device, k.stream)})
    per = {key: np.nonzero((k.device == key[0]) & (k.stream == key[1]))[0] for key in keys}
    per = {key: idx[np.argsort(k.corr[idx], kind="stable")] for key, idx in per.items()}
    found = []
    for cy, c_idx in per.items():
        for px, p_idx in per.items():
            if px == cy or px[0] != cy[0]:
                continue
            pos = np.searchsorted(k.corr[p_idx], k.corr[c_idx]) - 1
            for c, j in zip(c_idx[pos >= 0], pos[pos >= 0]):
                found.append((int(p_idx[j]), int(c), index.order(int(p_idx[j]), int(c)).verdict))
    counts = {v.value: 0 for v in Verdict} | dict(Counter(v.value for _, _, v in found))
    listed = [f for f in found if f[2] is Verdict.UNORDERED][:MAX_LISTED_PAIRS]
    listed += [f for f in found if f[2] is not Verdict.UNORDERED][:MAX_LISTED_PAIRS - len(listed)]
    return counts, listed


def assert_bulk_matches(trace: Trace) -> dict[str, int]:
    trace = on_launch_streams(with_operations(trace))[0]  # what analyze judges: every GPU operation
    counts, listed = reference_all_pairs(trace)
    a = analyze(trace, None, all_kernel_pairs=True)
    assert a.pair_counts == counts
    k = trace.kernels
    json_pairs = a.to_json()["pairs"]
    assert [(p["producer_kernel"], p["consumer_kernel"], p["producer_stream"], p["consumer_stream"], p["verdict"])
            for p in json_pairs] == [(trace.kernel_name(p), trace.kernel_name(c), int(k.stream[p]), int(k.stream[c]), v.value)
                                     for p, c, v in listed]
    return counts


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.stem)
def test_bulk_all_pairs_matches_order_on_captures(path: Path) -> None:
    counts = assert_bulk_matches(load_trace(path))
    assert sum(counts.values()) > 0 or path.stem == "cast_transpose_dgrad"  # one stream: nothing to pair


@pytest.mark.parametrize("name", SHARED_TRACES)
def test_bulk_all_pairs_matches_order_on_shared_fixtures(name: str) -> None:
    assert_bulk_matches(load_trace(shared_fixture(*name.split("/"))))


def random_ordering_trace(seed: int) -> TraceBuilder:
    """Three streams, two launching threads, random records, waits (some on records of other
    streams, some repeated), stream/device/event syncs and successful host queries."""
    rnd = random.Random(seed)
    b = TraceBuilder()
    keys: list[int] = []
    for _ in range(rnd.randrange(150, 300)):
        tid = rnd.choice((4242, 4243))
        r = rnd.random()
        if r < 0.05:  # a producer, its record, a wait and a consumer right after
            x, y = rnd.sample((A, B, C), 2)
            b.launch(x, "producer", tid=tid)
            keys.append(b.record(x, tid=tid))
            b.wait(y, keys[-1], tid=rnd.choice((4242, 4243)))
            b.launch(y, "consumer", tid=tid)
        elif r < 0.1:
            keys.append(b.record(rnd.choice((A, B, C)), tid=tid))
        elif r < 0.2 and keys:
            b.wait(rnd.choice((A, B, C)), rnd.choice(keys), tid=tid)
        elif r < 0.23:
            b.stream_sync(rnd.choice((A, B, C)), tid=tid)
        elif r < 0.24:
            b.device_sync(tid=tid)
        elif r < 0.26 and keys:
            b.event_sync(rnd.choice(keys), tid=tid)
        elif r < 0.28 and keys:
            b.query_event(rnd.choice(keys), tid=tid)
        elif r < 0.29:
            b.query_stream(rnd.choice((A, B, C)), tid=tid)
        else:
            b.launch(rnd.choice((A, B, C)), f"k{rnd.randrange(4)}", rnd.randrange(1_000, 30_000), tid=tid)
    return b


@pytest.mark.parametrize("seed", range(10))
def test_bulk_all_pairs_matches_order_on_random_traces(tmp_path: Path, seed: int) -> None:
    trace = load_trace(random_ordering_trace(seed).write(tmp_path / "t.sqlite"))
    counts = assert_bulk_matches(trace)
    assert counts["event-ordered"] and counts["host-synchronized"] and counts["unordered"]


def reference_glob(trace: Trace, producer: str, consumer: str) -> list[tuple[str, str, str, int, int]]:
    """The old glob path: instances by range, the worst frontier pair of each consumer instance."""
    attr = attribute(trace)
    index = OrderingIndex(trace, attr.launch_tid, attr.launch_start)
    k, r = trace.kernels, trace.ranges

    def instances(glob: str) -> dict[tuple[str, ...], list[tuple[int, int, list[int]]]]:
        rx, by_range = glob_regex(glob), {}
        for kern, rng in enumerate(attr.range_of_kernel.tolist()):
            m = rx.match(trace.strings[int(r.text[rng])]) if rng >= 0 else None
            if m:
                by_range.setdefault(rng, (m.groups(), []))[1].append(kern)
        out: dict[tuple[str, ...], list[tuple[int, int, list[int]]]] = {}
        for rng, (key, kernels) in by_range.items():
            out.setdefault(key, []).append((int(r.start[rng]), rng, kernels))
        return {key: sorted(v, key=lambda x: (x[0], x[1])) for key, v in out.items()}

    def frontier(kernels: list[int], last: bool) -> list[int]:
        best: dict[tuple[int, int], int] = {}
        for i in kernels:
            key = (int(k.device[i]), int(k.stream[i]))
            if key not in best or (k.corr[i] > k.corr[best[key]]) == last:
                best[key] = i
        return list(best.values())

    prods, out = instances(producer), []
    for key, consumers in instances(consumer).items():
        for c_start, c_rng, c_kernels in consumers:
            before = [p for p in prods.get(key, []) if p[0] <= c_start and p[1] != c_rng]  # never a range with itself
            if not before:
                continue
            worst = None
            for p in frontier(before[-1][2], True):
                for c in frontier(c_kernels, False):
                    v = index.order(p, c).verdict
                    if worst is None or v.severity > worst[0].severity:
                        worst = (v, p, c)
            assert worst is not None
            out.append((trace.strings[int(r.text[before[-1][1]])], trace.strings[int(r.text[c_rng])], worst[0].value,
                        int(k.stream[worst[1]]), int(k.stream[worst[2]])))
    return out


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.stem)
@pytest.mark.parametrize("globs", [("*/cast_transpose", "*/dgrad"), ("*/cast_transpose", "*/wgrad"), ("*", "*")])
def test_vectorised_glob_path_matches_the_old_loops(path: Path, globs: tuple[str, str]) -> None:
    trace = load_trace(path)
    expected = reference_glob(trace, *globs)
    if not expected:  # only linear_backward has wgrad ranges; a glob forming no pair is a usage error
        assert globs[1] == "*/wgrad"
        with pytest.raises(UsageError, match="wgrad"):
            analyze(trace, [globs])
        return
    a = analyze(trace, [globs])
    got = [(p.producer, p.consumer, p.verdict.value, p.producer_stream, p.consumer_stream) for p in a.pairs]
    assert got == expected


class TestAttribution:
    @pytest.mark.parametrize("seed", range(8))
    def test_latest_open_matches_brute_force(self, seed: int) -> None:
        rnd = np.random.default_rng(seed)
        start = np.sort(rnd.integers(0, 200, 60))
        end = np.where(rnd.random(60) < 0.1, np.iinfo(np.int64).max, start + rnd.integers(0, 80, 60))
        t = rnd.integers(-5, 300, 400)
        got = latest_open(start, end, t)
        for q, g in zip(t.tolist(), got.tolist()):
            open_ = [i for i in range(60) if start[i] <= q <= end[i]]
            assert g == (max(open_) if open_ else -1)

    def _training_step(self) -> TraceBuilder:
        """A main thread with ranges around forward and backward; autograd's thread launches the
        backward kernels with no range of its own."""
        main, autograd = 100, 200
        b = TraceBuilder()
        b.push("step0", tid=main)
        b.push("step0/forward", tid=main)
        for seq in (1, 2):
            b.push(f"step0/forward/layer{seq}", tid=main)
            b.launch(A, f"fwd{seq}", op=b.op("aten::mm", tid=main, seq=seq), tid=main)
            b.pop(tid=main)
        b.pop(tid=main)
        b.push("step0/backward", tid=main)
        for seq in (2, 1):
            b.launch(A, f"bwd{seq}", op=b.op("aten::mm_backward", tid=autograd, bwd_seq=seq), tid=autograd)
        b.launch(B, "accumulate_grad", tid=autograd)  # no op: the range open on the caller's thread
        b.pop(tid=main)
        b.pop(tid=main)
        b.launch(A, "outside", tid=autograd)  # nothing open anywhere
        return b

    def test_forward_op_and_backward_caller_rules(self, tmp_path: Path) -> None:
        trace = load_trace(self._training_step().write(tmp_path / "t.sqlite", memory=True))
        attr = attribute(trace)
        got = {trace.kernel_name(i): (attr.rule_of(i).value, trace.strings[int(trace.ranges.text[r])] if r >= 0 else None)
               for i, r in enumerate(attr.range_of_kernel.tolist())}
        assert got == {"fwd1": ("launch-thread", "step0/forward/layer1"), "fwd2": ("launch-thread", "step0/forward/layer2"),
                       "bwd1": ("forward-op", "step0/forward/layer1"), "bwd2": ("forward-op", "step0/forward/layer2"),
                       "accumulate_grad": ("backward-caller", "step0/backward"), "outside": ("none", None)}
        assert attr.rule_counts() == {"launch-thread": 2, "forward-op": 2, "backward-caller": 1, "none": 1}

    def test_json_counts_rules_and_listed_pairs_carry_them(self, tmp_path: Path) -> None:
        trace = load_trace(self._training_step().write(tmp_path / "t.sqlite", memory=True))
        out = analyze(trace, None, all_kernel_pairs=True).to_json()
        assert out["attribution_rules"]["forward-op"] == 2 and out["unattributed"] == 1
        rules = {(p["consumer_kernel"], p["consumer_rule"]) for p in out["pairs"]}
        assert ("accumulate_grad", "backward-caller") in rules


class TestRecordErrors:
    def _with_lost_records(self, tmp_path: Path, value: str = "3 records lost: ValueError: bad kernel record") -> Path:
        path = tmp_path / "lost.sqlite"
        shutil.copyfile(DATA / "traces" / "planted_cross_stream.sqlite", path)
        con = sqlite3.connect(path)
        con.execute("INSERT INTO META_DATA_EXPORT VALUES ('TRACER_RECORD_ERRORS_ActivityKernel9', ?)", (value,))
        con.commit()
        con.close()
        return path

    def test_reported_in_json_and_text(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        from tracer.cli import main

        path = self._with_lost_records(tmp_path)
        out = analyze(load_trace(path)).to_json()
        assert out["record_errors"] == {"ActivityKernel9": {"lost": 3, "first_error": "ValueError: bad kernel record"}}
        assert main(["trace", "analyze", str(path)]) == 0
        text = capsys.readouterr().out
        assert "warning: 3 ActivityKernel9 record(s) lost at capture (ValueError: bad kernel record)" in text

    def test_lost_records_fail_any_check(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        from tracer.cli import main

        path = self._with_lost_records(tmp_path, "unparsable")
        assert analyze(load_trace(path)).to_json()["record_errors"]["ActivityKernel9"]["lost"] == -1
        assert main(["trace", "analyze", str(path), "--pairs", "*:*", "--fail-on-unordered"]) == 1  # no UNORDERED pair
        assert "records were lost at capture" in capsys.readouterr().err


def corrupt(tmp_path: Path, sql: list[str], source: Path = CAPTURES[0]) -> Path:
    return copy_with(source, tmp_path / "bad.sqlite", *sql)


NULLABLE_KERNELS = [  # a kernel table whose start may be NULL, as a foreign or broken writer could make it
    "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME TO old_kernels",
    "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL AS SELECT * FROM old_kernels",
    "DROP TABLE old_kernels",
]


class TestCorruptSqlite:
    @pytest.mark.parametrize("sql, message", [
        (["UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET streamId = 'seven' WHERE rowid = 3"],
         r"CUPTI_ACTIVITY_KIND_KERNEL.streamId holds 1 text value"),
        (["UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET correlationId = 2.5 WHERE rowid = 1"],
         r"CUPTI_ACTIVITY_KIND_RUNTIME.correlationId holds 1 real value"),
        ([*NULLABLE_KERNELS, "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = NULL WHERE rowid = 5"],
         r"CUPTI_ACTIVITY_KIND_KERNEL.start holds 1 null value"),
        (["UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = 9223372036854775807 + 1 WHERE rowid = 2"],
         r"CUPTI_ACTIVITY_KIND_KERNEL.end holds 1 real value"),
        (["UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = 9223372036854775807 WHERE rowid = 2"],
         r"CUPTI_ACTIVITY_KIND_KERNEL: 1 row\(s\) with impossible start/end"),
        (["UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 1 WHERE rowid = 2"],
         r"CUPTI_ACTIVITY_KIND_KERNEL: 1 row\(s\) with impossible start/end"),
        (["UPDATE StringIds SET value = X'00ff10' WHERE id = 1"], r"StringIds.value holds 1 non-text value"),
        (["UPDATE NVTX_EVENTS SET text = X'00ff' WHERE rowid = 1"], r"NVTX_EVENTS.text holds 1 non-text value"),
        (["UPDATE META_DATA_EXPORT SET value = X'0102' WHERE name = 'TRACER_PRODUCER'"], None),
    ])
    def test_bad_values_are_one_line_errors_naming_the_column(self, tmp_path: Path, sql: list[str], message: str | None) -> None:
        path = corrupt(tmp_path, sql)
        if message is None:  # a BLOB where metadata text belongs is shown, not fatal
            assert load_trace(path).producer.startswith("tracer-b'")
            return
        with pytest.raises(TraceFormatError, match=message) as err:
            load_trace(path)
        assert "\n" not in str(err.value) and str(path) in str(err.value)

    def test_a_broken_btree_page_names_the_table(self, tmp_path: Path) -> None:
        path = tmp_path / "bad.sqlite"
        shutil.copyfile(CAPTURES[0], path)
        con = sqlite3.connect(path)
        page_size = con.execute("PRAGMA page_size").fetchone()[0]
        root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 'CUPTI_ACTIVITY_KIND_RUNTIME'").fetchone()[0]
        con.close()
        data = bytearray(path.read_bytes())
        data[(root - 1) * page_size] = 0xFF  # the page type byte of the table's root page
        path.write_bytes(bytes(data))
        with pytest.raises(TraceFormatError, match="CUPTI_ACTIVITY_KIND_RUNTIME: corrupt or unreadable"):
            load_trace(path)

    @pytest.mark.parametrize("seed", range(4))
    def test_flipped_bytes_give_a_trace_or_one_error_never_a_traceback(self, tmp_path: Path, seed: int) -> None:
        original = CAPTURES[0].read_bytes()
        rnd = random.Random(seed)
        outcomes = Counter()
        for n in range(25):
            data = bytearray(original)
            for _ in range(rnd.choice((1, 8, 64))):
                data[rnd.randrange(len(data))] ^= 1 << rnd.randrange(8)
            path = tmp_path / f"flip{n}.sqlite"
            path.write_bytes(bytes(data))
            try:
                analyze(load_trace(path), None, all_kernel_pairs=True)
                outcomes["read"] += 1
            except TraceFormatError as exc:
                assert "\n" not in str(exc)
                outcomes["error"] += 1
        assert sum(outcomes.values()) == 25 and outcomes["error"] > 0

    def test_cli_exit_6_with_one_line(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        from tracer.cli import main

        path = corrupt(tmp_path, ["UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET correlationId = 'x' WHERE rowid = 1"])
        assert main(["trace", "analyze", str(path)]) == 6
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "CUPTI_ACTIVITY_KIND_KERNEL.correlationId" in err and "Traceback" not in err

    def test_memory_table_with_text_address(self, tmp_path: Path) -> None:
        b = TraceBuilder()
        op = b.op("aten::mm")
        b.access(op, 4096, 64, 2)
        b.launch(A, "k", op=op)
        path = b.write(tmp_path / "m.sqlite", memory=True)
        con = sqlite3.connect(path)
        con.execute("UPDATE TRACER_MEMORY_ACCESS SET address = 'somewhere'")
        con.commit()
        con.close()
        with pytest.raises(TraceFormatError, match="TRACER_MEMORY_ACCESS.address holds 1 text value"):
            load_trace(path)


@pytest.mark.parametrize("column", ["externalId", "correlationId"])
def test_external_correlation_that_joins_no_op_is_still_an_error(tmp_path: Path, column: str) -> None:
    """A text externalId matches no TRACER_OPS.id: the join alone would drop the row unseen."""
    path = corrupt(tmp_path, [f"UPDATE TRACER_EXTERNAL_CORRELATION SET {column} = 'x' WHERE rowid = 1"],
                   DATA / "hazards" / "raw_no_wait.sqlite")
    with pytest.raises(TraceFormatError, match=f"TRACER_EXTERNAL_CORRELATION.{column} holds 1 text value"):
        load_trace(path)


@pytest.mark.parametrize(("table", "column"), [("TRACER_GRAPH_NODES", "originalNodeId"),
                                             ("TRACER_GRAPH_NODES", "correlationId"),
                                             ("CUPTI_ACTIVITY_KIND_KERNEL", "graphNodeId")])
def test_graph_node_columns_of_the_wrong_type_are_named(tmp_path: Path, table: str, column: str) -> None:
    """A text graph node id would join no node: the replayed kernel would quietly lose its memory set."""
    path = corrupt(tmp_path, [f"UPDATE {table} SET {column} = 'x' WHERE rowid = (SELECT max(rowid) FROM {table})"],
                   DATA / "hazards" / "graph_no_wait.sqlite")
    with pytest.raises(TraceFormatError, match=f"{table}.{column} holds 1 text value"):
        load_trace(path)


@pytest.mark.parametrize("mode", [0, 4, -1, 7])
def test_memory_access_mode_outside_the_contract(tmp_path: Path, mode: int) -> None:
    b = TraceBuilder()
    op = b.op("aten::mm")
    b.access(op, 4096, 64, mode)
    b.launch(A, "k", op=op)
    with pytest.raises(TraceFormatError, match="TRACER_MEMORY_ACCESS.mode holds"):
        load_trace(b.write(tmp_path / "m.sqlite", memory=True))



def row_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Spy on the row-by-row reads; returns the list of their sources."""
    from tracer.readers.sqlite_tables import SqliteTables

    seen: list[str] = []
    real = SqliteTables._rows

    def rows(self: SqliteTables, exprs: list[str], ok: str, source: str) -> list[np.ndarray] | None:
        seen.append(source)
        return real(self, exprs, ok, source)

    monkeypatch.setattr(SqliteTables, "_rows", rows)
    return seen


def test_columns_past_sqlites_string_limit_are_read_row_by_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite refuses a column's text past its length limit (tens of millions of rows at the default
    limit); here the limit sits just above the longest string of a real capture, so the runtime
    table's columns pass it and the reader must fall back to rows, with the same verdict."""
    import tracer.readers.nsys_reader as nsys_reader
    import tracer.readers.sqlite_tables as sqlite_tables

    path = CAPTURES[0]
    whole = analyze(load_trace(path), None, all_kernel_pairs=True).to_json()
    with sqlite3.connect(path) as con:
        longest = con.execute("SELECT max(length(CAST(value AS BLOB))) FROM StringIds").fetchone()[0]
    real = sqlite_tables.connect

    def limited(p: Path) -> sqlite3.Connection:
        con = real(p)
        con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, longest + 1)
        return con

    monkeypatch.setattr(sqlite_tables, "connect", limited)
    monkeypatch.setattr(nsys_reader, "connect", limited)
    seen = row_reads(monkeypatch)
    assert analyze(load_trace(path), None, all_kernel_pairs=True).to_json() == whole
    assert any("CUPTI_ACTIVITY_KIND_RUNTIME" in s for s in seen)


@pytest.fixture
def rows_only(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every read takes the row-by-row path (as if every column were past SQLite's string limit)."""
    from tracer.readers.sqlite_tables import SqliteTables

    def too_big(self: SqliteTables, exprs: list[str], ok: str, source: str) -> None:
        raise sqlite3.DataError("string or blob too big")

    monkeypatch.setattr(SqliteTables, "_concat", too_big)
    return row_reads(monkeypatch)


HAZARD_CAPTURES = [DATA / "hazards" / f"{n}.sqlite" for n in ("raw_no_wait", "reuse_no_record_stream", "triton_no_wait")]


@pytest.mark.parametrize("path", CAPTURES + HAZARD_CAPTURES, ids=lambda p: p.stem)
def test_row_by_row_reads_give_the_same_verdict(path: Path, request: pytest.FixtureRequest) -> None:
    whole = analyze(load_trace(path), None, all_kernel_pairs=True).to_json()
    seen = request.getfixturevalue("rows_only")
    assert analyze(load_trace(path), None, all_kernel_pairs=True).to_json() == whole
    assert any("TRACER_MEMORY_ACCESS" in s for s in seen) == (path in HAZARD_CAPTURES)


@pytest.mark.parametrize("name", [n for n in SHARED_TRACES if n.endswith(".sqlite")])
def test_row_by_row_reads_give_the_same_verdict_on_others_exports(name: str, request: pytest.FixtureRequest) -> None:
    path = shared_fixture(*name.split("/"))
    whole = analyze(load_trace(path), None, all_kernel_pairs=True).to_json()
    seen = request.getfixturevalue("rows_only")
    assert analyze(load_trace(path), None, all_kernel_pairs=True).to_json() == whole
    assert any("CUPTI_ACTIVITY_KIND_KERNEL" in s for s in seen)


def test_row_by_row_read_still_names_a_bad_column(tmp_path: Path, rows_only: list[str]) -> None:
    path = corrupt(tmp_path, ["UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET streamId = 2.5 WHERE rowid = 3"])
    with pytest.raises(TraceFormatError, match=r"CUPTI_ACTIVITY_KIND_KERNEL.streamId holds 1 real value"):
        load_trace(path)
    assert rows_only
