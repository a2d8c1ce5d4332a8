// The VIZ page: kernel list, a UOp graph per rewrite step (laid out by the vendored dagre), source and disassembly, and
// a profile timeline per device. It reads one file, trace.json (tinygrad/viz/trace.py describes the format).
"use strict";
const MAX_DRAW = 1500;  // nodes laid out at most; a larger graph shows the part nearest its root
const LABEL_W = 170;    // px of the timeline's device labels
const state = { trace: null, kernel: -1, step: 0, drawn: 0, changed: 0, events: 0, error: null };
window.vizState = state;  // read by the tests (and handy in the console)
const $ = (id) => document.getElementById(id);

const fmtUs = (us) => us >= 1e6 ? (us / 1e6).toFixed(2) + " s" : us >= 1e3 ? (us / 1e3).toFixed(2) + " ms" : us.toFixed(1) + " us";
const rate = (amount, us) => us > 0 ? (amount / us / 1e3).toFixed(2) : "-";  // per us -> G per s
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);

fetch("trace.json").then((r) => { if (!r.ok) throw new Error("trace.json: HTTP " + r.status); return r.json(); }).then(init)
  .catch((e) => { state.error = String(e); $("kernels").innerHTML = `<div class="loading">could not load the trace: ${esc(e)}</div>`; });

function init(trace) {
  state.trace = trace;
  const m = trace.meta, dropped = Object.entries(m.dropped).filter(([, v]) => v).map(([k, v]) => `${v} ${k}`);
  $("meta").textContent = `${m.argv.join(" ")} · ${trace.kernels.length} entries · ${trace.events.length} runs` +
    (dropped.length ? ` · over the limits, not stored: ${dropped.join(", ")}` : "");
  $("kernels").innerHTML = trace.kernels.map((k, i) => `<div class="krow${k.kind === "group" ? " group" : ""}" data-i="${i}">
    <span>${i}</span><span>${esc(k.name)}</span><span class="t">${k.runs ? fmtUs(k.time_s * 1e6) : ""}</span>
    <span class="sub">${esc(k.device || k.kind)} · ${k.steps.length} step${k.steps.length === 1 ? "" : "s"} · ${k.runs} run${k.runs === 1 ? "" : "s"}${k.opts.length ? " · " + esc(k.opts.join(" ")) : ""}</span></div>`).join("");
  for (const row of document.querySelectorAll(".krow")) row.addEventListener("click", () => openKernel(+row.dataset.i));
  $("tab-kernels").addEventListener("click", () => showTab("kernels"));
  $("tab-profile").addEventListener("click", () => showTab("profile"));
  $("tab-schedule").addEventListener("click", () => showTab("schedule"));
  showSchedules();
  $("step").addEventListener("input", () => setStep(+$("step").value));
  $("prev").addEventListener("click", () => setStep(state.step - 1));
  $("next").addEventListener("click", () => setStep(state.step + 1));
  document.addEventListener("keydown", (e) => {
    if (e.key === "ArrowLeft") setStep(state.step - 1);
    if (e.key === "ArrowRight") setStep(state.step + 1);
  });
  setupGraphPanZoom();
  setupTimeline();
  const first = trace.kernels.findIndex((k) => k.kind === "kernel");
  if (first >= 0) openKernel(first);
}

function showTab(name) {
  for (const tab of ["kernels", "profile", "schedule"]) $("tab-" + tab).classList.toggle("active", name === tab);
  $("kernel-view").hidden = name !== "kernels";
  $("profile-view").hidden = name !== "profile";
  $("schedule-view").hidden = name !== "schedule";
  if (name === "profile") drawTimeline();
}

