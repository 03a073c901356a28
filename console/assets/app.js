// The console's page: a snapshot, then every change, from /events (server-sent events).
// Everything shown is set with textContent: hosts, paths and keys are guest or caller text.
"use strict";

const st = { identity: "", actions: {}, engines: [], sandboxes: new Map(), audit: [], egress: [], reaps: [], snaps: [], open: null };
const MAX = 2000; // the page keeps at most this many events of each kind, as the server does

const $ = (id) => document.getElementById(id);
const ref = (s) => s.engine + "/" + s.id;

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text == null ? "" : String(text);
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

function ago(t) {
  const ms = Date.now() - new Date(t).getTime();
  if (!(ms >= 0)) return "";
  const s = Math.floor(ms / 1000);
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m" + (s % 60) + "s";
  return Math.floor(s / 3600) + "h" + Math.floor((s % 3600) / 60) + "m";
}

function keep(list, v) { list.push(v); if (list.length > MAX) list.splice(0, list.length - MAX); }

function renderHeader() {
  $("identity").textContent = st.identity;
  for (const [id, action] of [["can-dispose", "dispose"], ["can-purge", "dispose_scope"], ["can-lame-duck", "lame_duck"]]) {
    const v = st.actions[action] || "unknown";
    $(id).textContent = v;
    $(id).className = "perm " + v;
  }
}

const engineRows = new Map(); // engine ID → its row, kept across polls so a button is never rebuilt under a click

function engineRow(id) {
  const tr = document.createElement("tr");
  tr.dataset.engine = id;
  for (let i = 0; i < 9; i++) cell(tr, "");
  tr.cells[0].className = "mono";
  const td = document.createElement("td");
  const b = document.createElement("button");
  b.type = "button"; b.className = "lame-duck"; b.textContent = "lame duck";
  b.addEventListener("click", () => lameDuck(id));
  td.appendChild(b); tr.appendChild(td);
  return tr;
}

function renderEngines() {
  const tb = $("engines").tBodies[0];
  const denied = st.actions["lame_duck"] === "denied";
  const live = new Set(st.engines.map((e) => e.id));
  for (const [id, tr] of engineRows) if (!live.has(id)) { tr.remove(); engineRows.delete(id); }
  st.engines.forEach((e, i) => {
    let tr = engineRows.get(e.id);
    if (!tr) { tr = engineRow(e.id); engineRows.set(e.id, tr); }
    const texts = [e.id, e.version, e.status + (e.daemon ? " (daemon " + e.daemon + ")" : ""),
      e.sandboxes, e.in_flight, e.requests, e.errors, e.refused, ago(e.started_at)];
    texts.forEach((t, j) => { const c = tr.cells[j]; const v = t == null ? "" : String(t); if (c.textContent !== v) c.textContent = v; });
    const b = tr.querySelector("button.lame-duck");
    b.disabled = denied || e.status === "draining";
    b.title = denied ? "the console's NATS identity may not put an engine in lame duck" :
      "take no new sandboxes on this engine, keep the ones it holds";
    if (tb.children[i] !== tr) tb.insertBefore(tr, tb.children[i] || null);
  });
}

const rows = new Map(); // ref → its row, kept across renders so a row is never rebuilt under a click

function sandboxRow(s) {
  const tr = document.createElement("tr");
  for (let i = 0; i < 12; i++) {
    const span = document.createElement("span");
    span.className = "clip";
    cell(tr, "").appendChild(span);
  }
  const td = document.createElement("td");
  for (const [cls, act] of [["processes", openProcesses], ["dispose", dispose], ["pause", pauseSandbox], ["snapshot", snapshotSandbox]]) {
    const b = document.createElement("button");
    b.type = "button"; b.className = cls; b.textContent = cls;
    b.addEventListener("click", (ev) => { ev.stopPropagation(); act(st.sandboxes.get(tr.dataset.ref)); });
    td.appendChild(b);
  }
  tr.appendChild(td);
  tr.addEventListener("click", () => { st.open = st.sandboxes.get(tr.dataset.ref) || null; renderAudit(); });
  return tr;
}

