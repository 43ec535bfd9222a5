"use strict";
// A run page: what matters first (hazards, UNORDERED pairs, incomplete ranks, sanitizer findings,
// failure rates), then the timeline, then the rest, then the files. Everything from the verdict
// JSON the CLI wrote (GET /api/runs/{id}) and the index row (GET /api/runs/{id}/summary).
const runId = document.body.dataset.run_id;
let tl = null;

function section(title, ...kids) { return el("div", { cls: "card" }, el("h2", { text: title }), ...kids); }
function para(text, cls) { return el("p", { text, cls }); }

function side(s) {
  return el("span", { title: s.kernel, text: `${shortName(s.kernel)} [${s.range || "no range"}, stream ${s.stream}]` });
}

function hazardTable(hz, process, offset) {
  const rows = hz.listed.map((h, i) => {
    const tr = el("tr", { cls: "clickable hazard", "data-index": i, tabindex: 0, title: "click: highlight both operations in the timeline" },
      el("td", { text: h.kind + (h.may ? " (may)" : "") }),
      el("td", {}, side(h.producer)), el("td", {}, side(h.consumer)),
      el("td", { text: fmtNs(h.gap_ns) }),
      el("td", { text: h.memory ? `${h.memory.bytes.toLocaleString()} B at 0x${h.memory.address.toString(16)}` : "" }),
      el("td", { text: h.memory && h.memory.allocation ? h.memory.allocation.label : "" }));
    const pick = () => {
      document.querySelectorAll("tr.hazard.on").forEach(x => x.classList.remove("on"));
      tr.classList.add("on");
      if (tl && tl.data) tl.highlight([Object.assign({ process, offset }, h.producer), Object.assign({ process, offset }, h.consumer)]);
      const m = h.memory;
      document.getElementById("tip").textContent = m ? `memory: ${m.bytes.toLocaleString()} B at 0x${m.address.toString(16)}` +
        (m.allocation ? ` in allocation ${m.allocation.id} (${m.allocation.label}, ${m.allocation.bytes.toLocaleString()} B)` : "") : "";
    };
    tr.addEventListener("click", pick);
    tr.addEventListener("keydown", e => { if (e.key === "Enter") pick(); });
    return tr;
  });
  const t = el("table", { cls: "grid" });
  t.append(el("thead", {}, el("tr", {}, ...["kind", "producer", "consumer", "gap", "memory", "allocation"].map(h => el("th", { text: h })))));
  t.append(el("tbody", {}, ...rows));
  return t;
}

function traceMatters(v, label = "", offset = 0) {
  const out = [];
  const hz = v.hazards || {};
  const prefix = label ? `${label}: ` : "";
  if (hz.memory) {
    const c = hz.counts, n = c.RAW + c.WAR + c.WAW + c.reuse;
    out.push(section(`${prefix}hazards: ${n}`,
      para(`RAW ${c.RAW}, WAR ${c.WAR}, WAW ${c.WAW}, reuse ${c.reuse}, may ${c.may}; ordered conflicting pairs ${c.ordered}; ` +
        `${hz.kernels_with_memory} kernel(s) with memory sets, ${hz.kernels_without_memory} without` +
        (hz.unjudged_kernels ? `; ${hz.unjudged_kernels} unjudged: hazards UNKNOWN for them` : ""), hz.unjudged_kernels ? "bad" : "muted"),
      hz.listed.length ? hazardTable(hz, label, offset) : para("no hazard found", "ok")));
  } else {
    out.push(section(`${prefix}hazards: unknown`, para(hz.note || (hz.checked === false ? "not checked (--no-hazards)" :
      "the trace has no memory access sets"), "muted")));
  }
  const unordered = (v.pairs || []).filter(p => p.verdict === "unordered");
  const pc = v.pair_counts || {};
  out.push(section(`${prefix}UNORDERED pairs: ${pc.unordered ?? 0}`,
    para(Object.entries(pc).map(([k, n]) => `${k} ${n}`).join(", ") + ` (pairs: ${(v.pair_spec && v.pair_spec.mode) || v.pair_spec || "none"})`, "muted"),
    unordered.length ? table(["producer", "consumer", "streams", "gap"], unordered.slice(0, 200).map(p =>
      [p.producer, p.consumer, `${p.producer_stream} → ${p.consumer_stream}`, fmtNs(p.gap_ns)])) : null));
  for (const w of v.warnings || []) out.push(para(`warning: ${w}`, "bad"));
  return out;
}

function traceMore(v) {
  const out = [];
  if (v.streams) out.push(section("streams", table(["device", "stream", "kernels", "busy", "idle", "max gap"],
    v.streams.map(s => [s.device, s.stream, s.kernels, fmtNs(s.busy_ns), fmtNs(s.idle_ns), fmtNs(s.max_gap_ns)]))));
  if ((v.notes || []).length) out.push(section("notes", ...v.notes.map(n => para(n))));
  return out;
}

