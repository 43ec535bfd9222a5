"""The scanning XML reader (the default) against the defusedxml reference: on every real output
(tests/data/sanitizer, captured on an H200), read in one process and split in two; records that
differ only in numbers nothing reads are classified once, and any other difference is not missed;
a file split in two reads as the whole, and whatever the splitter could be fooled by (a DOCTYPE,
comment, CDATA section, processing instruction or '<record>' in the second half, a bad record or a
truncation in either half) reads as in the reference, through one process when the split is refused."""
from __future__ import annotations

import multiprocessing
import re
from pathlib import Path

import pytest

from tests.conftest import DATA
from tracer.errors import TraceFormatError
from tracer.sanitize import parse_xml as px
from tracer.sanitize import xml_bytes as xb
from tracer.sanitize.parse_xml import XmlReader, parse_xml

SAN = DATA / "sanitizer"
XMLS = sorted(SAN.glob("*/*.xml"))
WITH_RECORDS = [p for p in XMLS if b"<record>" in p.read_bytes()]
SPLITTABLE = [p for p in XMLS if p.read_bytes().count(b"<record>") >= 2]
MEMCHECK = SAN / "unfiltered-1024" / "memcheck-planted_oob.xml"  # 37 records with host stacks
HAZARDS = SAN / "filtered-128" / "racecheck-hazard-planted_race.xml"  # 20 hazards, each its own address and threads
ANALYSIS = SAN / "filtered-128" / "racecheck-analysis-planted_race.xml"


def _tool(path: Path) -> str:
    return path.name.split("-")[0]


def _result(path: Path, tool: str = "memcheck", **kw: object) -> object:
    """What a reader makes of a file: its Parsed, or its one-line error without the path."""
    try:
        return parse_xml(path, tool, **kw)
    except TraceFormatError as exc:
        return f"TraceFormatError: {str(exc)[len(str(path)):]}"


def _halves(path: Path, tool: str, method: str = "fork") -> tuple[px._Records, bool] | None:
    """The two-process read of `path` alone (None: refused), split where parse_xml would split it."""
    prolog = xb.prolog_of(path.read_bytes()[:xb.CHUNK])
    with open(path, "rb") as fh:
        at = xb.split_point(fh, path.stat().st_size)
    assert prolog is not None and at is not None
    return px._scan_halves(path, prolog, tool, at, method)