function renderSandboxes() {
  const tb = $("sandboxes").tBodies[0];
  const list = [...st.sandboxes.values()].sort((a, b) => new Date(a.acquired_at) - new Date(b.acquired_at));
  $("sandbox-count").textContent = "(" + list.length + ")";
  const denied = st.actions["dispose"] === "denied";
  const live = new Set(list.map(ref));
  for (const [r, tr] of rows) if (!live.has(r)) { tr.remove(); rows.delete(r); }
  list.forEach((s, i) => {
    let tr = rows.get(ref(s));
    if (!tr) { tr = sandboxRow(s); rows.set(ref(s), tr); }
    tr.dataset.ref = ref(s);
    tr.dataset.instance = s.instance_id;
    tr.dataset.sandbox = s.id;
    const texts = [s.key.scope, s.key.thread_id, s.key.agent_id || "", s.kind, s.engine, (s.instance_id || "").slice(0, 12),
      s.image, s.egress, ago(s.acquired_at), ago(s.last_call_at), s.state, snapsOf(s).length];
    texts.forEach((t, j) => {
      const c = tr.cells[j], v = t == null ? "" : String(t);
      if (c.firstChild.textContent !== v) { c.firstChild.textContent = v; c.title = v; }
    });
    tr.cells[4].className = "mono"; tr.cells[5].className = "mono";
    const b = tr.querySelector("button.dispose");
    b.dataset.instance = s.instance_id;
    b.disabled = denied;
    b.title = denied ? "the console's NATS identity may not dispose" : "dispose this exact instance";
    const p = tr.querySelector("button.pause");
    p.disabled = st.actions["pause"] === "denied" || s.state !== "live";
    p.title = s.state !== "live" ? "asleep already: its next call wakes it" : "pause it now (its processes kept); its next call wakes it";
    tr.querySelector("button.snapshot").disabled = st.actions["snapshot"] === "denied";
    if (tb.children[i] !== tr) tb.insertBefore(tr, tb.children[i] || null);
  });
}

// snapsOf is the snapshots the console saw taken of s's key and kind, newest last.
function snapsOf(s) {
  return st.snaps.filter((n) => n.key.scope === s.key.scope && n.key.thread_id === s.key.thread_id &&
    n.key.agent_id === s.key.agent_id && n.kind === s.kind);
}

function renderSnapshots() {
  const ul = $("snapshots-of");
  ul.replaceChildren();
  if (!st.open) return;
  for (const n of snapsOf(st.open).slice().reverse()) {
    const li = document.createElement("li");
    li.className = "mono";
    li.textContent = n.id + " — " + n.bytes + " bytes, " + n.reason + ", " + new Date(n.time).toLocaleTimeString() +
      ", of instance " + (n.instance_id || "").slice(0, 12);
    ul.appendChild(li);
  }
  if (!ul.children.length) { const li = document.createElement("li"); li.textContent = "no snapshot seen"; ul.appendChild(li); }
}

function renderNotice(text) {
  $("notice").textContent = text;
  $("notice").hidden = !text;
}

function renderAudit() {
  const s = st.open;
  $("audit-panel").hidden = !s;
  renderSnapshots();
  if (!s) return;
  const denied = st.actions["dispose_scope"] === "denied";
  $("purge").disabled = denied;
  $("purge").title = denied ? "the console's NATS identity may not purge" : "dispose every sandbox of this scope and thread";
  $("audit-of").textContent = s.key.scope + " / " + s.key.thread_id + " / " + (s.key.agent_id || "") + " (" + s.kind + ")";
  const tb = $("audit").tBodies[0];
  tb.replaceChildren();
  const mine = st.audit.filter((e) => e.sandbox === s.id ||
    (e.key && e.key.scope === s.key.scope && e.key.thread_id === s.key.thread_id && (e.key.agent_id || "") === (s.key.agent_id || "") &&
      (!e.kind || e.kind === s.kind)));
  for (const e of mine.slice().reverse()) {
    const tr = document.createElement("tr");
    cell(tr, new Date(e.time).toLocaleTimeString()); cell(tr, e.type); cell(tr, e.outcome); cell(tr, e.error);
    const d = e.exec || e.file || e.disposal || e.acquire || e.verdict || e.placement || e.lifecycle;
    cell(tr, d ? JSON.stringify(d) : "", "mono");
    tb.appendChild(tr);
  }
}

