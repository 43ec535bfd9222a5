"use strict";
// Shared by every page: the API with the CSRF header, and DOM building through textContent only
// (names from traces are user data: never parsed as HTML).
const CSRF = document.querySelector('meta[name="csrf"]').content;

async function api(path, opts = {}) {
  const o = Object.assign({ headers: {} }, opts);
  if (o.method && o.method !== "GET") o.headers["X-CSRF-Token"] = CSRF;
  if (o.json !== undefined) { o.body = JSON.stringify(o.json); o.headers["Content-Type"] = "application/json"; }
  const r = await fetch(path, o);
  let data = null;
  try { data = await r.json(); } catch (e) { data = { error: `HTTP ${r.status}` }; }
  if (!r.ok) throw new Error(data && data.error ? data.error : `HTTP ${r.status}`);
  return data;
}

function el(tag, attrs = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "text") e.textContent = String(v);
    else if (k === "cls") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, String(v));
  }
  for (const k of kids) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
  return e;
}

function fmtTime(unix) {
  if (!unix) return "";
  const d = new Date(unix * 1000);
  return d.toISOString().replace("T", " ").slice(0, 19);
}

function fmtNs(ns) {
  const a = Math.abs(ns);
  if (a >= 1e9) return (ns / 1e9).toFixed(3) + " s";
  if (a >= 1e6) return (ns / 1e6).toFixed(3) + " ms";
  if (a >= 1e3) return (ns / 1e3).toFixed(1) + " µs";
  return ns + " ns";
}

function table(headers, rows) {
  const t = el("table", { cls: "grid" });
  t.append(el("thead", {}, el("tr", {}, ...headers.map(h => el("th", { text: h })))));
  const b = el("tbody");
  for (const r of rows) b.append(el("tr", {}, ...r.map(c => c instanceof Node ? el("td", {}, c) : el("td", { text: c ?? "" }))));
  t.append(b);
  return t;
}

function shortName(name) {
  // A kernel's name without its template arguments and parameters (the full name stays in a title).
  let s = String(name).replace(/^void /, "");
  let out = "", depth = 0;
  for (const ch of s) {
    if (ch === "<" || ch === "(") { if (depth === 0) out += ch === "<" ? "<…>" : "(…)"; depth++; continue; }
    if (ch === ">" || ch === ")") { depth = Math.max(0, depth - 1); continue; }
    if (depth === 0) out += ch;
  }
  return out.length > 90 ? out.slice(0, 89) + "…" : out;
}