function jobMatters(v) {
  const out = [];
  if ((v.incomplete || []).length) out.push(section("JOB INCOMPLETE", ...v.incomplete.map(s => para(s, "bad"))));
  out.push(section("processes", table(["process", "ended", "outcome", "kernels"],
    v.job.processes.map(p => [p.label, p.how, p.outcome, p.kernels ?? "?"]))));
  const offsets = {};
  for (const p of v.job.processes) offsets[p.label] = p.clock_offset_ns || 0;
  for (const a of v.analyses) out.push(...traceMatters(a, a.process, offsets[a.process] || 0));
  return out;
}

function sanitizeMatters(v) {
  const findings = [];
  for (const r of v.runs) for (const f of r.findings) findings.push([r.tool, f.kind, f.kernel, f.source || "", f.count, f.message || ""]);
  return [
    section("sanitizer runs", table(["tool", "workload", "filter", "verdict", "findings", "target exit", "notes"],
      v.runs.map(r => [r.tool, r.workload, r.filter, el("span", { cls: `badge ${r.verdict === "clean" ? "ok" : "findings"}`, text: r.verdict }),
        r.findings.reduce((a, f) => a + f.count, 0), r.target_exit ?? "?", (r.notes || []).join("; ")]))),
    section(`findings: ${findings.length}`, findings.length ? table(["tool", "kind", "kernel", "source", "count", "message"], findings)
      : para("no finding", "muted")),
  ];
}

function profileMatters(v) {
  const rows = [];
  for (const t of v.targets) for (const l of t.report.launches) {
    const top = Object.entries(l.stalls || {}).sort((a, b) => b[1] - a[1]).slice(0, 3).map(([k, x]) => `${k} ${x.toFixed(2)}`).join(", ");
    const pctOf = x => x === null || x === undefined ? "?" : x.toFixed(2);
    rows.push([t.label, l.name, l.duration_ns === null ? "?" : fmtNs(l.duration_ns), pctOf(l.dram_pct), pctOf(l.occupancy_pct), top]);
  }
  return [section(`launches: ${rows.length}`, para(`clock control: ${v.clock_control ?? "unknown"}`, "muted"),
    stallChart(v.targets.flatMap(t => t.report.launches.map(l => [`${t.label}: ${shortName(l.name)}`, l.stalls || {}]))),
    table(["target", "kernel", "duration", "DRAM %", "occupancy %", "top stalls (cycles per issue)"], rows))];
}

function stallChart(bars) {
  // Warp-stall breakdown per launch: stacked bars of cycles per issued instruction, one colour per reason.
  const reasons = [...new Set(bars.flatMap(([, st]) => Object.keys(st)))]
    .filter(r => bars.some(([, st]) => (st[r] || 0) > 0.01));
  const total = Math.max(1e-9, ...bars.map(([, st]) => reasons.reduce((a, r) => a + (st[r] || 0), 0)));
  const rowH = 18, labelW = 320, legendH = 18 * Math.ceil(reasons.length / 5), w = 1100;
  const c = el("canvas", { id: "stalls", width: w, height: bars.length * rowH + legendH + 30 });
  const ctx = c.getContext("2d");
  ctx.font = "11px sans-serif"; ctx.textBaseline = "middle";
  const colour = i => `hsl(${(i * 47) % 360}, 60%, ${i % 2 ? 45 : 62}%)`;
  bars.forEach(([label, st], j) => {
    const y = j * rowH + 4;
    ctx.fillStyle = "#333"; ctx.fillText(label.length > 52 ? label.slice(0, 51) + "…" : label, 2, y + rowH / 2);
    let x = labelW;
    reasons.forEach((r, i) => {
      const dx = (st[r] || 0) / total * (w - labelW - 10);
      ctx.fillStyle = colour(i); ctx.fillRect(x, y + 2, dx, rowH - 4); x += dx;
    });
  });
  const y0 = bars.length * rowH + 14;
  reasons.forEach((r, i) => {
    const x = (i % 5) * 210, y = y0 + Math.floor(i / 5) * 18;
    ctx.fillStyle = colour(i); ctx.fillRect(x + 2, y, 12, 12);
    ctx.fillStyle = "#333"; ctx.fillText(r, x + 18, y + 6);
  });
  c.dataset.bars = String(bars.length);
  return el("div", {}, el("p", { cls: "muted", text: "warp stalls per launch (cycles per issued instruction)" }), c);
}

