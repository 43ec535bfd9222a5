"""Trace reading and ordering analysis on real traces: shared nsys exports and Kineto traces made
by others, and CUPTI captures tracer made on an H200 (tests/data/traces, scripts/capture_traces.py)."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import DATA, shared_fixture
from tracer.analysis.analyze import analyze
from tracer.readers.load import load_trace
from tracer.model.trace import SyncKind
from tracer.model.trace import process_index, raw_id
from tracer.analysis.ordering import Verdict

DEMO = Path(__file__).resolve().parent.parent / "tracer" / "data" / "demo"
PAIRS = [("*/cast_transpose", "*/dgrad"), ("*/cast_transpose", "*/wgrad")]


@pytest.fixture(scope="module")
def analysis():
    return analyze(load_trace(shared_fixture("nsys", "h100_2gpu_1s.sqlite")), all_kernel_pairs=True)


class TestH100TwoGpu:
    def test_counts(self, analysis) -> None:
        t = analysis.trace
        assert analysis.to_json()["operations"] == {"kernel": 3442, "memcpy": 904, "memset": 22}
        assert len(t.kernels) == 3442 + 904 + 22 and len(t.ranges.start) == 16782
        assert [(s.device, s.raw_stream, s.kernels, s.operations) for s in analysis.streams] == [(0, 7, 1721, 2184),
                                                                                                 (1, 15, 1721, 2184)]
        assert t.multi_process and [s.pid for s in analysis.streams] == list(t.processes)  # one rank per GPU
        kinds = [y.kind for y in t.syncs]
        assert kinds.count(SyncKind.WAIT) == 236 and kinds.count(SyncKind.STREAM) == 8
        assert t.producer.startswith("nsys 2026.2.1.210 schema 3.25.0")

    def test_missing_launch_records_are_counted_not_dropped(self, analysis) -> None:
        # kernels: 1,810 by SQL joining on (process, correlationId); joined on correlationId alone, 11
        # kernels would take the launch call of the other process. Copies lack theirs too.
        no_record = analysis.attribution.rule == analysis.attribution.rule.max()  # rule 'none'
        kernels = analysis.trace.kernels.kinds() == 0
        assert int((no_record & kernels).sum()) == 1810
        copies = int((no_record & ~kernels).sum())
        assert analysis.attribution.no_launch_record == 1810 + copies
        assert analysis.attribution.unattributed >= 1810 + copies
        assert analysis.to_json()["kernels"] == 3442

    def test_waits_without_event_records_are_reported(self, analysis) -> None:
        assert analysis.event_edges == 0 and analysis.unmatched_waits == 236

    def test_pairs_all_stays_within_a_device(self, analysis) -> None:
        assert sum(analysis.pair_counts.values()) == 0  # one stream per device: nothing to pair

    def test_attribution_matches_an_independent_sql_join(self, analysis) -> None:
        """The innermost NVTX range open on the launching thread at launch time, computed by SQL."""
        con = sqlite3.connect(shared_fixture("nsys", "h100_2gpu_1s.sqlite"))
        rows = con.execute(
            "SELECT k.correlationId, k.globalPid >> 24 & 16777215, (SELECT n.text FROM NVTX_EVENTS n WHERE n.globalTid = r.globalTid "
            "AND n.start <= r.start AND n.end >= r.start AND n.eventType = 59 ORDER BY n.start DESC LIMIT 1) "
            "FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId "
            "AND r.globalTid >> 24 = k.globalPid >> 24 ORDER BY k.start LIMIT 300").fetchall()
        t, attr = analysis.trace, analysis.attribution
        by_corr = {(raw_id(int(c)), t.processes[int(process_index(int(c)))]): i for i, c in enumerate(t.kernels.corr)}
        checked = 0
        for corr, pid, text in rows:
            rng = attr.range_of_kernel[by_corr[corr, pid]]
            got = t.strings[int(t.ranges.text[rng])] if rng >= 0 else None
            assert got == text, corr
            checked += text is not None
        assert checked > 100


class TestNsysFixtures:
    def test_smoke_syncs_classified_by_api_name_not_sync_type(self) -> None:
        t = load_trace(shared_fixture("nsys", "smoke_2025.5.2.sqlite"))
        con = sqlite3.connect(shared_fixture("nsys", "smoke_2025.5.2.sqlite"))
        assert {r[0] for r in con.execute("SELECT syncType FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")} == {2}
        assert [y.kind for y in t.syncs] == [SyncKind.STREAM, SyncKind.STREAM]
        assert all(y.api.startswith("cudaStreamSynchronize") for y in t.syncs)
        assert len(t.kernels) == 3 and len(t.records) == 2 and len(t.ranges.start) == 0

    def test_torch_small(self) -> None:
        a = analyze(load_trace(shared_fixture("nsys", "torch_small.sqlite")), all_kernel_pairs=True)
        assert a.to_json()["operations"] == {"kernel": 2, "memcpy": 1, "memset": 0}
        assert len(a.streams) == 1 and a.attribution.no_launch_record == 0


class TestKineto:
    def test_multi_stream_event_edge(self) -> None:
        a = analyze(load_trace(shared_fixture("kineto", "event_sync_multi_stream.json.gz")), all_kernel_pairs=True)
        assert [s.stream for s in a.streams] == [20, 24, 28]
        edge = [p for p in a.pairs if p.verdict is Verdict.EVENT_ORDERED]
        assert sorted(p.consumer_op for p in edge) == ["kernel", "memset"]  # the memset is ordered by the same wait
        for p in edge:
            e = p.edge
            assert (p.producer_stream, p.consumer_stream, p.producer_op) == (20, 24, "kernel")
            assert (e.record_stream, e.record_corr, e.wait_stream, e.wait_corr) == (20, 1385, 24, 1389)
        assert a.pair_counts == {"same-stream": 0, "event-ordered": 2, "host-synchronized": 4, "unordered": 0}

    def test_event_stream_and_context_syncs(self) -> None:
        t = load_trace(shared_fixture("kineto", "event_sync.json.gz"))
        assert [y.kind for y in t.syncs] == [SyncKind.STREAM, SyncKind.EVENT, SyncKind.EVENT, SyncKind.CONTEXT]
        assert len(t.kernels) == 4 and t.memcpy_count == 1


class TestCuptiCaptures:
    def load(self, name: str):
        return analyze(load_trace(DATA / "traces" / f"{name}.sqlite"), PAIRS[:1])  # no wgrad here: an unmatched glob is an error

    def test_cast_transpose_dgrad_same_stream(self) -> None:
        a = self.load("cast_transpose_dgrad")
        assert a.trace.producer.startswith("tracer-cupti")
        assert a.pair_counts["same-stream"] == 2 and a.unordered == 0
        for p in a.pairs:
            assert p.producer_kernel == "cast_transpose" and p.consumer_kernel.startswith("nvjet_sm90")
            assert p.gap_ns > 0

    def test_event_ordered_dgrad_edge(self) -> None:
        a = self.load("event_ordered_dgrad")
        assert a.pair_counts["event-ordered"] == 2
        for p in a.pairs:
            assert (p.producer_stream, p.consumer_stream) == (7, 13)
            assert p.edge is not None and (p.edge.record_stream, p.edge.wait_stream) == (7, 13)
            assert p.edge.record_corr < p.edge.wait_corr and p.edge.api.startswith("cudaStreamWaitEvent")

    def test_planted_cross_stream_unordered(self) -> None:
        a = self.load("planted_cross_stream")
        assert a.pair_counts["unordered"] == 3 and all(p.edge is None for p in a.pairs)

    def test_linear_backward_planted_pair(self) -> None:
        a = analyze(load_trace(DEMO / "linear_backward_planted.sqlite"), PAIRS)
        bad = sorted(p.consumer for p in a.pairs if p.verdict is Verdict.UNORDERED)
        assert bad == ["step0/layer1/mb0/dgrad", "step0/layer1/mb1/dgrad", "step1/layer1/mb0/dgrad", "step1/layer1/mb1/dgrad"]
        assert a.pair_counts["same-stream"] == 20
        names = {a.trace.strings[int(i)] for i in a.trace.ranges.text}
        assert "step1/amax_update" in names and "step0/layer2/mb1/wgrad" in names

    def test_driver_api_launches_attribute_the_gemm(self) -> None:
        a = self.load("cast_transpose_dgrad")
        gemm = [i for i in range(len(a.trace.kernels)) if a.trace.kernel_name(i).startswith("nvjet")]
        assert gemm and all(a.attribution.range_of_kernel[i] >= 0 for i in gemm)
        launch_names = {a.trace.strings[int(a.trace.apis.name[np.searchsorted(a.trace.apis.corr, a.trace.kernels.corr[i])])]
                        for i in gemm}
        assert all(n.startswith("cu") and not n.startswith("cuda") for n in launch_names)


class TestBadInput:
    def test_not_sqlite(self, tmp_path: Path) -> None:
        from tracer.errors import TraceFormatError

        p = tmp_path / "x.sqlite"
        p.write_text("hello")
        with pytest.raises(TraceFormatError, match="not an SQLite file"):
            load_trace(p)

    def test_sqlite_without_kernel_table(self, tmp_path: Path) -> None:
        from tracer.errors import TraceFormatError

        p = tmp_path / "x.sqlite"
        sqlite3.connect(p).execute("CREATE TABLE foo (a)").connection.commit()
        with pytest.raises(TraceFormatError, match="no CUPTI_ACTIVITY_KIND_KERNEL table"):
            load_trace(p)

    @pytest.mark.parametrize("gz", [False, True])
    def test_truncated_json(self, tmp_path: Path, gz: bool) -> None:
        import gzip

        from tracer.errors import TraceFormatError

        data = gzip.open(shared_fixture("kineto", "event_sync.json.gz")).read()[:5000]
        p = tmp_path / ("t.json.gz" if gz else "t.json")
        p.write_bytes(gzip.compress(data)[:-20] if gz else data)
        with pytest.raises(TraceFormatError, match="t.json"):
            load_trace(p)

    def test_cli_one_line_errors(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        from tracer.cli import main

        p = tmp_path / "bad.json"
        p.write_text("{\"traceEvents\": [")
        assert main(["trace", "analyze", str(p)]) == 6
        err = capsys.readouterr().err
        assert err.startswith("tracer: error:") and err.count("\n") == 1 and "not valid JSON" in err
        assert main(["trace", "analyze", str(DATA / "traces" / "cast_transpose_dgrad.sqlite"), "--pairs", "nocolon"]) == 2
        assert "PRODUCER_GLOB:CONSUMER_GLOB" in capsys.readouterr().err