function renderEgress() {
  const fs = $("f-scope").value, fk = $("f-kind").value, fh = $("f-host").value;
  const rows = [];
  for (const w of st.egress) {
    const scope = w.key ? w.key.scope : "";
    if (fs && !scope.includes(fs)) continue;
    if (fk && !(w.kind || "").includes(fk)) continue;
    for (const d of w.decisions || []) {
      if (fh && !(d.host || "").includes(fh)) continue;
      rows.push({ d, w, scope });
    }
  }
  const deny = (r) => (r.d.verdict || "").startsWith("DENY") ? 0 : 1;
  rows.sort((a, b) => deny(a) - deny(b) || new Date(b.w.window.end) - new Date(a.w.window.end));
  const tb = $("egress").tBodies[0];
  tb.replaceChildren();
  for (const r of rows.slice(0, 500)) {
    const tr = document.createElement("tr");
    if (deny(r) === 0) tr.className = "deny";
    cell(tr, r.d.verdict); cell(tr, r.d.host); cell(tr, r.d.port); cell(tr, r.scope); cell(tr, r.w.kind);
    cell(tr, new Date(r.w.window.end).toLocaleTimeString()); cell(tr, r.w.trigger);
    tb.appendChild(tr);
  }
}

// Engine and placement events: the engines' own states (started, draining, stopped, the
// daemon away and back), leases lost, lame duck, and acquires that claimed or took over a key.
function engineEvent(e) {
  return e.type.startsWith("engine.") || e.type === "placement.changed" ||
    (e.type === "sandbox.acquired" && e.placement && e.placement.change === "taken_over");
}

function renderEngineEvents() {
  const tb = $("engine-events").tBodies[0];
  tb.replaceChildren();
  for (const e of st.audit.filter(engineEvent).slice(-50).reverse()) {
    const tr = document.createElement("tr");
    tr.dataset.type = e.type;
    tr.dataset.engine = e.service || "";
    cell(tr, new Date(e.time).toLocaleTimeString()); cell(tr, e.service, "mono"); cell(tr, e.type);
    cell(tr, e.placement ? e.placement.change : ""); cell(tr, e.key ? e.key.scope + " / " + e.key.thread_id + " / " + (e.key.agent_id || "") : "");
    cell(tr, e.kind);
    tb.appendChild(tr);
  }
}

function renderReaps() {
  const tb = $("reaps").tBodies[0];
  tb.replaceChildren();
  for (const r of st.reaps.slice().reverse()) {
    const tr = document.createElement("tr");
    const s = r.summary || r;
    cell(tr, new Date(r.published_at || r.time || Date.now()).toLocaleTimeString());
    cell(tr, s.disposed); cell(tr, s.proxies_removed); cell(tr, s.networks_removed); cell(tr, (s.failures || []).length);
    tb.appendChild(tr);
  }
}

// The plot: acquires and execs per second in 10 s buckets over the last 10 minutes, from the
// audit events the page holds, and the live sandboxes the page counted every 10 s.
const BUCKET = 10000, BUCKETS = 60;
const liveSamples = []; // [time, count]

function renderPlot() {
  const now = Date.now();
  liveSamples.push([now, st.sandboxes.size]);
  while (liveSamples.length && liveSamples[0][0] < now - BUCKET * BUCKETS) liveSamples.shift();
  const acq = new Array(BUCKETS).fill(0), ex = new Array(BUCKETS).fill(0);
  for (const e of st.audit) {
    const i = BUCKETS - 1 - Math.floor((now - new Date(e.time).getTime()) / BUCKET);
    if (i < 0 || i >= BUCKETS) continue;
    if (e.type === "sandbox.acquired" && e.outcome !== "refused") acq[i]++;
    if (e.type === "exec.finished") ex[i]++;
  }
  const perSec = (a) => a.map((n) => n / (BUCKET / 1000));
  const a = perSec(acq), x = perSec(ex);
  const top = Math.max(0.1, ...a, ...x);
  const liveTop = Math.max(1, ...liveSamples.map((s) => s[1]));
  const pts = (vals) => vals.map((v, i) => (i * 720 / (BUCKETS - 1)).toFixed(1) + "," + (115 - v / top * 105).toFixed(1)).join(" ");
  $("plot-acquires").setAttribute("points", pts(a));
  $("plot-execs").setAttribute("points", pts(x));
  $("plot-live").setAttribute("points", liveSamples.map((s) =>
    (720 - (now - s[0]) / (BUCKET * BUCKETS) * 720).toFixed(1) + "," + (115 - s[1] / liveTop * 105).toFixed(1)).join(" "));
  const sum = (v) => v.reduce((p, q) => p + q, 0);
  $("plot").dataset.acquires = String(sum(acq));
  $("plot").dataset.execs = String(sum(ex));
  $("plot-numbers").textContent = "· in 10 min: " + sum(acq) + " acquires, " + sum(ex) + " execs; peak " + top.toFixed(1) + "/s; " +
    st.sandboxes.size + " live now";
}