function showSchedules() {  // each distinct schedule that ran, most frequent first; a kernel opens on click
  const t = state.trace, counts = new Map();
  for (const s of t.schedules) { const key = s.join(","); counts.set(key, (counts.get(key) || 0) + 1); }
  const rows = [...counts.entries()].sort((a, b) => b[1] - a[1]).map(([key, n]) => {
    const items = key === "" ? [] : key.split(",").map(Number);
    return `<div class="sched"><b>${n} ×</b> ${items.length} items: ` + items.map((i) => i < 0 ? `<span class="copy">copy</span>` :
      `<a href="#" data-i="${i}">${esc(t.kernels[i].name)}</a>`).join(" → ") + "</div>";
  });
  $("schedules").innerHTML = `<p>${t.schedules.length} schedules run, ${counts.size} distinct</p>` + rows.join("");
  for (const a of document.querySelectorAll("#schedules a")) a.addEventListener("click", (e) => { e.preventDefault(); showTab("kernels"); openKernel(+a.dataset.i); });
}

// --- one kernel: its steps, graph, source and disassembly
function openKernel(i) {
  const k = state.trace.kernels[i];
  state.kernel = i;
  for (const row of document.querySelectorAll(".krow")) row.classList.toggle("sel", +row.dataset.i === i);
  const avg = k.runs ? k.time_s * 1e6 / k.runs : 0;
  $("kernel-title").textContent = `${i}: ${k.name}  ${k.device}  opts: ${k.opts.join(" ") || "none"}` +
    (k.runs ? `  ·  ${k.runs} runs, ${fmtUs(avg)} each, ${rate(k.ops, avg)} GFLOP/s, ${rate(k.mem, avg)} GB/s` : "") +
    (k.dropped_steps ? `  ·  ${k.dropped_steps} more steps not stored` : "");
  $("src").textContent = k.src || "(no source: not a kernel)";
  $("disasm").textContent = k.disasm || "(no disassembly: the backend's compiler gives none)";
  $("step").max = Math.max(k.steps.length - 1, 0);
  setStep(0);
}

function reach(root) {  // node indices reachable from root
  const seen = new Set(), stack = [root], nodes = state.trace.nodes;
  while (stack.length) {
    const n = stack.pop();
    if (seen.has(n)) continue;
    seen.add(n);
    for (const s of nodes[n][3]) if (!seen.has(s)) stack.push(s);
  }
  return seen;
}

function setStep(s) {
  const k = state.trace.kernels[state.kernel];
  if (!k || !k.steps.length) { $("step-label").textContent = "no rewrite steps recorded"; drawGraph(null, new Set()); $("matches").innerHTML = ""; return; }
  s = Math.max(0, Math.min(s, k.steps.length - 1));
  state.step = s;
  $("step").value = s;
  const st = k.steps[s];
  $("step-label").textContent = `step ${s + 1}/${k.steps.length}: ${st.name} (${st.kind}, ${st.loc}) · ${st.matches.length + st.more_matches} rewrites`;
  const before = st.before == null ? new Set() : reach(st.before);
  const after = st.after == null ? null : reach(st.after);
  const changed = new Set(after ? [...after].filter((n) => !before.has(n)) : []);
  drawGraph(after && st.after, changed);
  showMatches(st);
}

function showMatches(st) {
  const t = state.trace;
  const rows = st.matches.map((m, j) => {
    const [loc, text, ops] = t.rules[m[0]];
    const what = m[1] == null || m[2] == null ? "" : `${t.nodes[m[1]][0]} → ${t.nodes[m[2]][0]}`;
    return `<div class="match" data-j="${j}"><span class="loc" title="the rule's pattern matches ${esc(ops)}">${esc(loc)}</span> ${esc(what)}<div class="txt">${esc(text)}</div></div>`;
  });
  if (st.more_matches) rows.push(`<div class="match">... ${st.more_matches} more not stored</div>`);
  $("matches").innerHTML = rows.join("") || `<div class="match">${st.kind === "stage" ? "a pipeline stage (not a rule): changed nodes are outlined" : "no rule fired"}</div>`;
  for (const row of document.querySelectorAll(".match[data-j]")) row.addEventListener("click", () => {
    for (const r of document.querySelectorAll(".match.sel")) r.classList.remove("sel");
    row.classList.add("sel");
    const m = st.matches[+row.dataset.j];
    let first = null;
    for (const el of document.querySelectorAll("#graph .node")) {
      const hit = +el.dataset.n === m[2] || +el.dataset.n === m[1];
      el.classList.toggle("hit", hit);
      if (hit && !first) first = el;
    }
    if (first) {  // bring the rewritten node into view
      const box = $("graph").getBoundingClientRect(), r = first.getBoundingClientRect();
      pan.x += box.left + box.width / 2 - (r.left + r.width / 2); pan.y += box.top + box.height / 2 - (r.top + r.height / 2);
      applyPan();
    }
  });
}