function campaignMatters(v) {
  // The `campaign report --json` rows; the page asks again every 5 s, so a running campaign fills in.
  const cells = v.cells || [];
  const done = cells.reduce((a, c) => a + c.trials, 0), target = cells.reduce((a, c) => a + (c.target || 0), 0);
  const rows = cells.map(c => [c.cell, `${c.trials}/${c.target ?? "?"}`,
    el("span", { cls: `badge ${c.failures ? "findings" : c.trials ? "ok" : "unknown"}`, text: String(c.failures) }),
    c.rate === undefined ? "no trials" : c.rate.toFixed(4),
    c.ci95 ? `${c.ci95[0].toFixed(4)} – ${c.ci95[1].toFixed(4)}` : "", c.p_holm === undefined || c.p_holm === null ? "" : c.p_holm.toPrecision(3),
    c.crashed || 0, c.sprt || ""]);
  return [section(`campaign ${v.campaign || ""}`,
    para(`${done.toLocaleString()} of ${target.toLocaleString()} trials` + (v.baseline ? ` · baseline ${v.baseline}` : "") +
      (v.gpu ? ` · ${v.gpu}` : "") + ` · updated ${new Date().toLocaleTimeString()}`, "muted"),
    el("progress", { max: Math.max(target, 1), value: done }),
    table(["cell", "trials", "failures", "rate", "95% interval", "p (Holm) vs baseline", "crashed", "SPRT"], rows),
    (v.crashes || []).length ? para(`${v.crashes.length} crash(es) recorded`, "bad") : null)];
}

async function main() {
  let summary;
  try {
    const s = await api(`/api/runs/${runId}/summary`);  // {schema, kind: "run-summary", run: the index row, files}
    summary = { ...s.run, files: s.files };
  } catch (e) { showError(e); return; }
  document.getElementById("title").textContent = summary.path;
  document.getElementById("meta").textContent = `${summary.kind} · ${summary.status} · ${fmtTime(summary.created)}` +
    (summary.device ? ` · ${summary.device}` : "") + (summary.command ? ` · ${summary.command}` : "");
  files(summary);
  let v;
  try { v = await api(`/api/runs/${runId}`); } catch (e) { showError(e); }
  const matters = document.getElementById("matters"), more = document.getElementById("more");
  if (v) {
    if (summary.kind === "trace") { matters.replaceChildren(...traceMatters(v)); more.replaceChildren(...traceMore(v)); }
    if (summary.kind === "job") matters.replaceChildren(...jobMatters(v));
    if (summary.kind === "sanitize") matters.replaceChildren(...sanitizeMatters(v));
    if (summary.kind === "profile") matters.replaceChildren(...profileMatters(v));
    if (summary.kind === "campaign") { matters.replaceChildren(...campaignMatters(v)); setTimeout(main, 5000); }
  }
  if ((summary.kind === "trace" || summary.kind === "job") && !tl) startTimeline();
  document.body.dataset.loaded = "1";
}

function startTimeline() {
  document.getElementById("tl").hidden = false;
  tl = new Timeline(document.getElementById("timeline"), runId, t => { document.getElementById("tlinfo").textContent = t; });
  document.getElementById("tlinfo").textContent = "loading the timeline (a big trace opened for the first time takes a while)…";
  tl.load().catch(e => { document.getElementById("tlinfo").textContent = `timeline: ${e.message}`; });
  const find = () => {
    const q = document.getElementById("search").value;
    if (!q) return;
    tl.search(q).then(r => { document.getElementById("found").textContent =
      `${r.count.toLocaleString()} match(es)` + (r.count > r.hits.length ? ` (first ${r.hits.length} marked)` : ""); })
      .catch(e => { document.getElementById("found").textContent = e.message; });
  };
  document.getElementById("find").addEventListener("click", find);
  document.getElementById("search").addEventListener("keydown", e => { if (e.key === "Enter") find(); });
  document.getElementById("zoomin").addEventListener("click", () => tl.zoom(0.5));
  document.getElementById("zoomout").addEventListener("click", () => tl.zoom(2));
  document.getElementById("reset").addEventListener("click", () => tl.reset());
}

function files(summary) {
  const ul = document.getElementById("files");
  const items = summary.files.map(f => el("li", {}, el("a", { href: `/api/runs/${runId}/files/${f.name.split("/").map(encodeURIComponent).join("/")}`,
    text: f.name }), ` ${f.bytes.toLocaleString()} B`));
  if (summary.kind === "trace" || summary.kind === "job")
    items.unshift(el("li", {}, el("a", { href: `/api/runs/${runId}/perfetto`, text: "Perfetto JSON" }), " (open in ui.perfetto.dev)"));
  ul.replaceChildren(...items);
}

function showError(e) {
  const p = document.getElementById("error");
  p.hidden = false; p.textContent = e.message;
  document.body.dataset.loaded = "1";
}

main();
