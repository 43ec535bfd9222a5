"""Sanitizer input readers at scale and under attack: the fast XML reader against the defusedxml
reference on every real output (tests/data/sanitizer, captured on an H200) and on truncations of
them, hostile XML refused in one line, text logs streamed."""
from __future__ import annotations

import io
import random
import tracemalloc
from pathlib import Path
from xml.etree.ElementTree import TreeBuilder

import pytest

from tests.conftest import DATA
from tracer.errors import TraceFormatError
from tracer.sanitize import parse_xml as px
from tracer.sanitize import xml_bytes as xb
from tracer.sanitize.parse_text import parse_lines, parse_text
from tracer.sanitize.parse_xml import XmlReader, parse_xml

SAN = DATA / "sanitizer"
XMLS = sorted(SAN.glob("*/*.xml"))
LOGS = sorted(SAN.glob("*/*.log"))
ROOT = "ComputeSanitizerOutput"
ATTACKS = {
    "billion laughs": f'<!DOCTYPE {ROOT} [<!ENTITY a0 "lol">'
                      + "".join(f'<!ENTITY a{i} "{f"&a{i - 1};" * 10}">' for i in range(1, 10))
                      + f']><{ROOT}><record><kind>&a9;</kind></record></{ROOT}>',
    "quadratic blowup": f'<!DOCTYPE {ROOT} [<!ENTITY a "{"x" * 50000}">]><{ROOT}><record><kind>{"&a;" * 2000}</kind></record></{ROOT}>',
    "external entity": f'<!DOCTYPE {ROOT} [<!ENTITY e SYSTEM "file:///etc/passwd">]><{ROOT}><record><kind>&e;</kind></record></{ROOT}>',
    "DTD retrieval": f'<!DOCTYPE {ROOT} SYSTEM "http://127.0.0.1:9/x.dtd"><{ROOT}></{ROOT}>',
    "parameter entity": f'<!DOCTYPE {ROOT} [<!ENTITY % p SYSTEM "http://127.0.0.1:9/p.dtd"> %p;]><{ROOT}></{ROOT}>',
}


def _tool(path: Path) -> str:
    return path.name.split("-")[0]


def _result(path: Path, **kw: object) -> object:
    try:
        return parse_xml(path, "memcheck", **kw)
    except TraceFormatError as exc:
        return f"TraceFormatError: {str(exc)[len(str(path)):]}"


