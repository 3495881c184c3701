// Manifold operator console. Renders JSON from /ui/api/ with DOM methods only (never
// innerHTML), and polls the section on screen every second while the page is visible.
"use strict";

const POLL_MS = 1000;
const sections = ["overview", "catalog", "audit"];
let timer = null;
let me = null;

// el builds an element: el("td", {class: "x"}, "text", child…).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) {
    if (c === undefined || c === null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function fill(tbody, rows, empty, cols) {
  if (rows.length === 0) rows = [el("tr", {class: "empty"}, el("td", {colspan: cols}, empty))];
  tbody.replaceChildren(...rows);
}

function time(s) {
  if (!s || s.startsWith("0001-")) return "";
  const d = new Date(s);
  return d.toLocaleTimeString([], {hour12: false}) + (Date.now() - d > 86400e3 ? " " + d.toLocaleDateString() : "");
}

function ago(s) {
  const sec = Math.max(0, Math.round((Date.now() - new Date(s)) / 1000));
  if (sec < 90) return sec + " s ago";
  if (sec < 5400) return Math.round(sec / 60) + " min ago";
  return Math.round(sec / 3600) + " h ago";
}

async function get(path) {
  const res = await fetch(path, {credentials: "same-origin", headers: {Accept: "application/json"}});
  if (res.status === 401 || res.status === 403) {
    location.reload(); // the server shows the sign-in page
    throw new Error("signed out");
  }
  if (!res.ok) throw new Error(path + ": " + res.status);
  return res.json();
}

function badge(text, kind) {
  return el("span", {class: "badge " + kind}, text);
}

// Overview

function renderOverview(ov) {
  // "standby": a server that connects per user (its users' sessions do), not down.
  const failing = ov.upstreams.filter(u => u.state !== "ready" && u.state !== "standby").length;
  const cards = [
    ["Version", ov.version],
    ["Config", (ov.config.hash || "").replace(/^sha256:/, "").slice(0, 12), "loaded " + time(ov.config.loadedAt)],
    ["Upstreams", ov.upstreams.length + (failing ? " (" + failing + " down)" : ""), ov.draining ? ov.draining + " draining" : ""],
    ["Sessions", ov.sessionCount],
    ["Reloads", ov.reloadsApplied + " applied", ov.reloadsRejected + " rejected"],
    ["Audit drops", ov.auditDropped],
    ["Process", "pid " + ov.process.pid, ov.process.goroutines + " goroutines, " + ov.process.openFiles + " fds"],
  ];
  document.getElementById("summary").replaceChildren(...cards.map(([k, v, sub]) =>
    el("div", {class: "card"}, el("dt", null, k), el("dd", null, String(v)), sub ? el("dd", {class: "sub"}, sub) : null)));

  const rows = ov.upstreams.map(u => {
    const kind = u.state === "ready" || u.state === "standby" ? "ok" : u.state === "failed" ? "bad" : "warn";
    const ms = (v) => v.toFixed(v < 10 ? 2 : 1);
    const lat = u.latency ? `${ms(u.latency.p50)} / ${ms(u.latency.p95)} / ${ms(u.latency.p99)} ms` : "—";
    return el("tr", {"data-upstream": u.name, "data-state": u.state, class: "state-" + u.state},
      el("th", {scope: "row"}, u.name),
      el("td", null, badge(u.state, kind), u.replacing ? el("span", {class: "sub"}, " replacing: " + u.replacing) : null),
      el("td", {title: u.since}, ago(u.since)),
      el("td", null, u.transport, u.session ? el("span", {class: "sub"}, " · " + u.session) : null),
      el("td", null, u.protocolVersion || "—"),
      el("td", null, u.protocolVersion ? `${u.tools} / ${u.prompts} / ${u.resources}` : "—"),
      el("td", null, u.pid || "—"),
      el("td", {class: "num"}, u.restarts),
      el("td", {class: "num"}, u.inFlight),
      el("td", {class: "num", title: u.latency ? u.latency.calls + " audited calls" : "no audited calls"}, lat),
      el("td", {class: "error"}, u.lastError || ""));
  });
  fill(document.querySelector("#upstreams tbody"), rows, "No servers configured.", 11);

  fill(document.querySelector("#sessions tbody"), ov.sessions.map(s =>
    el("tr", null, el("td", null, s.client || "(unnamed)"), el("td", null, s.protocolVersion || "—"), el("td", {class: "num"}, s.count))),
    "No open sessions.", 3);

  fill(document.querySelector("#reloads tbody"), ov.reloads.map(r =>
    el("tr", {class: r.result === "rejected" ? "state-failed" : ""},
      el("td", {title: r.at}, time(r.at)), el("td", null, r.trigger),
      el("td", null, badge(r.result, r.result === "rejected" ? "bad" : "ok")),
      el("td", {class: "error"}, r.error || ""))),
    "No reload since the start.", 4);
}

// Catalog

let principalsShown = "";

function renderCatalog(cat) {
  const sel = document.getElementById("principal");
  const key = JSON.stringify(cat.principals);
  if (key !== principalsShown) {
    const current = sel.value;
    sel.replaceChildren(el("option", {value: ""}, "everything (no principal)"),
      ...cat.principals.map(p => el("option", {value: p.name, "data-groups": (p.groups || []).join(", ")},
        p.name + (p.groups && p.groups.length ? " (" + p.groups.join(", ") + ")" : ""))));
    sel.value = current;
    principalsShown = key;
  }
  const who = cat.principal.name;
  const visible = cat.items.filter(i => i.visible);
  const hidden = cat.items.filter(i => !i.visible);
  document.getElementById("catalog-note").textContent = cat.unrestricted
    ? "No policy: every principal sees everything."
    : who ? "" : "Choose a principal to see exactly what it sees, and the rule that hides the rest.";
  const row = i => el("tr", {"data-name": i.name, "data-visible": String(i.visible)},
    el("td", null, i.kind), el("th", {scope: "row"}, i.name), el("td", null, i.upstream), el("td", null, i.server),
    el("td", {class: "rule"}, i.rule || ""));
  document.querySelector("#visible caption").textContent = (who ? "Visible to " + who : "All items") + " (" + visible.length + ")";
  fill(document.querySelector("#visible tbody"), visible.map(row), "Nothing.", 5);
  const ht = document.getElementById("hidden");
  ht.hidden = !who;
  document.querySelector("#hidden caption").textContent = "Hidden from " + who + " (" + hidden.length + ")";
  fill(document.querySelector("#hidden tbody"), hidden.map(row), "Nothing is hidden.", 5);
}

function catalogQuery() {
  const p = document.getElementById("principal").value;
  const g = document.getElementById("groups").value;
  return "/ui/api/catalog?" + new URLSearchParams({principal: p, groups: g});
}

// Audit

function auditQuery() {
  const q = new URLSearchParams();
  for (const f of document.querySelectorAll("#auditfilter input, #auditfilter select")) {
    if (f.value) q.set(f.name, f.value);
  }
  return "/ui/api/audit?" + q;
}

function renderAudit(a) {
  document.getElementById("audit-note").textContent = a.on
    ? a.total + " records since the start; the latest " + a.records.length + " matching are shown."
    : "The audit log is off: configure the audit section to see calls here.";
  const rows = a.records.map(r => {
    const denied = r.decision === "deny";
    return el("tr", {class: denied ? "denied" : r.outcome !== "ok" ? "failed" : "", "data-seq": r.seq,
        "data-principal": r.principal, "data-name": r.name, "data-decision": r.decision},
      el("td", {title: r.time}, time(r.time)), el("td", null, r.principal), el("td", null, r.method),
      el("th", {scope: "row"}, r.name), el("td", null, r.server || "—"),
      el("td", null, badge(r.decision, denied ? "bad" : "ok"), r.rule ? el("span", {class: "sub"}, " " + r.rule) : null),
      el("td", null, r.outcome + (r.errorCode ? " " + r.errorCode : "")),
      el("td", {class: "num"}, r.durationMs),
      el("td", null, r.traceId ? el("a", {href: "#audit", "data-trace": r.traceId, title: "All records of trace " + r.traceId}, r.traceId.slice(0, 8)) : ""));
  });
  fill(document.querySelector("#records tbody"), rows, "No matching records.", 9);
}

// Navigation and polling

function current() {
  const s = location.hash.slice(1);
  return sections.includes(s) ? s : "overview";
}

async function refresh() {
  clearTimeout(timer);
  const s = current();
  try {
    if (s === "overview") renderOverview(await get("/ui/api/overview"));
    else if (s === "catalog") renderCatalog(await get(catalogQuery()));
    else renderAudit(await get(auditQuery()));
    const live = document.getElementById("live");
    live.removeAttribute("role");
    live.textContent = "Updated " + new Date().toLocaleTimeString([], {hour12: false});
    document.body.dataset.loaded = s;
  } catch (e) {
    // Only a failure is announced to screen readers, not every refresh.
    const live = document.getElementById("live");
    live.setAttribute("role", "alert");
    live.textContent = "Cannot reach the gateway: " + e.message;
  }
  if (document.visibilityState === "visible") timer = setTimeout(refresh, POLL_MS);
}

function show() {
  const s = current();
  for (const id of sections) document.getElementById(id).hidden = id !== s;
  for (const a of document.querySelectorAll("nav a")) {
    if (a.dataset.section === s) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  delete document.body.dataset.loaded;
  refresh();
}

async function start() {
  me = await get("/ui/api/me");
  document.getElementById("operator").textContent = me.authOff ? me.operator + " (loopback, auth off)" : me.operator;
  document.getElementById("signout").hidden = !me.signedIn;
  window.addEventListener("hashchange", show);
  document.addEventListener("visibilitychange", () => { if (document.visibilityState === "visible") refresh(); });
  document.getElementById("principal").addEventListener("change", e => {
    const opt = e.target.selectedOptions[0];
    document.getElementById("groups").value = opt ? opt.dataset.groups || "" : "";
    refresh();
  });
  document.getElementById("groups").addEventListener("change", refresh);
  for (const f of document.querySelectorAll("#auditfilter input, #auditfilter select")) f.addEventListener("change", refresh);
  for (const f of document.querySelectorAll("form.filters")) f.addEventListener("submit", e => { e.preventDefault(); refresh(); });
  document.getElementById("records").addEventListener("click", e => {
    const a = e.target.closest("a[data-trace]");
    if (!a) return;
    e.preventDefault();
    document.getElementById("f-trace").value = a.dataset.trace;
    refresh();
  });
  show();
}

start();