const COLORS = { LOAD: "#cfe3ff", STORE: "#b3d0ff", INDEX: "#e4ecfa", RANGE: "#e2d4ff", END: "#e2d4ff", CONST: "#ececec", SINK: "#f4f0a0",
  DEFINE_GLOBAL: "#cdeccd", DEFINE_VAR: "#cdeccd", DEFINE_REG: "#cdeccd", DEFINE_LOCAL: "#cdeccd", REDUCE: "#ffd0d0", WMMA: "#ffc0f0" };

const isConst = (n) => state.trace.nodes[n][0] === "CONST";
const short = (s) => s.length > 30 ? s.slice(0, 29) + "…" : s;
function nodeLines(n) {  // CONST sources are folded into their user's label: fewer nodes and edges to lay out
  const [op, dtype, arg, src] = state.trace.nodes[n];
  const lines = [op, dtype];
  if (arg) lines.push(short(arg));
  const consts = src.filter(isConst).map((s) => state.trace.nodes[s][2]);
  if (consts.length && op !== "CONST") lines.push(short("const " + consts.join(", ")));
  return lines;
}

function drawGraph(root, changed) {
  const svg = $("graph"), view = svg.querySelector("g.view");
  if (view) view.remove();
  $("graph-msg").textContent = "";
  state.drawn = 0; state.changed = 0;
  if (root == null) { $("graph-msg").textContent = "no graph stored for this step (over the node limit)"; return; }
  if (typeof dagre === "undefined") { $("graph-msg").textContent = "the layout library (vendor/dagre.min.js) did not load"; return; }
  let order = [...reach(root)];
  if (order.length > MAX_DRAW) {
    $("graph-msg").textContent = `${order.length} nodes: showing the ${MAX_DRAW} nearest the root`;
    const depth = new Map([[root, 0]]), queue = [root];  // breadth-first from the root
    for (let q = 0; q < queue.length && queue.length < MAX_DRAW; q++)
      for (const s of state.trace.nodes[queue[q]][3]) if (!depth.has(s)) { depth.set(s, 0); queue.push(s); }
    order = queue.slice(0, MAX_DRAW);
  }
  order = order.filter((n) => n === root || !isConst(n));
  const shown = new Set(order);
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: "TB", nodesep: 10, ranksep: 22, marginx: 10, marginy: 10, ranker: "longest-path" });  // the fast ranker
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of order) {
    const lines = nodeLines(n);
    g.setNode(String(n), { width: Math.max(...lines.map((l) => l.length)) * 6.1 + 12, height: lines.length * 12 + 6, lines });
  }
  for (const n of order) for (const s of state.trace.nodes[n][3]) if (shown.has(s)) g.setEdge(String(s), String(n));
  dagre.layout(g);
  const NS = "http://www.w3.org/2000/svg", mk = (tag, attrs) => { const e = document.createElementNS(NS, tag); for (const a in attrs) e.setAttribute(a, attrs[a]); return e; };
  const group = mk("g", { class: "view" });
  for (const e of g.edges()) {
    const pts = g.edge(e).points.map((p) => `${p.x},${p.y}`).join(" ");
    group.appendChild(mk("polyline", { class: "edge", points: pts, "marker-end": "url(#arrow)" }));
  }
  for (const id of g.nodes()) {
    const nd = g.node(id), n = +id;
    const el = mk("g", { class: "node" + (changed.has(n) ? " changed" : ""), "data-n": id, transform: `translate(${nd.x - nd.width / 2},${nd.y - nd.height / 2})` });
    el.appendChild(mk("rect", { width: nd.width, height: nd.height, fill: COLORS[nd.lines[0]] || "#fff7e6" }));
    nd.lines.forEach((l, j) => { const t = mk("text", { x: 6, y: 13 + 12 * j }); t.textContent = l; el.appendChild(t); });
    const title = mk("title", {}); title.textContent = `node ${n}: ${state.trace.nodes[n].slice(0, 3).join(" ")}`; el.appendChild(title);
    group.appendChild(el);
    state.drawn++;
    if (changed.has(n)) state.changed++;
  }
  if (!svg.querySelector("defs")) {
    const defs = mk("defs", {}), marker = mk("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto" });
    marker.appendChild(mk("path", { d: "M0,0 L10,5 L0,10 z", fill: "#9aa" }));
    defs.appendChild(marker); svg.appendChild(defs);
  }
  svg.appendChild(group);
  // fit the whole graph when that keeps labels readable, else start readable with the root (bottom) in view
  const gr = g.graph(), box = svg.getBoundingClientRect(), r = g.node(String(root));
  const k = Math.max(Math.min(box.width / (gr.width || 1), box.height / (gr.height || 1), 1.5), 0.55);
  if (gr.width * k <= box.width && gr.height * k <= box.height) pan = { x: (box.width - gr.width * k) / 2, y: (box.height - gr.height * k) / 2, k };
  else pan = { x: box.width / 2 - r.x * k, y: box.height - 30 - r.y * k, k };
  applyPan();
}