@pytest.mark.parametrize("path", XMLS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_scanning_reader_equals_the_reference_in_one_process_and_in_two(path: Path) -> None:
    safe = parse_xml(path, _tool(path), reader=XmlReader.SAFE)
    assert parse_xml(path, _tool(path), workers=1) == safe
    assert parse_xml(path, _tool(path), workers=2) == safe
    assert multiprocessing.active_children() == []
    if path in WITH_RECORDS:  # read by the scanning reader itself, not handed to the tree reader
        scanned = px._scan_file(path, _tool(path), 1)
        assert scanned is not None and scanned[0].parsed(scanned[1], True) == safe


@pytest.mark.parametrize("path", SPLITTABLE[::4], ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_split_file_reads_as_the_whole(path: Path) -> None:
    both = _halves(path, _tool(path))
    assert both is not None
    assert both[0].parsed(both[1], True) == parse_xml(path, _tool(path), reader=XmlReader.SAFE)


def test_the_worker_runs_under_spawn_too() -> None:
    """Nothing the worker needs is inherited: it runs in a fresh interpreter as well."""
    both = _halves(MEMCHECK, "memcheck", method="spawn")
    assert both is not None and both[0].parsed(both[1], True) == parse_xml(MEMCHECK, "memcheck", reader=XmlReader.SAFE)


def _second_half(data: bytes, old: bytes, new: bytes) -> bytes:
    at = data.index(old, len(data) // 2 + 2000)
    return data[:at] + new + data[at + len(old):]


@pytest.mark.parametrize("edit", [
    (b"<record>", b'<!DOCTYPE x [<!ENTITY a "b">]><record>'),
    (b"<record>", b"<!-- </record>\n  <record> --><record>"),
    (b"<record>", b"<![CDATA[</record>\n  <record>]]><record>"),
    (b"<record>", b"<?pi </record>\n  <record>?><record>"),
    (b"<record>", b'<x a="</record>\n  <record>"/><record>'),  # not well-formed: '<' in an attribute
    (b"<record>", b"<other/><record>"),  # another child of the root
    (b"<kind>", b"<kind><record>"),  # a record inside a record
    (b"</record>", b"</record >"),
    (b"<record>", b"<record >"),
    (b"<kind>", b"<kind>&bogus;"),
    (b"<kind>", b"<kind>\x01"),
    (b"</kind>", b"</kin>"),
])
def test_what_could_fool_the_splitter_reads_as_in_the_reference(edit: tuple[bytes, bytes], tmp_path: Path) -> None:
    path = tmp_path / "memcheck.xml"
    path.write_bytes(_second_half(MEMCHECK.read_bytes(), *edit))
    safe = _result(path, reader=XmlReader.SAFE)
    assert _result(path, workers=2) == _result(path, workers=1) == _result(path, reader=XmlReader.TREE) == safe
    assert _halves(path, "memcheck") is None  # the split was refused: one process read it


@pytest.mark.parametrize("fake", [b"<!-- </record>\n  <record> -->", b"<![CDATA[</record>\n  <record>]]>",
                                  b"<?pi </record>\n  <record>?>", b'<x a="</record>\n  <record>"/>'])
def test_a_split_point_inside_a_comment_cdata_pi_or_attribute_is_refused(fake: bytes, tmp_path: Path) -> None:
    data = MEMCHECK.read_bytes()
    path = tmp_path / "memcheck.xml"
    for at in range(len(data) // 2 - 100, len(data) // 2 + 8000, 50):  # until the split point falls inside the fake tags
        at = data.index(b"<", at)
        path.write_bytes(data[:at] + fake + data[at:])
        with open(path, "rb") as fh:
            split = xb.split_point(fh, path.stat().st_size)
        if split is not None and at < split < at + len(fake):
            break
    else:
        pytest.fail("no insertion put the split point inside the fake tags")
    assert _halves(path, "memcheck") is None
    assert _result(path, workers=2) == _result(path, reader=XmlReader.SAFE)


@pytest.mark.parametrize("half", ["first", "second"])
def test_a_bad_record_in_either_half_is_the_same_one_line_error(half: str, tmp_path: Path) -> None:
    data = ANALYSIS.read_bytes()
    at = data.index(b"<count>", 0 if half == "first" else len(data) // 2 + 1000)
    path = tmp_path / "racecheck.xml"
    path.write_bytes(data[:at] + b"<count>x" + data[at + len(b"<count>"):])
    safe = _result(path, "racecheck", reader=XmlReader.SAFE)
    assert isinstance(safe, str) and re.search(r"record \d+: <count> 'x\d+' is not a whole number", safe)
    assert "\n" not in safe
    assert _result(path, "racecheck", workers=2) == _result(path, "racecheck", workers=1) == safe


def test_a_truncated_second_half_reads_as_far_as_the_reference(tmp_path: Path) -> None:
    data = MEMCHECK.read_bytes()
    path = tmp_path / "memcheck.xml"
    for cut in (len(data) - 40, len(data) * 3 // 4, data.rindex(b"</record>") + 3, data.rindex(b"<record>") + 2):
        path.write_bytes(data[:cut])
        safe = parse_xml(path, "memcheck", reader=XmlReader.SAFE)
        assert safe.incomplete and 18 < safe.records < 37
        assert parse_xml(path, "memcheck", workers=2) == parse_xml(path, "memcheck", workers=1) == safe
        both = _halves(path, "memcheck")  # read in two: the worker's part says incomplete
        assert both is not None and both[0].parsed(both[1], True) == safe


def test_records_differing_only_in_numbers_nothing_reads_are_classified_once(tmp_path: Path) -> None:
    """The 20 real hazards differ in their address, launch counter and thread indices; ten copies
    of each with other such numbers (as many digits) make no record more to build and classify."""
    data = HAZARDS.read_bytes()
    head, *records = data.split(b"</ComputeSanitizerOutput>")[0].split(b"  <record>")
    copies = [re.sub(rb"<(address|current|x)>(0x)?([0-9a-f]+)<", lambda m: m.group(0).replace(m.group(3), m.group(3)[::-1]), r)
              for _ in range(10) for r in records]
    path = tmp_path / "racecheck.xml"
    path.write_bytes(b"  <record>".join([head, *copies]) + b"</ComputeSanitizerOutput>\n")
    learned = []
    for p in (HAZARDS, path):
        scan = px._Scan(p, xb.prolog_of(data) or b"", "racecheck")
        assert scan.run(0, p.stat().st_size, final=True) is False
        learned.append(sum(len(meanings) for _, meanings in scan.memo.values()))
        assert scan.acc.parsed(False, True) == parse_xml(p, "racecheck", reader=XmlReader.SAFE)
        assert scan.acc.seen == (20 if p == HAZARDS else 200)
    assert learned[0] == learned[1] < 20


@pytest.mark.parametrize("edit", [
    (rb"<line>133</line>", rb"<line>134</line>"),  # a line number: read
    (rb"<thread0>(.*?)</thread0>(\s*)<thread1>(.*?)</thread1>", rb"<thread1>\1</thread1>\2<thread0>\3</thread0>"),  # digits in tag names
    (rb"<address>0x[0-9a-f]+</address>", rb"<address>&#48;</address>"),  # a character reference where numbers are ignored...
    (rb"<address>0x[0-9a-f]+</address>", rb"<address>&#00;</address>"),  # ...and one that is not allowed: an error
    (rb"<gridid>17</gridid>", rb"<gridid>17</gridid><count>5</count>"),
])
def test_records_differing_where_it_matters_are_not_taken_for_one_another(edit: tuple[bytes, bytes], tmp_path: Path) -> None:
    data = HAZARDS.read_bytes()
    records = data.split(b"</record>")
    for i in range(5, len(records) - 1, 3):  # every third record from the sixth on
        records[i] = re.sub(edit[0], edit[1], records[i], count=1, flags=re.S)
    path = tmp_path / "racecheck.xml"
    path.write_bytes(b"</record>".join(records))
    safe = _result(path, "racecheck", reader=XmlReader.SAFE)
    assert _result(path, "racecheck", workers=1) == _result(path, "racecheck", workers=2) == safe


def test_ignored_elements_are_never_read(tmp_path: Path) -> None:
    """Changing the numbers of the elements the scanning reader ignores changes nothing any
    reader reports (on every real file that has them)."""
    ignored = b"|".join(xb.IGNORED)
    for path in WITH_RECORDS:
        data = path.read_bytes()
        changed = re.sub(rb"<(" + ignored + rb")>[0-9a-fx]*<", lambda m: b"<" + m.group(1) + b">4242<", data)
        if changed == data:
            continue
        edited = tmp_path / path.name
        edited.write_bytes(changed)
        assert parse_xml(edited, _tool(path), reader=XmlReader.SAFE) == parse_xml(path, _tool(path), reader=XmlReader.SAFE)


def test_small_chunks_and_a_tiny_memory_read_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(px, "MEMO_BYTES", 0)  # forget every key after each chunk
    for chunk in (4096, 1000, 333):
        monkeypatch.setattr(xb, "CHUNK", chunk)
        for path in (MEMCHECK, HAZARDS):
            assert parse_xml(path, _tool(path), workers=2) == parse_xml(path, _tool(path), reader=XmlReader.SAFE), chunk


def test_files_below_the_threshold_stay_in_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(px, "_cpus", lambda: 2)
    assert px._start_method(px.SPLIT_BYTES - 1, 2) is None
    assert px._start_method(px.SPLIT_BYTES, 1) is None
    assert px._start_method(px.SPLIT_BYTES, None) is None  # commands never start a process to read
    assert px._start_method(px.SPLIT_BYTES, 2) == "fork"


def test_workers_other_than_1_or_2_are_refused() -> None:
    with pytest.raises(ValueError, match="allowed 1, 2 or None"):
        parse_xml(MEMCHECK, "memcheck", workers=3)


def test_significant_digits_are_those_outside_ignored_texts() -> None:
    import random

    rng = random.Random(17)
    parts = [b"<x>", b"</x>", b"<pc>", b"</pc>", b"<line>", b"</line>", b"#", b"##", b"&#;", b"a", b"<thread#>", b"<"]
    for _ in range(300):
        key = b"".join(rng.choice(parts) for _ in range(rng.randrange(1, 40)))
        skip = []  # the definition, the slow way: digit runs inside the plain text of an ignored element
        for name in xb.IGNORED:
            for m in re.finditer(b"<" + name + b">([^<]*)(?=<)", key):
                if b"&" not in m.group(1):
                    skip.append(m.span(1))
        runs = [m.span() for m in re.finditer(rb"#+", key)]
        expected = tuple(slice(s, e) for s, e in runs if not any(a <= s and e <= b for a, b in skip))
        assert xb.significant(key) == expected, key
