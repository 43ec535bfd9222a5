"""The HTML pages: shells (every value escaped) whose scripts, shipped in tracer/serve/static and
loaded deferred, fill them from the JSON API; the run list comes with its first page of rows
already in the HTML (no second round trip before the rows show). No inline script or style (the
CSP forbids them)."""
from __future__ import annotations

import hashlib
import json
import time
from html import escape
from pathlib import Path
from typing import Any

STATIC = Path(__file__).parent / "static"

TITLES = {"list": "runs", "run": "run", "jobs": "jobs", "diff": "diff"}

BODIES = {
    "list": """
<section class="bar">
  <input id="q" type="search" placeholder="filter: path, command, tag, device" aria-label="text filter">
  <select id="kind" aria-label="kind"><option value="">every kind</option><option>trace</option><option>job</option>
    <option>sanitize</option><option>profile</option><option>campaign</option></select>
  <select id="statusf" aria-label="status"><option value="">every status</option><option>findings</option>
    <option>incomplete</option><option>unknown</option><option>error</option><option>ok</option></select>
  <span id="count" class="muted"></span>
  <span class="grow"></span>
  <button id="prev">&larr;</button><span id="pageno"></span><button id="next">&rarr;</button>
</section>
<table id="runs" class="grid" data-state="{state}">
  <thead><tr><th data-sort="id">id</th><th data-sort="path">run</th><th data-sort="kind">kind</th>
  <th data-sort="status">status</th><th>what matters</th><th>command</th><th>device</th><th data-sort="created">time</th>
  <th>compare</th></tr></thead>
  <tbody>{rows}</tbody>
</table>
<p id="diffhint" class="muted" hidden>tick two runs to compare them: <a id="difflink" href="#">diff</a></p>""",
    "run": """
<section id="head"><h1 id="title">run</h1><p id="meta" class="muted"></p><p id="error" class="bad" hidden></p></section>
<section id="matters"></section>
<section id="tl" hidden>
  <h2>timeline</h2>
  <div class="bar">
    <input id="search" type="search" placeholder="search a kernel or NVTX range" aria-label="search">
    <button id="find">find</button><span id="found" class="muted"></span><span class="grow"></span>
    <button id="zoomin">+</button><button id="zoomout">&minus;</button><button id="reset">whole trace</button>
  </div>
  <div id="tlwrap"><canvas id="timeline" width="1200" height="300"></canvas></div>
  <p id="tlinfo" class="muted"></p><p id="tip" class="muted"></p>
</section>
<section id="more"></section>
<section><h2>files</h2><ul id="files"></ul></section>""",
    "jobs": """
<section id="submit">
  <h2>submit a job</h2>
  <form id="jobform" class="bar">
    <select id="action" aria-label="action"></select>
    <select id="target" aria-label="target"></select>
    <select id="device" aria-label="device"><option value="gpu">gpu</option><option value="cpu">cpu</option></select>
    <input id="shape" placeholder="shape, e.g. 256x256x256" size="22" aria-label="shape">
    <input id="steps" type="number" min="1" max="1000" placeholder="steps" aria-label="steps">
    <label><input id="memory" type="checkbox"> memory</label>
    <button id="go" type="submit">submit</button>
  </form>
  <p id="submitmsg" class="muted"></p>
  <form id="importform" class="bar">
    <label>import a trace (.sqlite, .json, .json.gz): <input id="tracefile" type="file" accept=".sqlite,.json,.gz"></label>
    <button id="importgo" type="submit">import</button>
  </form>
</section>
<section><h2>jobs</h2>
<table id="jobs" class="grid"><thead><tr><th>id</th><th>state</th><th>job</th><th>gpu</th><th>elapsed</th>
<th>progress</th><th>output</th><th></th></tr></thead><tbody></tbody></table>
<h3 id="logtitle"></h3><pre id="log" hidden></pre></section>""",
    "diff": """
<section id="head"><h1 id="title">diff</h1><p id="meta" class="muted"></p><p id="error" class="bad" hidden></p></section>
<section id="diffbody"></section>""",
}


SCRIPTS = {"list": ("runs.js",), "run": ("timeline.js", "run.js"), "jobs": ("jobs.js",), "diff": ("diff.js",)}


def _version() -> str:
    """Of the shipped static files: their URLs carry it, so browsers may keep them (immutable)."""
    h = hashlib.sha256()
    for f in sorted(STATIC.iterdir()):
        h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()[:12]


VERSION = _version()


def render(name: str, csrf: str, params: dict[str, Any], listing: dict[str, Any] | None = None) -> bytes:
    """The page `name`; for the run list, `listing` (`GET /api/runs`' answer and its query) fills
    the first page of rows."""
    data = " ".join(f'data-{escape(str(k))}="{escape(str(v))}"' for k, v in params.items())
    scripts = "".join(f'<script defer src="/static/{f}?v={VERSION}"></script>' for f in ("common.js", *SCRIPTS[name]))
    body = BODIES[name]
    if name == "list":
        body = body.replace("{rows}", "".join(_row(r) for r in (listing or {}).get("runs", [])))
        body = body.replace("{state}", escape(json.dumps(listing.get("state", {})) if listing else ""))
    html = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="csrf" content="{escape(csrf)}">
<title>tracer · {escape(TITLES[name])}</title>
<link rel="stylesheet" href="/static/style.css?v={VERSION}"><link rel="icon" href="data:,">{scripts}
</head><body id="page" data-page="{escape(name)}" {data}>
<nav><a href="/" class="brand">tracer</a><a href="/">runs</a><a href="/jobs">jobs</a><span id="status" class="muted"></span></nav>
<main>{body}</main>
</body></html>"""
    return html.encode()


def _row(r: dict[str, Any]) -> str:
    """One row of the run list, as runs.js draws it (every value escaped)."""
    def e(v: Any) -> str:
        return escape(str(v))

    created = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r["created"])) if r["created"] else ""
    return (f'<tr data-id="{e(r["id"])}" class="st-{e(r["status"])}"><td>{e(r["id"])}</td>'
            f'<td><a href="/runs/{e(r["id"])}">{e(r["path"])}</a></td><td>{e(r["kind"])}</td>'
            f'<td><span class="badge {e(r["status"])}">{e(r["status"])}</span></td><td>{e(r["headline"])}</td>'
            f'<td class="cmd" title="{e(r["command"])}">{e(r["command"])}</td><td>{e(r["device"])}</td><td>{created}</td>'
            f'<td><input type="checkbox" aria-label="compare {e(r["id"])}" data-pick="{e(r["id"])}"></td></tr>')
