"use strict";
// Jobs: submit an allow-listed action (the server builds the command), watch progress and the log
// tail, cancel. Polls while a job is queued or running.
let offer = null, watching = null;

function fillTargets() {
  const action = document.getElementById("action").value;
  const names = action === "campaign" ? offer.campaigns : action === "command" ? offer.commands : offer.workloads;
  document.getElementById("target").replaceChildren(...names.map(n => el("option", { value: n, text: n })));
  document.getElementById("device").disabled = action !== "run";
  if (action !== "run") document.getElementById("device").value = "gpu";
  else if (offer.gpus.length === 0) document.getElementById("device").value = "cpu";
  document.getElementById("memory").disabled = action !== "trace";
}

async function submit(e) {
  e.preventDefault();
  const body = { action: document.getElementById("action").value, target: document.getElementById("target").value };
  if (body.action === "run") body.device = document.getElementById("device").value;
  const shape = document.getElementById("shape").value.trim(), steps = document.getElementById("steps").value;
  if (shape) body.shape = shape;
  if (steps) body.steps = Number(steps);
  if (body.action === "trace" && document.getElementById("memory").checked) body.memory = true;
  const msg = document.getElementById("submitmsg");
  try {
    const job = await api("/api/jobs", { method: "POST", json: body });
    msg.textContent = `job ${job.id} queued`;
    watching = job.id;
    refresh();
  } catch (err) { msg.textContent = `refused: ${err.message}`; }
}

async function upload(e) {
  // The file goes up as the request body; the server keeps it (size-limited) and imports it in a job.
  e.preventDefault();
  const file = document.getElementById("tracefile").files[0], msg = document.getElementById("submitmsg");
  if (!file) { msg.textContent = "pick a trace file first"; return; }
  try {
    const job = await api(`/api/import?name=${encodeURIComponent(file.name)}`, { method: "POST", body: file,
      headers: { "Content-Type": "application/octet-stream" } });
    msg.textContent = `job ${job.id} queued (import ${file.name})`;
    watching = job.id;
    refresh();
  } catch (err) { msg.textContent = `refused: ${err.message}`; }
}

async function cancel(id) {
  try { await api(`/api/jobs/${id}`, { method: "DELETE" }); } catch (err) { document.getElementById("submitmsg").textContent = err.message; }
  refresh();
}

function jobRow(j) {
  const live = j.state === "queued" || j.state === "running";
  return el("tr", { "data-id": j.id, "data-state": j.state, cls: "clickable", onclick: () => { watching = j.id; refresh(); } },
    el("td", { text: j.id }), el("td", {}, el("span", { cls: `badge ${j.state}`, text: j.state })),
    el("td", { text: `${j.action} ${j.target}` + (j.device === "cpu" ? " (cpu)" : "") }),
    el("td", { text: j.gpu ?? "" }), el("td", { text: j.elapsed_s === null ? "" : `${j.elapsed_s} s` }),
    el("td", { cls: "cmd", text: j.note || j.progress || (j.exit !== null ? `exit ${j.exit}` : "") }),
    el("td", { text: j.output || "" }),
    el("td", {}, live && offer.enabled ? el("button", { cls: "cancel", text: "cancel",
      onclick: e => { e.stopPropagation(); cancel(j.id); } }) : null));
}

async function refresh() {
  const data = await api("/api/jobs");
  document.querySelector("#jobs tbody").replaceChildren(...data.jobs.map(jobRow));
  if (watching === null && data.jobs.length) watching = data.jobs[0].id;  // the latest job's log by default
  document.getElementById("log").hidden = watching === null;
  if (watching !== null) {
    const j = await api(`/api/jobs/${watching}`);
    document.getElementById("logtitle").textContent = `job ${j.id}: ${j.state}` + (j.exit !== null ? ` (exit ${j.exit})` : "") +
      ` · ${j.argv.slice(j.argv.indexOf("tracer") >= 0 ? j.argv.indexOf("tracer") : 0).join(" ")}`;
    document.getElementById("log").textContent = (j.log_tail || []).join("\n");
  }
  document.body.dataset.loaded = "1";
  const live = data.jobs.some(j => j.state === "queued" || j.state === "running");
  clearTimeout(refresh.timer);
  refresh.timer = setTimeout(() => refresh().catch(() => {}), live ? 500 : 3000);
}

api("/api/session").then(s => {
  offer = s.jobs;
  document.getElementById("action").replaceChildren(...offer.actions.map(a => el("option", { value: a, text: a })));
  document.getElementById("action").addEventListener("change", fillTargets);
  fillTargets();
  document.getElementById("jobform").addEventListener("submit", submit);
  document.getElementById("importform").addEventListener("submit", upload);
  if (!offer.enabled) { document.getElementById("go").disabled = true; document.getElementById("importgo").disabled = true; document.getElementById("submitmsg").textContent = "this server is read-only"; }
  if (!offer.gpus.length) {
    document.getElementById("submitmsg").textContent = "no GPU on this server: CPU jobs only (run, device cpu)";
    document.getElementById("device").value = "cpu";
  }
  refresh().catch(e => { document.getElementById("submitmsg").textContent = e.message; });
});