let pan = { x: 0, y: 0, k: 1 };
function applyPan() { const v = $("graph").querySelector("g.view"); if (v) v.setAttribute("transform", `translate(${pan.x},${pan.y}) scale(${pan.k})`); }
function setupGraphPanZoom() {
  const svg = $("graph");
  svg.addEventListener("wheel", (e) => {
    e.preventDefault();
    const r = svg.getBoundingClientRect(), f = Math.exp(-e.deltaY * 0.0015), mx = e.clientX - r.left, my = e.clientY - r.top;
    pan = { x: mx - (mx - pan.x) * f, y: my - (my - pan.y) * f, k: pan.k * f };
    applyPan();
  }, { passive: false });
  let drag = null;
  svg.addEventListener("mousedown", (e) => { drag = { x: e.clientX - pan.x, y: e.clientY - pan.y }; });
  window.addEventListener("mouseup", () => { drag = null; });
  window.addEventListener("mousemove", (e) => { if (drag) { pan.x = e.clientX - drag.x; pan.y = e.clientY - drag.y; applyPan(); } });
}

// --- the profile: one lane per device, kernels and copies at their host-clock start, as long as the device said
const tl = { lanes: [], t0: 0, t1: 1, v0: 0, v1: 1, rects: [] };
function setupTimeline() {
  const evs = state.trace.events, byDev = new Map();
  for (const e of evs) { if (!byDev.has(e.dev)) byDev.set(e.dev, []); byDev.get(e.dev).push(e); }
  tl.lanes = [...byDev.entries()];
  tl.t0 = evs.length ? Math.min(...evs.map((e) => e.st)) : 0;
  tl.t1 = evs.length ? Math.max(...evs.map((e) => e.st + e.dur)) : 1;
  if (tl.t1 <= tl.t0) tl.t1 = tl.t0 + 1;
  tl.v0 = tl.t0; tl.v1 = tl.t1;
  $("profile-sum").textContent = tl.lanes.map(([dev, es]) => `${dev}: ${es.length} runs, busy ${fmtUs(es.reduce((a, e) => a + e.dur, 0))}`).join(" · ") ||
    "no runs timed" + (state.trace.meta.profile === false ? " (recorded with PROFILE=0)" : "");
  const c = $("timeline");
  c.addEventListener("wheel", (e) => {
    e.preventDefault();
    const x = timeAt(e.offsetX), f = Math.exp(e.deltaY * 0.0015);
    tl.v0 = x - (x - tl.v0) * f; tl.v1 = x + (tl.v1 - x) * f;
    drawTimeline();
  }, { passive: false });
  let drag = null;
  c.addEventListener("mousedown", (e) => { drag = { x: e.offsetX, v0: tl.v0, v1: tl.v1 }; });
  window.addEventListener("mouseup", () => { drag = null; });
  c.addEventListener("mousemove", (e) => {
    if (drag) {
      const dt = (e.offsetX - drag.x) / (c.clientWidth - LABEL_W) * (drag.v1 - drag.v0);
      tl.v0 = drag.v0 - dt; tl.v1 = drag.v1 - dt; drawTimeline();
    }
    hover(e);
  });
  c.addEventListener("mouseleave", () => { $("tooltip").hidden = true; });
  c.addEventListener("dblclick", (e) => { const hit = hitTest(e.offsetX, e.offsetY); if (hit && hit.kernel >= 0) { showTab("kernels"); openKernel(hit.kernel); } });
  $("zoom-reset").addEventListener("click", () => { tl.v0 = tl.t0; tl.v1 = tl.t1; drawTimeline(); });
  window.addEventListener("resize", () => { if (!$("profile-view").hidden) drawTimeline(); });
}