@pytest.mark.parametrize("path", XMLS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fast_reader_equals_defusedxml_on_every_real_xml(path: Path) -> None:
    safe = parse_xml(path, _tool(path), reader=XmlReader.SAFE)
    assert parse_xml(path, _tool(path)) == safe
    assert parse_xml(path, _tool(path), reader=XmlReader.TREE) == safe
    assert parse_xml(path, _tool(path), host_stacks=True) == safe
    assert safe.recognised and (safe.records > 0 or path.stat().st_size < 1000)


def test_host_stacks_are_cut_before_parsing() -> None:
    data = (SAN / "unfiltered-1024" / "memcheck-planted_oob.xml").read_bytes()
    fed = b"".join(xb.HostStackCutter().chunks(io.BytesIO(data)))
    assert b"hostStack" not in fed and len(fed) < len(data) / 10
    assert fed.count(b"<record>") == data.count(b"<record>") == 37


@pytest.mark.parametrize("insert", [b"<!-- a comment -->", b"<![CDATA[ ]]>", b"<?pi x?>"])
def test_comments_cdata_and_pis_stop_the_cutting(insert: bytes, tmp_path: Path) -> None:
    data = (SAN / "unfiltered-1024" / "memcheck-planted_oob.xml").read_bytes()
    at = data.index(b"<record>")
    edited = data[:at] + insert + data[at:]
    assert b"".join(xb.HostStackCutter().chunks(io.BytesIO(edited))) == edited
    path = tmp_path / "x.xml"
    path.write_bytes(edited)
    assert parse_xml(path, "memcheck") == parse_xml(path, "memcheck", reader=XmlReader.SAFE)


@pytest.mark.parametrize("edit", [
    (b"<saveLocation>", b"<saveLocation></record><record><kind>Leak</kind>"),  # a record inside a host stack
    (b"<frame>", b"<frame><!-- "),  # a comment opened inside a host stack
    (b"<hostStack>", b"<hostStack><hostStack>"),  # nested
    (b"</ComputeSanitizerOutput>", b"</record></ComputeSanitizerOutput>"),  # broken outside host stacks
])
def test_a_malformed_file_reads_as_in_the_reference(edit: tuple[bytes, bytes], tmp_path: Path) -> None:
    data = (SAN / "unfiltered-1024" / "memcheck-planted_oob.xml").read_bytes()
    at = data.index(edit[0], len(data) // 2)
    path = tmp_path / "x.xml"
    path.write_bytes(data[:at] + edit[1] + data[at + len(edit[0]):])
    fast, safe = _result(path), _result(path, reader=XmlReader.SAFE)
    assert fast == safe == _result(path, reader=XmlReader.TREE)
    assert getattr(safe, "incomplete", True)


def test_other_children_of_the_root_are_no_records(tmp_path: Path) -> None:
    data = (SAN / "unfiltered-1024" / "memcheck-planted_oob.xml").read_bytes()
    at = data.index(b"<record>", len(data) // 2)
    path = tmp_path / "x.xml"
    path.write_bytes(data[:at] + b"<other><kind>Leak</kind></other>\n  " + data[at:])
    safe = parse_xml(path, "memcheck", reader=XmlReader.SAFE)
    assert safe.records == 37 and not safe.incomplete
    for kw in ({}, {"workers": 2}, {"reader": XmlReader.TREE}, {"host_stacks": True}):
        assert parse_xml(path, "memcheck", **kw) == safe, kw


def test_a_broken_tag_inside_a_host_stack_is_not_seen(tmp_path: Path) -> None:
    """The one difference: host stacks that are cut are not parsed, so a mismatched tag inside one
    (which stops the reference there, incomplete) goes unseen and every record is read."""
    data = (SAN / "unfiltered-1024" / "memcheck-planted_oob.xml").read_bytes()
    at = data.index(b"</saveLocation>", len(data) // 2)
    path = tmp_path / "x.xml"
    path.write_bytes(data[:at] + b"</saveLocaton>" + data[at + len(b"</saveLocation>"):])
    fast, safe = parse_xml(path, "memcheck"), parse_xml(path, "memcheck", reader=XmlReader.SAFE)
    assert not fast.incomplete and fast.records == 37
    assert safe.incomplete and safe.records < 37
    assert parse_xml(path, "memcheck", host_stacks=True) == safe


def test_truncations_read_as_far_as_the_reference(tmp_path: Path) -> None:
    data = (SAN / "unfiltered-1024" / "memcheck-planted_oob.xml").read_bytes()
    ends = [i + len(b"</record>") for i in range(len(data)) if data.startswith(b"</record>", i)]
    cuts = sorted({*range(0, 120, 7), *(e + d for e in ends for d in (-1, 0, 1, 3)),
                   *random.Random(17).sample(range(len(data)), 60)})
    path = tmp_path / "cut.xml"
    for cut in cuts:
        path.write_bytes(data[:cut])
        fast, safe = _result(path), _result(path, reader=XmlReader.SAFE)
        assert fast == safe == _result(path, reader=XmlReader.TREE), cut
        assert isinstance(safe, str) or safe.incomplete or cut == len(data)


def test_truncations_across_chunk_ends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = SAN / "filtered-128" / "racecheck-hazard-planted_race.xml"
    whole = parse_xml(path, "racecheck", reader=XmlReader.SAFE)
    for chunk in (4096, 1000, 333):
        monkeypatch.setattr(xb, "CHUNK", chunk)
        assert parse_xml(path, "racecheck") == whole == parse_xml(path, "racecheck", reader=XmlReader.TREE), chunk


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16"])
@pytest.mark.parametrize("attack", list(ATTACKS))
def test_entity_and_dtd_attacks_are_one_line_errors_in_both_readers(attack: str, encoding: str, tmp_path: Path) -> None:
    path = tmp_path / "attack.xml"
    path.write_bytes(f'<?xml version="1.0" encoding="{encoding}"?>{ATTACKS[attack]}'.encode(encoding))
    for reader in XmlReader:
        with pytest.raises(TraceFormatError, match=r"refused: the file holds a DOCTYPE") as err:
            parse_xml(path, "memcheck", reader=reader)
        assert "\n" not in str(err.value)


@pytest.mark.parametrize("attack,what", [("billion laughs", "an entity declaration"), ("external entity", "an entity declaration"),
                                         ("parameter entity", "an entity declaration")])
def test_expat_reader_refuses_entities_even_past_a_doctype(attack: str, what: str) -> None:
    p = px._expat(TreeBuilder())
    p.StartDoctypeDeclHandler = None  # the second line of defence, on its own
    with pytest.raises(px._Refused, match=what):
        p.Parse(ATTACKS[attack].encode(), True)


def test_cli_refuses_an_entity_bomb_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tracer.cli import main

    path = tmp_path / "memcheck-bomb.xml"
    path.write_text(ATTACKS["billion laughs"])
    assert main(["sanitize", "import", str(path)]) == 6
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refused" in err and "Traceback" not in err


@pytest.mark.parametrize("count", ["abc", "-3", "1e3", "٣", "1_0"])
def test_a_count_that_is_not_a_whole_number_is_one_line(count: str, tmp_path: Path) -> None:
    data = (SAN / "filtered-128" / "racecheck-analysis-planted_race.xml").read_text()
    path = tmp_path / "racecheck.xml"
    path.write_text(data.replace("<count>8160</count>", f"<count>{count}</count>", 1))
    for reader in XmlReader:
        with pytest.raises(TraceFormatError, match=r"record 1: <count> .* is not a whole number"):
            parse_xml(path, "racecheck", reader=reader)


@pytest.mark.parametrize("text", ["", "   \n", '<?xml version="1.0" encoding="utf-8"?>\n'])
def test_empty_xml_is_incomplete_and_unrecognised(text: str, tmp_path: Path) -> None:
    path = tmp_path / "x.xml"
    path.write_text(text)
    for reader in XmlReader:
        p = parse_xml(path, "memcheck", reader=reader)
        assert p.incomplete and not p.recognised and p.records == 0


@pytest.mark.parametrize("text", ["# README\nhello", "<report><x/></report>", '{"runs": []}'])
def test_foreign_files_are_refused(text: str, tmp_path: Path) -> None:
    path = tmp_path / "x.xml"
    path.write_text(text)
    for reader in XmlReader:
        with pytest.raises(TraceFormatError, match="not compute-sanitizer XML"):
            parse_xml(path, "memcheck", reader=reader)


@pytest.mark.parametrize("path", LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_real_log_is_recognised_and_fully_read(path: Path) -> None:
    streamed = parse_text(path, _tool(path))
    assert streamed.recognised and streamed.unparsed == 0
    assert parse_lines(path.read_text(errors="replace").splitlines(keepends=True), _tool(path)) == streamed


def test_logs_agree_with_their_xml() -> None:
    for xml in XMLS:
        log = xml.with_suffix(".log")
        x, t = parse_xml(xml, _tool(xml)), parse_text(log, _tool(xml))
        if x.records and not t.not_printed and _tool(xml) in ("memcheck", "synccheck"):
            assert {(f.kind, f.kernel) for f in x.findings} == {(f.kind, f.kernel) for f in t.findings}, xml


def test_text_that_is_not_sanitizer_output(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parent.parent
    empty = tmp_path / "empty.log"
    empty.write_text("")
    for path in (root / "README.md", root / "pyproject.toml", empty):
        p = parse_text(path, "memcheck")
        assert not p.recognised and p.records == 0, path


def test_unknown_records_and_leaks_are_counted(tmp_path: Path) -> None:
    path = tmp_path / "memcheck.log"
    path.write_text("========= COMPUTE-SANITIZER\n"
                    "========= Leaked 1,024 bytes at 0x7f0000000000\n"  # not the pattern: unread, so counted
                    "========= Leaked 64 bytes at 0x7f0000001000\n"
                    "=========     Saved host backtrace up to driver entry point at allocation time\n"
                    "========= Malloc/Free error encountered : Double free\n"
                    "=========\n"
                    "========= LEAK SUMMARY: 1088 bytes leaked in 2 allocations\n"
                    "========= ERROR SUMMARY: 3 errors\n")
    p = parse_text(path, "memcheck")
    assert p.recognised and p.reported_errors == 3 and p.records == 1 and p.unparsed == 2
    assert [(f.kind, f.count) for f in p.findings] == [("leak", 1)]


def test_a_large_log_streams_in_bounded_memory(tmp_path: Path) -> None:
    src = (SAN / "unfiltered-1024" / "memcheck-planted_oob.log").read_text()
    banner, body = src.split("\n", 1)
    body = body.split("========= ERROR SUMMARY")[0]
    path = tmp_path / "big.log"
    with open(path, "w") as fh:
        fh.write(banner + "\n")
        for _ in range(200):
            fh.write(body)
        fh.write(f"========= ERROR SUMMARY: {200 * 37} errors\n")
    assert path.stat().st_size > 15_000_000
    tracemalloc.start()
    p = parse_text(path, "memcheck")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert p.records == 200 * 37 == p.reported_errors and p.unparsed == 0
    assert peak < 2_000_000, peak
