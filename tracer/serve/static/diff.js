"use strict";
// Two runs compared: GET /api/diff?a=&b= (tracer.app.diff's Diff.to_json, as `tracer diff --json`).
const q = new URLSearchParams(location.search);

function cell(v) {
  if (v === null || v === undefined) return "";
  if (typeof v === "number") return Number.isInteger(v) ? v.toLocaleString() : v.toPrecision(4);
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

function rowsTable(rows) {
  if (!rows || !rows.length) return el("p", { cls: "muted", text: "none" });
  const keys = [...new Set(rows.flatMap(r => Object.keys(r)))];
  return table(keys, rows.map(r => keys.map(k => {
    const td = cell(r[k]);
    if (typeof r[k] === "string" && r[k].length > 60 && (k === "name" || k.includes("kernel")))
      return el("span", { title: r[k], text: shortName(r[k]) });
    return k === "status" || k === "change" ? el("span", { cls: `badge ${/new|slower|worse|appeared/.test(td) ? "findings" : /gone|faster|fixed/.test(td) ? "ok" : ""}`, text: td }) : td;
  })));
}

function block(title, part) {
  if (part === null || part === undefined) return null;
  const card = el("div", { cls: "card" }, el("h2", { text: title }));
  if (Array.isArray(part)) card.append(rowsTable(part));
  else {
    const flat = Object.entries(part).filter(([, v]) => !Array.isArray(v));
    if (flat.length) card.append(el("p", { cls: "muted", text: flat.map(([k, v]) => `${k}: ${cell(v)}`).join(" · ") }));
    for (const [k, v] of Object.entries(part)) if (Array.isArray(v)) card.append(el("h3", { text: k }), rowsTable(v));
  }
  return card;
}

async function main() {
  const a = q.get("a"), b = q.get("b");
  try {
    const [sa, sb] = (await Promise.all([api(`/api/runs/${encodeURIComponent(a)}/summary`),
                                         api(`/api/runs/${encodeURIComponent(b)}/summary`)])).map(s => s.run);
    document.getElementById("title").textContent = `${sa.path} → ${sb.path}`;
    const d = await api(`/api/diff?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`);
    document.getElementById("meta").textContent = `${d.compared} · ` + (d.no_change ? "no change the diff can show" : "changes below") +
      ` · matching: ${d.matching}` + (d.same_input ? " · the same input" : "");
    const sides = table(["side", "path", "complete", "size", "steps", "notes"], [["A", d.a.path, d.a.complete ? "yes" : "NO", d.a.size, d.a.steps, d.a.notes.join("; ")],
      ["B", d.b.path, d.b.complete ? "yes" : "NO", d.b.size, d.b.steps, d.b.notes.join("; ")]]);
    document.getElementById("diffbody").replaceChildren(el("div", { cls: "card" }, el("h2", { text: "sides" }), sides),
      ...[block("hazards", d.hazards), block("pairs", d.pairs), block("sanitizer findings", d.findings), block("campaign cells", d.cells),
        block("timing", d.timing), d.notes.length ? block("notes", d.notes.map(n => ({ note: n }))) : null].filter(Boolean));
  } catch (e) {
    const p = document.getElementById("error"); p.hidden = false; p.textContent = e.message;
  }
  document.body.dataset.loaded = "1";
}
main();
