"""The HTML pages: static shells (every value escaped) whose scripts, shipped in tracer/serve/static,
fill them from the JSON API. No inline script or style (the CSP forbids them)."""
from __future__ import annotations

from html import escape
from typing import Any

from starlette.responses import HTMLResponse

TITLES = {"list": "runs", "run": "run", "jobs": "jobs", "diff": "diff"}

BODIES = {
    "list": """
<section class="bar">
  <input id="q" type="search" placeholder="filter: path, command, tag, device" aria-label="text filter">
  <select id="kind" aria-label="kind"><option value="">every kind</option><option>trace</option><option>job</option>
    <option>sanitize</option><option>profile</option><option>campaign</option></select>
  <select id="status" aria-label="status"><option value="">every status</option><option>findings</option>
    <option>incomplete</option><option>unknown</option><option>error</option><option>ok</option></select>
  <span id="count" class="muted"></span>
  <span class="grow"></span>
  <button id="prev">&larr;</button><span id="pageno"></span><button id="next">&rarr;</button>
</section>
<table id="runs" class="grid">
  <thead><tr><th data-sort="id">id</th><th data-sort="path">run</th><th data-sort="kind">kind</th>
  <th data-sort="status">status</th><th>what matters</th><th>command</th><th>device</th><th data-sort="created">time</th>
  <th>compare</th></tr></thead>
  <tbody></tbody>
</table>
<p id="diffhint" class="muted" hidden>tick two runs to compare them: <a id="difflink" href="#">diff</a></p>
<script src="/static/runs.js"></script>""",
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
<section><h2>files</h2><ul id="files"></ul></section>
<script src="/static/timeline.js"></script>
<script src="/static/run.js"></script>""",
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
<h3 id="logtitle"></h3><pre id="log" hidden></pre></section>
<script src="/static/jobs.js"></script>""",
    "diff": """
<section id="head"><h1 id="title">diff</h1><p id="meta" class="muted"></p><p id="error" class="bad" hidden></p></section>
<section id="diffbody"></section>
<script src="/static/diff.js"></script>""",
}


def render(name: str, csrf: str, params: dict[str, Any]) -> HTMLResponse:
    data = " ".join(f'data-{escape(str(k))}="{escape(str(v))}"' for k, v in params.items())
    html = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="csrf" content="{escape(csrf)}">
<title>tracer · {escape(TITLES[name])}</title>
<link rel="stylesheet" href="/static/style.css"><link rel="icon" href="data:,">
</head><body id="page" data-page="{escape(name)}" {data}>
<nav><a href="/" class="brand">tracer</a><a href="/">runs</a><a href="/jobs">jobs</a><span id="status" class="muted"></span></nav>
<script src="/static/common.js"></script>
<main>{BODIES[name]}</main>
</body></html>"""
    return HTMLResponse(html)
