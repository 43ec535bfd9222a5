"use strict";
// The run list: filter (kind, status, text), sort by a column, pages of 50; tick two runs to diff.
// The server sends the first page of rows in the HTML (data-state says for which query): shown
// before this script runs; later pages come from GET /api/runs.
const state = { kind: "", status: "", q: "", sort: "created", order: "desc", offset: 0, limit: 50, picked: [] };
let session = null;

async function load() {
  const p = new URLSearchParams({ sort: state.sort, order: state.order, offset: state.offset, limit: state.limit });
  for (const k of ["kind", "status", "q"]) if (state[k]) p.set(k, state[k]);
  const t0 = performance.now();
  const data = await api(`/api/runs?${p}`);
  document.querySelector("#runs tbody").replaceChildren(...data.runs.map(row));
  shown(data.total, ` (${Math.round(performance.now() - t0)} ms)`);
}

function shown(total, took) {
  const last = Math.min(state.offset + state.limit, total);
  document.getElementById("count").textContent =
    `${total} run(s)` + (total ? `, ${state.offset + 1}-${last} shown` : "") + took;
  document.getElementById("pageno").textContent = ` ${Math.floor(state.offset / state.limit) + 1} `;
  document.getElementById("prev").disabled = state.offset === 0;
  document.getElementById("next").disabled = last >= total;
  if (!document.body.dataset.loaded) document.body.dataset.loadedMs = String(Math.round(performance.now()));
  document.body.dataset.loaded = "1";
}

function row(r) {
  const pick = el("input", { type: "checkbox", "aria-label": `compare ${r.id}`, "data-pick": r.id });
  return el("tr", { "data-id": r.id, cls: `st-${r.status}` },
    el("td", { text: r.id }),
    el("td", {}, el("a", { href: `/runs/${r.id}`, text: r.path })),
    el("td", { text: r.kind }),
    el("td", {}, el("span", { cls: `badge ${r.status}`, text: r.status })),
    el("td", { text: r.headline }),
    el("td", { cls: "cmd", text: r.command, title: r.command }),
    el("td", { text: r.device }),
    el("td", { text: fmtTime(r.created) }),
    el("td", {}, pick));
}

function pickRun(id, on) {
  state.picked = state.picked.filter(x => x !== id);
  if (on) state.picked.push(id);
  const hint = document.getElementById("diffhint");
  hint.hidden = !(session && session.diff && state.picked.length === 2);
  if (!hint.hidden) document.getElementById("difflink").href = `/diff?a=${state.picked[0]}&b=${state.picked[1]}`;
}

function debounce(fn, ms) { let t; return (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); }; }

function wire() {
  const reload = () => { state.offset = 0; load().catch(showError); };
  document.querySelector("#runs tbody").addEventListener("change", e => {
    if (e.target.dataset.pick) pickRun(Number(e.target.dataset.pick), e.target.checked);
  });
  document.getElementById("q").addEventListener("input", debounce(e => { state.q = e.target.value; reload(); }, 200));
  document.getElementById("kind").addEventListener("change", e => { state.kind = e.target.value; reload(); });
  document.getElementById("statusf").addEventListener("change", e => { state.status = e.target.value; reload(); });
  document.getElementById("prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - state.limit); load().catch(showError); });
  document.getElementById("next").addEventListener("click", () => { state.offset += state.limit; load().catch(showError); });
  for (const th of document.querySelectorAll("th[data-sort]")) {
    th.addEventListener("click", () => {
      const k = th.dataset.sort;
      state.order = state.sort === k && state.order === "desc" ? "asc" : "desc";
      state.sort = k;
      reload();
    });
  }
}

function showError(e) { document.getElementById("count").textContent = `error: ${e.message}`; }

function served() {
  // The rows the server rendered, and for which query: no request needed to show them.
  const text = document.getElementById("runs").dataset.state;
  if (!text) return false;
  const given = JSON.parse(text);
  Object.assign(state, { kind: given.kind || "", status: given.status || "", q: given.text || "", sort: given.sort,
                         order: given.order, offset: given.offset, limit: given.limit });
  for (const [k, id] of [["kind", "kind"], ["status", "statusf"], ["q", "q"]]) document.getElementById(id).value = state[k];
  shown(given.total, "");
  return true;
}

wire();
api("/api/session").then(s => { session = s; document.getElementById("status").textContent =
  s.index && s.index.runs !== undefined ? `${s.index.runs} runs indexed` : ""; }).catch(() => {});
if (!served()) load().catch(showError);