const timeAt = (px) => tl.v0 + (px - LABEL_W) / ($("timeline").clientWidth - LABEL_W) * (tl.v1 - tl.v0);
const colorOf = (name) => { let h = 0; for (const ch of name) h = (h * 31 + ch.charCodeAt(0)) | 0; return `hsl(${Math.abs(h) % 360},60%,62%)`; };

function drawTimeline() {
  const c = $("timeline"), dpr = window.devicePixelRatio || 1, W = c.clientWidth, H = c.clientHeight;
  c.width = W * dpr; c.height = H * dpr;
  const ctx = c.getContext("2d");
  ctx.scale(dpr, dpr);
  ctx.clearRect(0, 0, W, H);
  ctx.font = "11px ui-monospace, monospace";
  const span = tl.v1 - tl.v0, x = (t) => LABEL_W + (t - tl.v0) / span * (W - LABEL_W), laneH = 34;
  for (let i = 0; i <= 8; i++) {  // time axis
    const t = tl.v0 + span * i / 8, px = x(t);
    ctx.fillStyle = "#e2e4e8"; ctx.fillRect(px, 18, 1, H - 18);
    ctx.fillStyle = "#555"; ctx.fillText(fmtUs(t - tl.t0), px + 2, 12);
  }
  tl.rects = [];
  tl.lanes.forEach(([dev, evs], li) => {
    const y = 26 + li * (laneH + 8);
    ctx.fillStyle = "rgba(225,229,236,0.6)"; ctx.fillRect(0, y, W, laneH);
    ctx.fillStyle = "#222"; ctx.fillText(dev.slice(0, 24), 6, y + laneH / 2 + 4);
    for (const e of evs) {
      if (e.st + e.dur < tl.v0 || e.st > tl.v1) continue;
      const x0 = Math.max(x(e.st), LABEL_W), w = Math.max(x(e.st + e.dur) - x0, 2);
      ctx.fillStyle = e.kind === "copy" ? "#888" : colorOf(e.name);
      ctx.fillRect(x0, y + 3, w, laneH - 6);
      tl.rects.push({ x0, x1: x0 + w, y0: y, y1: y + laneH, e });
    }
  });
  ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, LABEL_W - 1, 18);  // label column stays readable
  state.events = tl.rects.length;
}

function hitTest(px, py) {
  let best = null;
  for (const r of tl.rects) if (py >= r.y0 && py <= r.y1 && px >= r.x0 - 2 && px <= r.x1 + 2) { best = r.e; if (px >= r.x0 && px <= r.x1) break; }
  return best;
}

function hover(ev) {
  const tip = $("tooltip"), e = hitTest(ev.offsetX, ev.offsetY);
  if (!e) { tip.hidden = true; return; }
  tip.hidden = false;
  tip.textContent = `${e.name}\n${e.dev}  ${e.kind}\nstart ${fmtUs(e.st - tl.t0)}  time ${fmtUs(e.dur)}\n` +
    (e.kind === "copy" ? `${rate(e.mem, e.dur)} GB/s` : `${rate(e.ops, e.dur)} GFLOP/s  ${rate(e.mem, e.dur)} GB/s\n(double-click: open the kernel)`);
  tip.style.left = (ev.offsetX + 14) + "px"; tip.style.top = (ev.offsetY + 40) + "px";
}