// The last hour's latency: per minute, the durations of the acquires and commands the page
// has seen (its snapshot's window, then every event as it arrives), each event counted once
// by its ID; minutes older than an hour are dropped, so this stays bounded like the window.
const MINUTE = 60000, HOUR = 60;
const minutes = new Map(); // minute number → { acq: [ms], ex: [ms], ids: Set }

function countLatency(e) {
  const t = new Date(e.time).getTime(), m = Math.floor(t / MINUTE);
  if (!(e.type === "sandbox.acquired" || e.type === "exec.finished") || e.outcome === "refused" || !e.id) return;
  if (m <= Math.floor(Date.now() / MINUTE) - HOUR) return;
  let b = minutes.get(m);
  if (!b) { b = { acq: [], ex: [], ids: new Set() }; minutes.set(m, b); }
  if (b.ids.has(e.id)) return;
  b.ids.add(e.id);
  (e.type === "exec.finished" ? b.ex : b.acq).push(e.duration_ms || 0);
}

function median(v) {
  if (!v.length) return null;
  const s = v.slice().sort((p, q) => p - q);
  return s[Math.floor((s.length - 1) / 2)];
}

function renderLatency() {
  const now = Math.floor(Date.now() / MINUTE);
  for (const m of minutes.keys()) if (m <= now - HOUR) minutes.delete(m);
  const acq = [], ex = [];
  let samples = 0, top = 1;
  for (let i = 0; i < HOUR; i++) {
    const b = minutes.get(now - HOUR + 1 + i);
    const a = b ? median(b.acq) : null, x = b ? median(b.ex) : null;
    if (b) samples += b.acq.length + b.ex.length;
    acq.push(a); ex.push(x);
    top = Math.max(top, a || 0, x || 0);
  }
  const pts = (vals) => vals.map((v, i) => v === null ? null : (i * 720 / (HOUR - 1)).toFixed(1) + "," + (115 - v / top * 105).toFixed(1))
    .filter((p) => p !== null).join(" ");
  $("latency-acquires").setAttribute("points", pts(acq));
  $("latency-execs").setAttribute("points", pts(ex));
  // A dot on every minute with calls: a line needs two such minutes, and the legend names the
  // last one whether or not it has a neighbour.
  const dots = (g, vals) => {
    g.replaceChildren();
    vals.forEach((v, i) => {
      if (v === null) return;
      const c = document.createElementNS("http://www.w3.org/2000/svg", "circle");
      c.setAttribute("cx", (i * 720 / (HOUR - 1)).toFixed(1)); c.setAttribute("cy", (115 - v / top * 105).toFixed(1));
      c.setAttribute("r", "3");
      g.appendChild(c);
    });
  };
  dots($("latency-acquire-dots"), acq);
  dots($("latency-exec-dots"), ex);
  $("latency").dataset.samples = String(samples);
  const last = (v) => { for (let i = v.length - 1; i >= 0; i--) if (v[i] !== null) return v[i].toFixed(0) + " ms"; return "—"; };
  $("latency-numbers").textContent = "· median this minute or the last with calls: acquire " + last(acq) + ", exec " + last(ex) +
    "; top of the scale " + top.toFixed(0) + " ms";
}

// Denials per scope: the DENY decisions of the egress windows the page holds, most first.
function renderDenials() {
  const per = new Map();
  for (const w of st.egress) {
    const scope = w.key ? w.key.scope : "";
    for (const d of w.decisions || []) if ((d.verdict || "").startsWith("DENY")) per.set(scope, (per.get(scope) || 0) + 1);
  }
  const ul = $("denials");
  ul.replaceChildren();
  const rows = [...per.entries()].sort((a, b) => b[1] - a[1]).slice(0, 20);
  const top = Math.max(1, ...rows.map((r) => r[1]));
  for (const [scope, n] of rows) {
    const li = document.createElement("li");
    li.dataset.scope = scope; li.dataset.count = String(n);
    const bar = document.createElement("span");
    bar.className = "bar"; bar.style.width = Math.max(2, Math.round(n / top * 240)) + "px";
    li.append(bar, " " + (scope || "(no scope)") + ": " + n);
    ul.appendChild(li);
  }
  if (!rows.length) { const li = document.createElement("li"); li.textContent = "no denials in the window"; ul.appendChild(li); }
}

