"""The streamed Kineto reader: the same Trace as a plain json.load reading of the real PyTorch
profiler fixtures (../shared/fixtures/kineto), whatever the buffer size, and one-line errors for
malformed or hostile JSON."""
from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import shared_fixture
from tracer.errors import TraceFormatError
from tracer.readers import kineto_reader as kr
from tracer.readers.kineto_reader import read_kineto
from tracer.model.trace import Trace

FIXTURES = ("event_sync.json.gz", "event_sync_multi_stream.json.gz")
KERNEL = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 2,
          "args": {"device": 0, "stream": 7, "correlation": 1}}


def reference(path: Path) -> dict[str, object]:
    """An independent reading with json.load: what the trace holds, in plain Python."""
    events = [e for e in json.load(gzip.open(path, "rt"))["traceEvents"] if e.get("ph") == "X"]
    ns = lambda us: us * 1000 if isinstance(us, int) else int((Decimal(us) * 1000).to_integral_value())  # exact
    names: list[str] = []
    intern = lambda s: names.index(s) if s in names else names.append(s) or len(names) - 1
    kernels, apis, ranges, syncs = [], [], [], []
    for e in events:
        a, start, end = e.get("args", {}), ns(e["ts"]), ns(e["ts"] + e["dur"])
        if e["cat"] == "kernel":
            kernels.append((start, end, a["device"], a["stream"], a["correlation"], intern(e["name"])))
        elif e["cat"] in ("cuda_runtime", "cuda_driver"):
            apis.append((start, end, e["tid"], a["correlation"], intern(e["name"])))
        elif e["cat"] in ("user_annotation", "cpu_op"):
            ranges.append((start, end, e["tid"], intern(e["name"])))
        elif e["cat"] == "cuda_sync":
            syncs.append((a["correlation"], a.get("cuda_sync_kind"), a.get("stream", -1), start, end))
    return {"strings": names, "kernels": sorted(kernels), "apis": sorted(apis, key=lambda r: r[3]), "ranges": sorted(ranges),
            "syncs": sorted(syncs), "memcpy": sum(e["cat"] == "gpu_memcpy" for e in events),
            "memset": sum(e["cat"] == "gpu_memset" for e in events)}


def observed(t: Trace) -> dict[str, object]:
    k, a, r = t.kernels, t.apis, t.ranges
    rows = lambda *cols: [tuple(int(x) for x in row) for row in zip(*cols)]
    kinds = {"wait": "Stream Wait Event", "stream": "Stream Sync", "event": "Event Sync", "context": "Context Sync"}
    return {"strings": t.strings, "kernels": rows(k.start, k.end, k.device, k.stream, k.corr, k.name),
            "apis": rows(a.start, a.end, a.tid, a.corr, a.name), "ranges": rows(r.start, r.end, r.tid, r.text),
            "syncs": sorted((y.corr, kinds[y.kind.value], y.stream if y.kind.value in ("wait", "stream") else -1, y.start, y.end)
                            for y in t.syncs),
            "memcpy": t.memcpy_count, "memset": t.memset_count}


@pytest.mark.parametrize("name", FIXTURES)
def test_fixtures_read_as_the_json_load_reference(name: str) -> None:
    path = shared_fixture("kineto", name)
    t = read_kineto(path)
    assert observed(t) == reference(path)
    assert len(t.kernels) > 0 and all(c.dtype == np.int64 for c in (t.kernels.start, t.apis.corr, t.ranges.start))
    waits = [y for y in t.syncs if y.kind.value == "wait"]
    assert {r.key for r in t.records} >= {y.key for y in waits}


