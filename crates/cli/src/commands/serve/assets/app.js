// orchestrator serve: the page. Plain JavaScript, no build step.
// The list comes with the server-sent `sessions` event; the session shown
// is fetched again on each `session` event. Items are drawn only where
// they are visible (a fixed row height, the rows in view and a few more).
"use strict";

const ROW = 32;
const $ = (sel) => document.querySelector(sel);
const state = { sessions: [], key: null, detail: null, selected: null, source: null, refetch: null };

function esc(text) {
  return String(text ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}
function when(ms) {
  if (!ms) return "–";
  const d = new Date(ms);
  return d.toLocaleDateString(undefined, { month: "short", day: "numeric" }) + " " + d.toLocaleTimeString();
}
function money(v) { return v == null ? "–" : "$" + Number(v).toFixed(4); }
function badge(st) { return `<span class="badge st-${esc(st)}">${esc(st === "waiting" ? "waiting for a human" : st === "limit" ? "stopped at a limit" : st)}</span>`; }
async function api(path, options) {
  const response = await fetch(path, Object.assign({ credentials: "same-origin" }, options));
  const body = response.headers.get("content-type")?.includes("json") ? await response.json() : await response.text();
  if (!response.ok) throw new Error(body.error || body || response.statusText);
  return body;
}

// ---- the list ----
function renderList() {
  const rows = state.sessions.map((s) => `
    <tr data-key="${esc(s.key)}" data-state="${esc(s.state)}">
      <td>${esc(s.flow)}</td>
      <td class="title">${esc(s.title || s.id)}<span class="id">${esc(s.id)}</span></td>
      <td class="state">${badge(s.state)}</td>
      <td>${when(s.started_ms)}</td>
      <td class="num">${s.counts.done}</td><td class="num">${s.counts.failed}</td><td class="num">${s.counts.pending}</td>
      <td class="num">${s.test_runs ?? "–"}</td><td class="num">${money(s.cost_usd)}</td>
    </tr>`).join("");
  $("#sessions tbody").innerHTML = rows;
  $("#empty").hidden = state.sessions.length > 0;
}
$("#sessions tbody").addEventListener("click", (e) => {
  const tr = e.target.closest("tr[data-key]");
  if (tr) location.hash = "#/s/" + encodeURIComponent(tr.dataset.key);
});

// ---- live updates ----
function connect() {
  if (state.source) state.source.close();
  const url = "/api/live" + (state.key ? "?key=" + encodeURIComponent(state.key) : "");
  const source = new EventSource(url);
  state.source = source;
  source.addEventListener("open", () => { $("#conn").textContent = "live"; $("#conn").classList.add("live"); });
  source.addEventListener("error", () => { $("#conn").textContent = "reconnecting…"; $("#conn").classList.remove("live"); });
  source.addEventListener("sessions", (e) => {
    state.sessions = JSON.parse(e.data);
    renderList();
    if (state.detail) {
      const mine = state.sessions.find((s) => s.key === state.key);
      if (mine && mine.state !== state.detail.summary.state) scheduleRefetch();
    }
  });
  source.addEventListener("session", scheduleRefetch);
}
function scheduleRefetch() {
  if (state.refetch) return;
  state.refetch = setTimeout(() => { state.refetch = null; loadSession(); }, 30);
}

// ---- one session ----
async function loadSession() {
  if (!state.key) return;
  const key = state.key;
  try {
    const detail = await api("/api/session?key=" + encodeURIComponent(key));
    if (key !== state.key) return;
    state.detail = detail;
    renderSession();
  } catch (err) {
    showMessage(err.message);
  }
}
function showMessage(text) {
  const m = $("#s-message");
  m.textContent = text;
  m.hidden = !text;
}
function renderSession() {
  const d = state.detail, s = d.summary;
  $("#s-title").textContent = s.title || s.id;
  $("#s-state").outerHTML = `<span id="s-state">${badge(s.state)}</span>`;
  $("#s-sub").textContent = `${s.flow} · ${s.id} · ${s.repo} · started ${when(s.started_ms)}` +
    (s.pid ? ` · pid ${s.pid}` : "") + (s.reason ? ` · ${s.reason}` : "");
  const approve = $("#approve");
  approve.hidden = !s.approvable;
  approve.textContent = s.approvable ? `Approve ${s.approvable} and continue` : "";
  $("#decline").hidden = !(s.approvable && s.flow === "ci-autofix");
  $("#cancel").hidden = !(s.state === "running" || (s.state === "waiting" && s.pid));
  $("#c-done").textContent = s.counts.done;
  $("#c-failed").textContent = s.counts.failed;
  $("#c-pending").textContent = s.counts.pending;
  $("#c-tests").textContent = s.test_runs ?? "–";
  $("#c-cost").textContent = money(s.cost_usd);
  $("#c-tokens").textContent = d.tokens ? d.tokens.toLocaleString() : "–";
  $("#timeline").src = "/api/timeline.svg?key=" + encodeURIComponent(state.key) + "&t=" + Date.now();
  $("#item-count").textContent = `(${d.items.length})`;
  drawItems(true);
  renderItemDetail();
  renderExtras();
  $("#notes").innerHTML = d.notes.slice().reverse().map((n) =>
    `<li><span class="muted">${esc(new Date(n.at_ms).toLocaleTimeString())}</span> <span class="kind k-${esc(n.kind)}">${esc(n.kind)}</span>${esc(n.text)}</li>`).join("");
}

// Only the rows in view (and a margin) are in the DOM.
function drawItems(force) {
  const box = $("#items"), items = state.detail ? state.detail.items : [];
  box.querySelector(".spacer").style.height = items.length * ROW + "px";
  box.style.height = Math.min(360, Math.max(1, items.length) * ROW + 2) + "px";
  const first = Math.max(0, Math.floor(box.scrollTop / ROW) - 10);
  const last = Math.min(items.length, Math.ceil((box.scrollTop + box.clientHeight) / ROW) + 10);
  if (!force && box.dataset.range === `${first}:${last}`) return;
  box.dataset.range = `${first}:${last}`;
  box.querySelectorAll(".item").forEach((n) => n.remove());
  const html = [];
  for (let i = first; i < last; i++) {
    const it = items[i];
    const commits = it.commits.map((c) => `<button class="diff" data-sha="${esc(c)}">${esc(c.slice(0, 7))}</button>`).join(" ");
    html.push(`<div class="item${it.id === state.selected ? " selected" : ""}" data-item="${esc(it.id)}" data-status="${esc(it.status)}" style="top:${i * ROW}px">
      <span class="c-id">${esc(it.id)}</span><span class="c-title" title="${esc(it.title)}">${esc(it.title)}</span>
      <span class="c-group">${esc(it.group || it.location || "")}</span><span class="c-status status">${badge(it.status)}</span>
      <span class="c-att">${it.attempts}</span><span class="c-cost">${money(it.cost_usd)}</span><span class="c-commits">${commits}</span></div>`);
  }
  box.insertAdjacentHTML("beforeend", html.join(""));
}
$("#items").addEventListener("scroll", () => drawItems(false));
$("#items").addEventListener("click", (e) => {
  const diff = e.target.closest("button.diff");
  if (diff) { showDiff(diff.dataset.sha); return; }
  const row = e.target.closest(".item");
  if (row) { state.selected = row.dataset.item; drawItems(true); renderItemDetail(); }
});

function renderItemDetail() {
  const panel = $("#item-detail"), d = state.detail;
  const it = d && d.items.find((i) => i.id === state.selected);
  if (!it) { panel.hidden = true; return; }
  const job = d.jobs[it.id] || { failures: [], tests: [], commits: [] };
  const failures = job.failures.map(([n, text]) => `<h4>attempt ${esc(n)} failed</h4><pre class="failure">${esc(text)}</pre>`).join("");
  const tests = job.tests.map(([ok, failing]) => `<li>${ok ? "passed" : "failed " + esc(failing.join(", "))}</li>`).join("");
  const transcripts = d.transcripts.filter((n) => n.includes(it.id)).map((n) =>
    `<li><a href="/api/transcript?key=${encodeURIComponent(state.key)}&name=${encodeURIComponent(n)}" target="_blank">${esc(n)}</a></li>`).join("");
  const commits = it.commits.map((c) => `<button class="diff" data-sha="${esc(c)}">diff ${esc(c.slice(0, 7))}</button>`).join(" ");
  panel.innerHTML = `<h3>${esc(it.id)} · ${esc(it.title)} ${badge(it.status)}</h3>
    ${it.location ? `<p class="muted">${esc(it.location)}</p>` : ""}
    ${it.error ? `<h4>last error</h4><pre class="failure">${esc(it.error)}</pre>` : ""}
    ${failures}${tests ? `<h4>test runs</h4><ul>${tests}</ul>` : ""}
    ${transcripts ? `<h4>agent transcripts</h4><ul>${transcripts}</ul>` : ""}
    ${commits ? `<p>${commits}</p>` : ""}`;
  panel.hidden = false;
}
$("#item-detail").addEventListener("click", (e) => {
  const diff = e.target.closest("button.diff");
  if (diff) showDiff(diff.dataset.sha);
});

function colorDiff(text) {
  return text.split("\n").map((l) => {
    const cls = l.startsWith("+") && !l.startsWith("+++") ? "add" : l.startsWith("-") && !l.startsWith("---") ? "del" : l.startsWith("@@") ? "hunk" : "";
    return cls ? `<span class="${cls}">${esc(l)}\n</span>` : esc(l) + "\n";
  }).join("");
}
async function showDiff(sha) {
  const pane = $("#diff");
  $("#diff-title").textContent = "commit " + sha.slice(0, 12);
  pane.hidden = false;
  try {
    const text = await api(`/api/commit?key=${encodeURIComponent(state.key)}&sha=${encodeURIComponent(sha)}`);
    pane.querySelector("pre").innerHTML = colorDiff(text);
    pane.dataset.sha = sha;
    pane.scrollIntoView({ block: "nearest" });
  } catch (err) {
    pane.querySelector("pre").textContent = err.message;
  }
}
$("#diff-close").addEventListener("click", () => { $("#diff").hidden = true; });

function renderExtras() {
  const d = state.detail, x = d.extras || {}, out = [];
  if (x.plan && x.plan.length) {
    const byWave = new Map();
    const status = new Map(d.items.map((i) => [i.id, i.status]));
    for (const t of x.plan) {
      const w = t.wave ?? 0;
      if (!byWave.has(w)) byWave.set(w, []);
      byWave.get(w).push(t);
    }
    const waves = [...byWave.keys()].sort((a, b) => a - b).map((w) => `<div class="wave"><h3>wave ${w}</h3>${byWave.get(w).map((t) =>
      `<div class="task ${esc(status.get(t.id) || "")}"><b>${esc(t.id)}</b> ${esc(t.title)}<small>${t.deps.length ? "after " + esc(t.deps.join(", ")) : "no dependencies"}</small></div>`).join("")}</div>`).join("");
    out.push(`<div class="extra"><h2>Plan (waves and dependencies)</h2><div class="waves">${waves}</div></div>`);
  }
  const checked = (x.plan || []).filter((t) => t.tests_passed !== null || t.files_modified.length);
  if (checked.length) {
    const commits = new Map(d.items.map((i) => [i.id, i.commits]));
    out.push(`<div class="extra"><h2>Verification</h2><table id="verification"><thead><tr><th>task</th><th>check run by the engine</th><th>passed</th><th>files changed</th><th>commit</th></tr></thead><tbody>${checked.map((t) =>
      `<tr><td>${esc(t.id)}</td><td><code>${esc(t.check)}</code></td><td>${t.tests_passed === null ? "–" : t.tests_passed ? "yes" : "no"}</td><td>${esc(t.files_modified.join(", "))}</td><td>${(commits.get(t.id) || []).map((c) => `<button class="diff" data-sha="${esc(c)}">${esc(c.slice(0, 7))}</button>`).join(" ")}</td></tr>`).join("")}</tbody></table></div>`);
  }
  const verified = Object.entries(x.verified || {});
  if (verified.length) {
    out.push(`<div class="extra"><h2>Verification</h2><table><thead><tr><th>task</th><th>commit</th><th>check</th><th>attempts</th><th>outside scope</th></tr></thead><tbody>${verified.map(([id, v]) =>
      `<tr><td>${esc(id)}</td><td>${v.commit ? `<button class="diff" data-sha="${esc(v.commit)}">${esc(v.commit.slice(0, 7))}</button>` : "–"}</td><td>${esc(v.check || "")}</td><td>${v.attempts}</td><td>${esc((v.outside_scope || []).join(", "))}</td></tr>`).join("")}</tbody></table></div>`);
  }
  if (x.stages && x.stages.length) {
    out.push(`<div class="extra"><h2>Plan stages</h2><ul>${x.stages.map((s) => `<li>stage ${s.stage}: ${esc(s.groups.join(", "))}${s.depends_on.length ? " (after " + esc(s.depends_on.join(", ")) + ")" : ""}</li>`).join("")}</ul></div>`);
  }
  if (x.gate) {
    const g = x.gate, a = g.answer;
    const answer = a ? `<p class="answer">${esc(a.decision)}d at ${esc(a.at)} by ${esc(a.by)} (${esc(a.origin)})</p>` : `<p class="muted">The run stopped here: nobody could be asked. Approve lands and pushes the patch as a confirmed run does; decline drops it and escalates.</p>`;
    const evidence = g.evidence.map((e) => `<li>line ${e.line} <code>${esc(e.rule)}</code>: <code>${esc(e.text)}</code></li>`).join("");
    out.push(`<div class="extra" id="gate"><h2>Waiting for confirmation: iteration ${g.iteration}</h2>
      <p>${esc(g.prompt)}</p>${answer}
      <table><tbody><tr><th>classification</th><td>${esc(g.classification)}/${esc(g.sub_class)}</td></tr>
      <tr><th>why it asks</th><td>${esc(g.reason)}</td></tr>
      <tr><th>failed checks</th><td>${esc(g.checks.join(", "))}</td></tr>
      <tr><th>files</th><td>${esc(g.files.join(", "))}</td></tr>
      <tr><th>kept as</th><td><code>${esc(g.commit.slice(0, 12))}</code> on branch <code>${esc(g.branch)}</code> (not applied)</td></tr></tbody></table>
      <h3>Classification evidence</h3><ul class="evidence">${evidence}</ul>
      <h3>The patch</h3><pre class="gate-diff">${colorDiff(g.diff)}</pre></div>`);
  }
  for (const a of x.audit || []) {
    out.push(`<div class="extra"><h2>Iterations and classification evidence (${esc(a.file)})</h2><pre>${esc(a.text)}</pre></div>`);
  }
  $("#extras").innerHTML = out.join("");
}
$("#extras").addEventListener("click", (e) => {
  const diff = e.target.closest("button.diff");
  if (diff) showDiff(diff.dataset.sha);
});

async function act(what) {
  showMessage("");
  try {
    const result = await api(`/api/${what}?key=${encodeURIComponent(state.key)}`, { method: "POST" });
    showMessage(result.done);
  } catch (err) {
    showMessage(err.message);
  }
  loadSession();
}
$("#approve").addEventListener("click", () => act("approve"));
$("#cancel").addEventListener("click", () => act("cancel"));
$("#decline").addEventListener("click", () => act("decline"));

// ---- routing ----
function route() {
  const m = location.hash.match(/^#\/s\/(.+)$/);
  const key = m ? decodeURIComponent(m[1]) : null;
  if (key !== state.key) {
    state.key = key;
    state.detail = null;
    state.selected = null;
    $("#diff").hidden = true;
    showMessage("");
    connect();
  }
  $("#list-view").hidden = !!key;
  $("#session-view").hidden = !key;
  if (key) loadSession();
}
window.addEventListener("hashchange", route);
api("/api/sessions").then((s) => { state.sessions = s; renderList(); }).catch((e) => { $("#empty").hidden = false; $("#empty").textContent = e.message; });
route();
if (!state.source) connect();