async function purge(s) {
  const r = await post("/api/purge", { scope: s.key.scope, thread_id: s.key.thread_id });
  $("action-result").textContent = r.ok ? "purged " + s.key.scope + " / " + s.key.thread_id + ": " + (r.out.disposed || 0) + " disposed" +
    (r.out.undisposed ? " (something may remain: " + r.out.undisposed.code + ")" : "") : "refused (" + r.status + "): " + (r.out.error || "");
  $("action-result").dataset.status = String(r.status);
}

async function post(path, body) {
  const res = await fetch(path, { method: "POST", headers: { "Content-Type": "application/json", "X-Console-Action": "1" }, body: JSON.stringify(body) });
  const out = await res.json().catch(() => ({}));
  return { ok: res.ok, status: res.status, out };
}

async function lameDuck(id) {
  const r = await post("/api/lame_duck", { engine: id });
  $("action-result").textContent = r.ok ? "engine " + id + " in lame duck" + (r.out.already ? " (it was already)" : "") +
    ", holding " + r.out.sandboxes : "refused (" + r.status + "): " + (r.out.error || "");
}

async function pauseSandbox(s) {
  const r = await post("/api/pause", { engine: s.engine, id: s.id, key: s.key });
  $("action-result").textContent = r.ok ? "paused " + s.instance_id.slice(0, 12) : "refused (" + r.status + "): " + (r.out.error || "");
  $("action-result").dataset.status = String(r.status);
}

async function snapshotSandbox(s) {
  const r = await post("/api/snapshot", { engine: s.engine, id: s.id, key: s.key });
  $("action-result").textContent = r.ok ? "snapshot " + r.out.snapshot.id + " of " + s.instance_id.slice(0, 12) + ": " + r.out.snapshot.bytes + " bytes" :
    "refused (" + r.status + "): " + (r.out.error || "");
  $("action-result").dataset.status = String(r.status);
}

async function dispose(s) {
  const r = await post("/api/dispose", { key: s.key, kind: s.kind, instance_id: s.instance_id });
  $("action-result").textContent = r.ok ? "disposed " + s.instance_id.slice(0, 12) +
    (r.out.undisposed ? " (something may remain: " + r.out.undisposed.code + ")" : "") : "refused (" + r.status + "): " + (r.out.error || "");
  $("action-result").dataset.status = String(r.status);
}

// The processes of one sandbox, and a live tail of one of them: process_list and process_read
// through the console, each read going on from the sequence the last one ended at.
const proc = { of: null, tail: null }; // the sandbox shown; the tail running ({id, seq, stop})

function sandboxOf(s) { return { engine: s.engine, sandbox: s.id, key: s.key }; }

async function openProcesses(s) {
  if (proc.tail) proc.tail.stop = true;
  proc.of = s; proc.tail = null;
  $("process-panel").hidden = false;
  $("processes-of").textContent = s.key.scope + " / " + s.key.thread_id + " / " + s.key.agent_id + " (" + s.kind + ")";
  $("tail").replaceChildren(); $("tail-of").textContent = "";
  await listProcesses();
}

async function listProcesses() {
  const s = proc.of;
  if (!s) return;
  const r = await post("/api/processes", sandboxOf(s));
  const tb = $("processes").tBodies[0];
  tb.replaceChildren();
  if (!r.ok) { $("tail-of").textContent = "refused (" + r.status + "): " + (r.out.error || ""); return; }
  for (const p of r.out.processes || []) {
    const tr = document.createElement("tr");
    tr.dataset.process = p.id; tr.dataset.state = p.state;
    const exit = p.exit ? p.exit.reason + (p.exit.reason === "exited" ? " " + p.exit.exit_code : "") : "";
    cell(tr, p.id, "mono"); cell(tr, p.state); cell(tr, p.pid || ""); cell(tr, p.transport); cell(tr, p.output);
    cell(tr, p.started_at ? ago(p.started_at) : ""); cell(tr, (p.argv || []).join(" "), "mono"); cell(tr, exit);
    tr.addEventListener("click", () => tailProcess(p.id));
    tb.appendChild(tr);
  }
}

