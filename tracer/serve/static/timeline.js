"use strict";
// A canvas timeline: one lane per (rank,) device and stream plus NVTX lanes per thread; zoom (wheel,
// +/-), pan (drag), search, highlight of hazard pairs. What is drawn comes from
// /api/runs/{id}/timeline?start=&end=&max= (level of detail: bins when the window holds more than
// max operations), asked again after each zoom or pan.
class Timeline {
  constructor(canvas, runId, info) {
    this.c = canvas; this.ctx = canvas.getContext("2d"); this.runId = runId; this.info = info;
    this.labelW = 210; this.laneH = 22; this.nvtxH = 14; this.axisH = 22;
    this.data = null; this.view = null; this.span = 0; this.marks = []; this.hits = []; this.pending = 0;
    this.drag = null; this.hover = null; this.lanesByKey = new Map();
    this.wire();
  }

  async load(start, end) {
    const max = Math.max(500, Math.min(20000, Math.floor(this.plotW() * Math.max(1, this.laneCount()) / 2)));
    const p = new URLSearchParams({ max });
    if (start !== undefined) { p.set("start", Math.floor(start)); p.set("end", Math.ceil(end)); }
    const ticket = ++this.pending;
    const d = await api(`/api/runs/${this.runId}/timeline?${p}`);
    if (ticket !== this.pending) return;  // a newer view was asked for meanwhile
    this.data = d; this.span = d.span;
    if (!this.view) this.view = [d.start, d.end];
    this.lanesByKey = new Map(d.lanes.map((l, i) => [`${l.process}|${l.stream}|${l.kind}`, i]));
    this.resize(); this.draw();
    if (this.c.dataset.paintMs === undefined) this.c.dataset.paintMs = String(Math.round(performance.now()));
  }

  laneCount() { return this.data ? this.data.lanes.length : 1; }
  plotW() { return (this.c.clientWidth || 1200) - this.labelW - 8; }
  laneY(i) {
    let y = this.axisH;
    for (let j = 0; j < i; j++) y += this.data.lanes[j].kind === "nvtx" ? this.nvtxH : this.laneH;
    return y;
  }

  resize() {
    const dpr = window.devicePixelRatio || 1;
    const h = this.laneY(this.laneCount()) + 6;
    const w = this.c.parentElement.clientWidth || 1200;
    this.c.style.width = `${w}px`; this.c.style.height = `${h}px`;
    this.c.width = Math.floor(w * dpr); this.c.height = Math.floor(h * dpr);
    this.ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  }

  x(t) { const [a, b] = this.view; return this.labelW + (t - a) / (b - a) * this.plotW(); }
  t(x) { const [a, b] = this.view; return a + (x - this.labelW) / this.plotW() * (b - a); }