@pytest.mark.parametrize("chunk", [1, 7, 64, 1000])
def test_any_buffer_size_reads_the_same(chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    path = shared_fixture("kineto", "event_sync_multi_stream.json.gz")
    whole = observed(read_kineto(path))
    monkeypatch.setattr(kr, "CHUNK", chunk)
    assert observed(read_kineto(path)) == whole


def _trace(events: list[object], **top: object) -> str:
    return json.dumps({"schemaVersion": 1, **top, "traceEvents": events, "traceName": "t"})


def _event(**changes: object) -> dict:
    e = dict(KERNEL, **changes)
    return {k: v for k, v in e.items() if v is not None}


BAD = {
    "string timestamp": (_trace([_event(ts="10")]), r"traceEvents\[0\]: 'ts' is '10' \(allowed: a finite number"),
    "NaN timestamp": (_trace([_event()]).replace('"ts": 10', '"ts": NaN'), "NaN is not a JSON number"),
    "infinite timestamp": (_trace([_event()]).replace('"ts": 10', '"ts": 1e999'), r"'ts' is inf"),
    "boolean duration": (_trace([_event(dur=True)]), r"'dur' is True"),
    "negative duration": (_trace([_event(dur=-1)]), r"'dur' is -1"),
    "timestamp past int64": (_trace([_event(ts=10 ** 19)]), r"'ts' is 10000000000000000000"),
    "missing name": (_trace([_event(name=None)]), r"'name' is None \(allowed: a string\)"),
    "args as a list": (_trace([_event(args=[1, 2])]), r"'args' is list \(allowed: an object\)"),
    "stream as a string": (_trace([_event(args={"device": 0, "stream": "7", "correlation": 1})]), r"'stream' is '7' \(allowed: an integer\)"),
    "event that is a list": (_trace([[1]]), r"traceEvents\[0\]: is list, not an event object"),
    "second event bad": (_trace([_event(), {"ph": "X", "cat": "cuda_runtime", "name": "x", "ts": 1, "dur": 1, "tid": "main"}]),
                         r"traceEvents\[1\]: 'tid' is 'main'"),
    "100k-deep nesting": ('{"traceEvents": [' + "[" * 100_000 + "]" * 100_000 + "]}", "nested too deeply"),
    "deep nesting in args": (_trace([_event(args=None)]).replace('"ts": 10', '"a": ' + "[" * 100_000 + "]" * 100_000 + ', "ts": 10'),
                             "nested too deeply"),
    "huge integer": (_trace([_event()]).replace('"ts": 10', '"ts": ' + "9" * 5000), "not valid JSON"),
    "truncated": (_trace([_event()])[:-9], "not valid JSON, truncated or corrupt"),
    "missing comma": (_trace([_event(), _event()]).replace("}, {", "} {"), r"expected , or \]"),
    "text after the object": (_trace([]) + " x", "more text after the top-level object"),
    "top-level list": ("[]", r"expected \{ at character 0"),
    "empty": ("", r"expected \{ at character 0, found the end"),
    "no traceEvents": ('{"a": 1}', "no traceEvents list"),
    "traceEvents not a list": ('{"traceEvents": {"a": 1}}', "no traceEvents list"),
    "not UTF-8": (b'{"traceEvents": [{"name": "\xff"}]}', "not valid JSON"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_malformed_json_is_one_line(case: str, tmp_path: Path) -> None:
    text, message = BAD[case]
    path = tmp_path / "t.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(TraceFormatError, match=message) as err:
        read_kineto(path)
    assert "\n" not in str(err.value) and str(err.value).startswith(str(path))


def test_events_not_read_are_not_checked(tmp_path: Path) -> None:
    """Flows, metadata and instant events carry nothing tracer reads: odd ones are skipped, counted nowhere."""
    path = tmp_path / "t.json"
    path.write_text(_trace([{"ph": "f", "ts": "x"}, {"ph": "M", "name": 3}, _event(), {"ph": "X", "cat": "Trace", "ts": None}],
                           deviceProperties=[{"id": 0}], INFO=["a", {"b": [1, 2]}]))
    t = read_kineto(path)
    assert len(t.kernels) == 1 and t.kernels.start[0] == 10_000 and t.kernels.end[0] == 12_000


def test_gzip_truncated_is_one_line(tmp_path: Path) -> None:
    data = gzip.compress(_trace([_event()] * 50).encode())
    path = tmp_path / "t.json.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceFormatError, match="t.json.gz"):
        read_kineto(path)


def test_cli_one_line_for_a_bad_timestamp(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tracer.cli import main

    path = tmp_path / "bad.json"
    path.write_text(_trace([_event(ts="soon")]))
    assert main(["trace", "analyze", str(path)]) == 6
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'ts' is 'soon'" in err


def test_epoch_microseconds_become_exact_nanoseconds(tmp_path: Path) -> None:
    """Kineto writes microseconds since the epoch (about 1.7e15): times 1000 that is past float64's
    exact integers, where a float product comes out in steps of 256 ns."""
    t0 = 1_661_938_466_265_125
    path = tmp_path / "epoch.json"
    path.write_text(_trace([_event(ts=t0, dur=9), _event(ts=t0 + 10, dur=4, args={"device": 0, "stream": 7, "correlation": 2}),
                            _event(ts=t0 + 20.5, dur=1.25, args={"device": 0, "stream": 7, "correlation": 3})]))
    k = read_kineto(path).kernels
    assert k.start.tolist() == [t0 * 1000, (t0 + 10) * 1000, (t0 + 20) * 1000 + 500]
    assert k.end.tolist() == [(t0 + 9) * 1000, (t0 + 14) * 1000, (t0 + 21) * 1000 + 750]