function appendTail(text, cls) {
  const pre = $("tail");
  const span = document.createElement("span");
  if (cls) span.className = cls;
  span.textContent = text;
  pre.appendChild(span);
  pre.scrollTop = pre.scrollHeight;
}

const decoder = new TextDecoder();
function text(b64) { return decoder.decode(Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)), { stream: true }); }

// tailProcess shows a process's output from its start and follows it live until it ends.
async function tailProcess(id) {
  if (proc.tail) proc.tail.stop = true;
  const t = { id, seq: 0, stop: false };
  proc.tail = t;
  $("tail").replaceChildren();
  $("tail").dataset.process = id; $("tail").dataset.ended = "";
  $("tail-of").textContent = "output of " + id + " (live)";
  while (!t.stop && proc.of) {
    const r = await post("/api/process_output", { ...sandboxOf(proc.of), id, seq: t.seq, follow_ms: 1000 }); // short: an action waits behind it
    if (t.stop) return;
    if (!r.ok) { $("tail-of").textContent = "refused (" + r.status + "): " + (r.out.error || ""); return; }
    const out = r.out;
    if (out.cut) appendTail("[" + (out.cut.to - out.cut.from) + " bytes from " + out.cut.from + " no longer held (" + out.cut.reason + ")]\n", "cut");
    for (const c of out.chunks || []) appendTail(text(c.data), c.stream === "stderr" ? "stderr" : "");
    t.seq = out.next;
    $("tail").dataset.seq = String(t.seq);
    if (out.exit) {
      $("tail-of").textContent = "output of " + id + ": ended, " + out.exit.reason + (out.exit.reason === "exited" ? " " + out.exit.exit_code : "");
      $("tail").dataset.ended = out.exit.reason;
      listProcesses();
      return;
    }
  }
}

let plotTimer = null; // an audit event redraws the plot within a second, at most once a second
function plotSoon() { if (!plotTimer) plotTimer = setTimeout(() => { plotTimer = null; renderPlot(); renderLatency(); }, 1000); }

const handlers = {
  snapshot(d) {
    st.identity = d.identity; st.actions = d.actions; st.engines = d.engines || [];
    st.sandboxes = new Map((d.sandboxes || []).map((s) => [ref(s), s]));
    st.audit = d.audit || []; st.egress = d.egress || []; st.reaps = d.reaps || []; st.snaps = d.snapshots || [];
    st.audit.forEach(countLatency);
    renderHeader(); renderEngines(); renderSandboxes(); renderAudit(); renderEgress(); renderReaps(); renderEngineEvents(); renderPlot();
    renderLatency(); renderDenials(); renderNotice(d.notice || "");
  },
  notice(d) { renderNotice(d || ""); },
  actions(d) { st.actions = d; renderHeader(); renderEngines(); renderSandboxes(); renderAudit(); },
  engines(d) { st.engines = d || []; renderEngines(); },
  sandbox(d) { st.sandboxes.set(ref(d), d); renderSandboxes(); },
  sandbox_gone(d) { st.sandboxes.delete(ref(d)); renderSandboxes(); },
  audit(d) { keep(st.audit, d); countLatency(d); if (st.open) renderAudit(); if (engineEvent(d)) renderEngineEvents(); plotSoon(); },
  egress(d) { keep(st.egress, d); renderEgress(); renderDenials(); },
  reap(d) { keep(st.reaps, d); renderReaps(); },
  snapshot_taken(d) { keep(st.snaps, d); renderSandboxes(); renderSnapshots(); },
};

function connect() {
  const es = new EventSource("/events");
  es.onopen = () => { $("link").textContent = "live"; };
  es.onerror = () => { $("link").textContent = "reconnecting…"; };
  for (const [kind, h] of Object.entries(handlers)) {
    es.addEventListener(kind, (m) => h(JSON.parse(m.data)));
  }
}

for (const id of ["f-scope", "f-kind", "f-host"]) $(id).addEventListener("input", renderEgress);
$("audit-close").addEventListener("click", () => { st.open = null; renderAudit(); });
$("processes-refresh").addEventListener("click", listProcesses);
$("processes-close").addEventListener("click", () => {
  if (proc.tail) proc.tail.stop = true;
  proc.of = null; proc.tail = null; $("process-panel").hidden = true;
});
$("purge").addEventListener("click", () => { if (st.open) purge(st.open); });
setInterval(() => { renderSandboxes(); }, 5000); // ages
setInterval(() => { renderPlot(); renderLatency(); }, BUCKET);
connect();