  color(nameId) {
    const name = this.data.names[nameId] || "";
    let h = 0;
    for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) >>> 0;
    return `hsl(${h % 360}, 55%, 55%)`;
  }

  draw() {
    const ctx = this.ctx, d = this.data;
    const W = this.c.clientWidth, H = this.c.clientHeight;
    ctx.clearRect(0, 0, W, H);
    ctx.font = "11px sans-serif"; ctx.textBaseline = "middle";
    this.drawAxis(W);
    d.lanes.forEach((l, i) => {
      const y = this.laneY(i), h = l.kind === "nvtx" ? this.nvtxH : this.laneH;
      ctx.fillStyle = i % 2 ? "#f6f7f9" : "#fff"; ctx.fillRect(0, y, W, h);
      ctx.fillStyle = "#333"; ctx.fillText(this.clip(l.label, this.labelW - 8), 4, y + h / 2);
    });
    let drawn = 0;
    const ops = d.ops, x0 = this.labelW, x1 = W;
    ctx.save(); ctx.beginPath(); ctx.rect(x0, 0, x1 - x0, H); ctx.clip();
    for (let k = 0; k < ops.s.length; k++) {
      const xa = this.x(ops.s[k]), xb = this.x(ops.e[k]);
      if (xb < x0 || xa > x1) continue;
      const lane = d.lanes[ops.lane[k]], y = this.laneY(ops.lane[k]);
      const h = lane.kind === "nvtx" ? this.nvtxH : this.laneH;
      ctx.fillStyle = this.color(ops.name[k]);
      ctx.globalAlpha = ops.n[k] > 1 ? 0.65 : 1;
      ctx.fillRect(xa, y + 2, Math.max(1, xb - xa), h - 4);
      drawn++;
      if (ops.n[k] === 1 && xb - xa > 40) {
        ctx.globalAlpha = 1; ctx.fillStyle = "#111";
        ctx.fillText(this.clip(shortName(d.names[ops.name[k]] || ""), xb - xa - 4), xa + 2, y + h / 2);
      }
    }
    ctx.globalAlpha = 1;
    this.drawMarks(ctx);
    ctx.restore();
    this.c.dataset.drawn = String(drawn);
    this.c.dataset.items = String(ops.s.length);
    this.info(`${d.total.toLocaleString()} operation(s) in view, ${drawn.toLocaleString()} drawn` +
      (d.aggregated ? " (binned: zoom in for single operations)" : "") +
      ` · ${fmtNs(this.view[0])} – ${fmtNs(this.view[1])} of ${fmtNs(this.span)}`);
  }

  drawAxis(W) {
    const ctx = this.ctx, [a, b] = this.view, n = 8;
    ctx.fillStyle = "#555";
    for (let i = 0; i <= n; i++) {
      const t = a + (b - a) * i / n, x = this.x(t);
      ctx.fillRect(x, this.axisH - 5, 1, 5);
      if (i < n) ctx.fillText(fmtNs(t), x + 2, 9);
    }
    ctx.fillRect(this.labelW, this.axisH - 1, W - this.labelW, 1);
  }

  drawMarks(ctx) {
    for (const m of [...this.hits, ...this.marks]) {
      if (m.lane === undefined || m.lane < 0) continue;
      const y = this.laneY(m.lane), h = this.data.lanes[m.lane].kind === "nvtx" ? this.nvtxH : this.laneH;
      const xa = this.x(m.s), xb = Math.max(xa + 4, this.x(m.e));
      ctx.strokeStyle = m.color; ctx.lineWidth = 3; ctx.strokeRect(xa - 1, y, xb - xa + 2, h);
    }
    if (this.marks.length === 2 && this.marks.every(m => m.lane >= 0)) {
      const [p, c] = this.marks;
      ctx.strokeStyle = this.marks[0].color; ctx.lineWidth = 2; ctx.beginPath();
      ctx.moveTo(this.x(p.e), this.laneY(p.lane) + this.laneH / 2);
      ctx.lineTo(this.x(c.s), this.laneY(c.lane) + this.laneH / 2); ctx.stroke();
    }
  }

  clip(s, px) {
    const n = Math.max(0, Math.floor(px / 6));
    return s.length > n ? s.slice(0, Math.max(0, n - 1)) + "…" : s;
  }

  setView(a, b) {
    const min = 100;  // ns
    if (b - a < min) { const m = (a + b) / 2; a = m - min / 2; b = m + min / 2; }
    this.view = [a, b]; this.draw();
    clearTimeout(this.reloadTimer);
    this.reloadTimer = setTimeout(() => this.load(a, b).catch(e => this.info(`error: ${e.message}`)), 120);
  }

  zoom(factor, atX) {
    const [a, b] = this.view, t = atX === undefined ? (a + b) / 2 : this.t(atX);
    this.setView(t - (t - a) * factor, t + (b - t) * factor);
  }

  reset() { this.setView(0, this.span); }

  laneOf(process, stream, kind = "stream") {
    const i = this.lanesByKey.get(`${process || ""}|${stream}|${kind}`);
    return i === undefined ? -1 : i;
  }

  // A hazard or pair: both operations outlined (and joined), the view around them.
  highlight(sides, color = "#d0008f") {
    const origin = this.data.origin;
    this.marks = sides.map(s => ({ lane: this.laneOf(s.process, s.stream), s: s.start_ns + (s.offset || 0) - origin,
                                   e: s.end_ns + (s.offset || 0) - origin, color }));
    const lo = Math.min(...this.marks.map(m => m.s)), hi = Math.max(...this.marks.map(m => m.e));
    const pad = Math.max((hi - lo) * 0.5, 2000);
    this.c.dataset.highlighted = String(this.marks.filter(m => m.lane >= 0).length);
    this.setView(lo - pad, hi + pad);
  }

  async search(q) {
    const r = await api(`/api/runs/${this.runId}/search?q=${encodeURIComponent(q)}`);
    this.hits = r.hits.map(h => ({ lane: h.lane, s: h.s, e: h.e, color: "#f0a000" }));
    this.c.dataset.found = String(r.count);
    if (r.hits.length) {
      const h = r.hits[0], pad = Math.max((h.e - h.s) * 20, 5000);
      this.setView(h.s - pad, h.e + pad);
    } else this.draw();
    return r;
  }

  opAt(x, y) {
    const d = this.data;
    let lane = -1;
    for (let i = 0; i < d.lanes.length; i++) {
      const y0 = this.laneY(i), h = d.lanes[i].kind === "nvtx" ? this.nvtxH : this.laneH;
      if (y >= y0 && y < y0 + h) { lane = i; break; }
    }
    if (lane < 0) return null;
    const t = this.t(x), tol = (this.view[1] - this.view[0]) / this.plotW() * 2;
    for (let k = 0; k < d.ops.s.length; k++) {
      if (d.ops.lane[k] === lane && d.ops.s[k] - tol <= t && t <= d.ops.e[k] + tol) return k;
    }
    return null;
  }

  wire() {
    const c = this.c;
    c.addEventListener("wheel", e => { e.preventDefault(); this.zoom(e.deltaY > 0 ? 1.25 : 0.8, e.offsetX); }, { passive: false });
    c.addEventListener("mousedown", e => { this.drag = { x: e.offsetX, view: this.view.slice() }; });
    window.addEventListener("mouseup", () => { this.drag = null; });
    c.addEventListener("mousemove", e => {
      if (this.drag) {
        const [a, b] = this.drag.view, dt = (e.offsetX - this.drag.x) / this.plotW() * (b - a);
        this.view = [a - dt, b - dt]; this.draw();
        clearTimeout(this.reloadTimer);
        this.reloadTimer = setTimeout(() => this.load(this.view[0], this.view[1]).catch(() => {}), 150);
        return;
      }
      const k = this.opAt(e.offsetX, e.offsetY);
      const tip = document.getElementById("tip");
      if (k === null) { tip.textContent = ""; return; }
      const o = this.data.ops, name = this.data.names[o.name[k]] || "";
      tip.textContent = o.n[k] > 1 ? `${o.n[k]} operations from ${fmtNs(o.s[k])} (first: ${name})`
        : `${name} · ${fmtNs(o.e[k] - o.s[k])} at ${fmtNs(o.s[k])}` + (o.corr[k] >= 0 ? ` · correlation ${o.corr[k]}` : "");
    });
    c.addEventListener("dblclick", () => this.reset());
    window.addEventListener("resize", () => { if (this.data) { this.resize(); this.draw(); } });
  }
}
