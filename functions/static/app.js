// The job list page: plain JavaScript over the HTTP API, no build step.
// Every URL is relative to the page, so the page works under an API Gateway stage prefix.
"use strict";

const REFRESH_MS = 5000;
const PAGE_SIZE = 50;
const WAITING = new Set(["queued", "retrying", "waiting"]);
const RETRYABLE = new Set(["dead", "cancelled"]);
const FILTERS = ["status", "type", "queue", "group", "error", "from", "to"];

const state = {
  view: "jobs", scope: "mine", cursor: null, jobs: [], operator: false, timer: null,
  selected: new Set(), focus: -1, queues: [], pending: null,
};
const $ = (id) => document.getElementById(id);

// Identity: API Gateway's JWT authorizer reads the Authorization header. The page starts
// its own sign-in: it sends the browser to the configured sign-in URL (e.g. the Cognito
// hosted UI's authorize URL, response_type=token) with a one-use random `state` kept for
// this tab, and takes a token from the "#id_token=...&state=..." it comes back with only
// when that state matches. A link carrying someone else's token (login CSRF) signs nobody
// in. Locally, `tickq serve` supplies the identity instead.
const TOKEN_KEY = "tickq-token";
const STATE_KEY = "tickq-sign-in-state";

function token() {
  const hash = new URLSearchParams(window.location.hash.slice(1));
  const given = hash.get("id_token") || hash.get("access_token");
  if (given) {
    history.replaceState(null, "", window.location.pathname + window.location.search);
    const expected = sessionStorage.getItem(STATE_KEY);
    sessionStorage.removeItem(STATE_KEY);
    if (expected && hash.get("state") === expected) sessionStorage.setItem(TOKEN_KEY, given);
  }
  return sessionStorage.getItem(TOKEN_KEY);
}

function signIn(url) {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  const nonce = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  sessionStorage.setItem(STATE_KEY, nonce);
  const target = new URL(url, document.baseURI);
  target.searchParams.set("state", nonce);
  window.location.assign(target.href);
}

async function offerSignIn() {
  if (bearer) return;
  const config = await fetch(new URL("ui/config.json", document.baseURI)).then((r) => r.json());
  if (!config || !config.sign_in_url) return;
  $("sign-in").hidden = false;
  $("sign-in").addEventListener("click", () => signIn(config.sign_in_url));
}
const bearer = token();

async function api(method, path, query, body) {
  const url = new URL(path, document.baseURI);
  for (const [key, value] of Object.entries(query || {})) {
    if (value !== null && value !== undefined && value !== "") url.searchParams.set(key, value);
  }
  const headers = { Accept: "application/json" };
  if (method !== "GET") headers["Content-Type"] = "application/json";
  if (bearer) headers.Authorization = "Bearer " + bearer;
  const init = { method, headers, credentials: "same-origin" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(url, init);
  const text = await response.text();
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch (_) {
    parsed = { message: text };
  }
  if (!response.ok) {
    const reason = (parsed && (parsed.message || parsed.error)) || response.statusText;
    const error = new Error(`${method} ${url.pathname}: ${response.status} ${reason}`);
    error.status = response.status;
    error.body = parsed;
    throw error;
  }
  return parsed;
}

// Rendering helpers: text goes through textContent only, never innerHTML.

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "className") node.className = value;
    else if (key.startsWith("data")) node.setAttribute(key.replace(/[A-Z]/g, (c) => "-" + c.toLowerCase()), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

// Every time on the page, in the list, the detail and the operator view (time.js).
const when = (iso) => window.tickqTime.when(iso);

function age(seconds) {
  if (seconds === null || seconds === undefined) return "";
  if (seconds < 90) return `${seconds.toFixed(1)} s`;
  if (seconds < 5400) return `${(seconds / 60).toFixed(1)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

// A succeeded job's last report is history (it may have stopped at 7/10 before the end),
// and so is the failure of an earlier attempt: the list shows neither as the job's state.
const SETTLED = "succeeded";

// A list leaves out a large progress (null, its size in the job's "truncated"): the detail
// has it.
function progress(value, status, leftOut) {
  if (status === SETTLED) return el("span", { className: "muted" }, "done");
  if (leftOut) return el("span", { className: "muted", title: `${leftOut} bytes: in the job's detail` }, "(large)");
  if (value === null || value === undefined) return "";
  if (typeof value === "number") return value <= 1 ? `${Math.round(value * 100)} %` : String(value);
  if (typeof value === "object") {
    const done = value.done ?? value.chunks ?? value.current;
    const total = value.of ?? value.total;
    if (typeof done === "number" && typeof total === "number" && total > 0) {
      // CSSOM, not a style attribute: the page's content security policy forbids inline styles.
      const fill = el("span", {});
      fill.style.width = `${Math.min(100, (100 * done) / total)}%`;
      return el("span", { className: "bar", title: JSON.stringify(value) }, fill,
        el("em", {}, `${done}/${total}`));
    }
  }
  return JSON.stringify(value);
}

function show(message, isError) {
  const node = $("message");
  node.textContent = message || "";
  node.className = isError ? "error" : "";
  node.hidden = !message;
}

function showResults(verb, results) {
  const changed = results.filter((r) => r.changed).length;
  show(`${verb} ${changed} of ${results.length} selected job${results.length === 1 ? "" : "s"}`);
  $("bulk-results").replaceChildren(...results.map((r) => el("li",
    { dataJobId: r.id, dataOutcome: r.outcome, className: r.changed ? "ok" : "refused" },
    el("code", {}, "…" + r.id.slice(-8)), ` ${r.outcome}`, r.status ? ` (now ${r.status})` : "")));
  $("bulk-results").hidden = results.length === 0;
}

// The URL keeps the view and the filters, so a link shows the same list.

function readUrl() {
  const params = new URLSearchParams(window.location.search);
  state.view = params.get("view") === "operator" ? "operator" : "jobs";
  state.scope = params.get("scope") === "all" ? "all" : "mine";
  $("filter-scope").value = state.scope;
  $("filter-status").value = params.get("status") || "";
  $("filter-type").value = params.get("type") || "";
  $("filter-queue").value = params.get("queue") || "";
  $("filter-group").value = params.get("group") || "";
  $("filter-error").value = params.get("error") || "";
  $("filter-from").value = localInput(params.get("from"));
  $("filter-to").value = localInput(params.get("to"));
  $("chart-window").value = params.get("window") === "day" ? "day" : "hour";
  state.chartQueue = params.get("chart_queue") || "";
}

function writeUrl() {
  const params = new URLSearchParams();
  if (state.view !== "jobs") params.set("view", state.view);
  if (state.scope !== "mine") params.set("scope", state.scope);
  for (const [key, value] of Object.entries(filters())) if (value) params.set(key, value);
  if ($("chart-window").value !== "hour") params.set("window", $("chart-window").value);
  if ($("chart-queue").value) params.set("chart_queue", $("chart-queue").value);
  const search = params.toString();
  history.replaceState(null, "", window.location.pathname + (search ? "?" + search : ""));
}

function localInput(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return "";
  const local = new Date(date.getTime() - date.getTimezoneOffset() * 60000);
  return local.toISOString().slice(0, 19);
}

function isoFromInput(value) {
  if (!value) return "";
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? "" : date.toISOString();
}

// The job list: the caller's own jobs, or every user's for operators.

function filters() {
  return {
    status: $("filter-status").value,
    type: $("filter-type").value.trim(),
    queue: $("filter-queue").value.trim(),
    group: $("filter-group").value.trim(),
    error: $("filter-error").value.trim(),
    from: isoFromInput($("filter-from").value),
    to: isoFromInput($("filter-to").value),
  };
}

function listPath() {
  return state.scope === "all" ? "admin/jobs" : "jobs";
}

async function loadJobs(append) {
  const query = { ...filters(), limit: PAGE_SIZE, cursor: append ? state.cursor : null };
  const page = await api("GET", listPath(), query);
  const jobs = page.jobs || [];
  state.jobs = append ? state.jobs.concat(jobs) : jobs;
  state.cursor = page.next_cursor || null;
  const shown = new Set(state.jobs.map((job) => job.id));
  for (const id of [...state.selected]) if (!shown.has(id)) state.selected.delete(id);
  renderJobs();
}

function renderJobs() {
  const body = $("jobs").tBodies[0];
  body.replaceChildren(...state.jobs.map(jobRow));
  $("empty").hidden = state.jobs.length > 0;
  $("more").hidden = !state.cursor;
  const types = new Set(state.jobs.map((job) => job.type));
  $("known-types").replaceChildren(...[...types].sort().map((t) => el("option", { value: t })));
  if (state.focus >= state.jobs.length) state.focus = state.jobs.length - 1;
  renderSelection();
}

// A job's state: its status, but "suspended" for a durable job queued with a wait (a
// signal, a sleep, its children, a step's retry), which no worker may claim before it ends.
function statusBadge(job) {
  const shown = job.state || job.status;
  const title = shown === "suspended" && job.wait_kind ? `waiting for ${job.wait_kind}` : "";
  return el("span", { className: `status status-${shown}`, title }, shown);
}

function jobRow(job, index) {
  const actions = el("td", { className: "actions" });
  if (RETRYABLE.has(job.status)) actions.append(action("Retry", job, "retry"));
  if (WAITING.has(job.status)) actions.append(action("Cancel", job, "cancel"));
  const box = el("input", { type: "checkbox", className: "select", "aria-label": `select job ${job.id}` });
  box.checked = state.selected.has(job.id);
  box.addEventListener("change", () => select(job.id, box.checked));
  const row = el("tr", { dataJobId: job.id, dataStatus: job.status, tabindex: "-1" },
    el("td", {}, box),
    el("td", {}, el("a", { href: "#", className: "job-link", title: job.id }, "…" + job.id.slice(-8))),
    el("td", {}, job.type),
    el("td", {}, job.queue),
    el("td", { className: "owner", title: job.user_id || "" }, job.user_id ? "…" + job.user_id.slice(-8) : "—"),
    el("td", { className: "group", title: job.group_key || "" }, job.group_key || ""),
    el("td", {}, statusBadge(job)),
    el("td", { className: "num" }, attemptsText(job)),
    el("td", {}, progress(job.progress, job.status, (job.truncated || {}).progress)),
    el("td", { title: job.created_at }, when(job.created_at)),
    el("td", { title: job.updated_at }, when(job.updated_at)),
    el("td", { className: "error-text", title: job.error || "" }, standingError(job)),
    actions);
  row.querySelector(".job-link").addEventListener("click", (event) => {
    event.preventDefault();
    openDetail(job.id).catch((error) => show(error.message, true));
  });
  row.addEventListener("focus", () => { state.focus = index; });
  return row;
}

// The failure that stands on the job: none once it succeeded (the error history keeps it).
// A list cuts a long error (named in the job's "truncated"); the detail has it whole.
function standingError(job) {
  if (job.status === SETTLED || !job.error) return "";
  return (job.truncated || {}).error ? `${job.error}…` : job.error;
}

function select(id, on) {
  if (on) state.selected.add(id);
  else state.selected.delete(id);
  renderSelection();
}

function renderSelection() {
  const count = state.selected.size;
  $("selected-count").textContent = count ? `${count} selected` : "none selected";
  $("bulk-retry").disabled = count === 0;
  $("bulk-cancel").disabled = count === 0;
  for (const row of $("jobs").tBodies[0].rows) {
    const on = state.selected.has(row.dataset.jobId);
    row.classList.toggle("selected", on);
    row.querySelector("input.select").checked = on;
  }
  const page = state.jobs.length > 0 && state.jobs.every((job) => state.selected.has(job.id));
  $("select-page").checked = page;
}

function action(label, job, verb) {
  const button = el("button", { type: "button", className: `action-${verb}` }, label);
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      if (state.scope === "all") {
        const answer = await api("POST", "admin/jobs/actions", null, { action: verb, ids: [job.id] });
        showResults(verb === "retry" ? "Retried" : "Cancelled", answer.results);
      } else {
        const changed = await api("POST", `jobs/${encodeURIComponent(job.id)}/${verb}`);
        show(`${label === "Retry" ? "Retried" : "Cancelled"} ${job.type} job …${job.id.slice(-8)}: now ${changed.status}`);
      }
      await refresh();
    } catch (error) {
      show(error.message, true);
      button.disabled = false;
    }
  });
  return button;
}

async function bulk(verb) {
  const ids = [...state.selected];
  if (!ids.length) return;
  const path = state.scope === "all" ? "admin/jobs/actions" : "jobs/actions";
  try {
    const answer = await api("POST", path, null, { action: verb, ids });
    showResults(verb === "retry" ? "Retried" : "Cancelled", answer.results);
    state.selected.clear();
    await loadJobs(false);
  } catch (error) {
    show(error.message, true);
  }
}

// Keyboard: arrows or j/k move between rows, space or x selects, enter opens the detail.
function onListKey(event) {
  if ($("detail").open || state.view !== "jobs") return;
  const target = event.target;
  if (target.closest && target.closest("form, dialog")) return;
  const rows = $("jobs").tBodies[0].rows;
  if (!rows.length) return;
  const move = { ArrowDown: 1, j: 1, ArrowUp: -1, k: -1 }[event.key];
  if (move) {
    event.preventDefault();
    const next = Math.max(0, Math.min(rows.length - 1, state.focus + move));
    state.focus = next;
    rows[next].focus();
    return;
  }
  const row = rows[state.focus];
  if (!row) return;
  if (event.key === " " || event.key === "x") {
    event.preventDefault();
    select(row.dataset.jobId, !state.selected.has(row.dataset.jobId));
  } else if (event.key === "Enter" && target.tagName !== "BUTTON" && target.tagName !== "A") {
    event.preventDefault();
    openDetail(row.dataset.jobId).catch((error) => show(error.message, true));
  }
}

// Attempts against the max_attempts declared, a saga's compensation's runs apart.
function attemptsText(job) {
  const runs = job.compensation_runs ? `, compensation runs ${job.compensation_runs}` : "";
  return `${job.attempts}/${job.max_attempts}${runs}`;
}

// The job detail, with its steps and its graph. In the "every user's" list it comes from
// the operator's route, which shows any user's job without its payload or results; the
// caller's own list asks for the caller's job, payload included.

const DETAIL_FIELDS = [["status"], ["state"], ["queue"], ["user_id", "owner"], ["group_key", "group"],
  ["attempts"], ["max_attempts"], ["compensation_runs", "compensation runs"], ["priority"], ["idempotency_key"], ["run_after"],
  ["lease_until"], ["created_at"], ["started_at"], ["finished_at"], ["timeout_seconds", "timeout"],
  ["error"], ["timed_out", "timed out"]];
const TIMES = new Set(["run_after", "lease_until", "created_at", "started_at", "finished_at"]);
const HIDDEN = "(not shown to operators)";

function detailPath(id) {
  const path = `jobs/${encodeURIComponent(id)}`;
  return state.scope === "all" ? `admin/${path}` : path;
}

function fieldText(job, name) {
  const value = name === "error" ? standingError(job) : job[name];
  if (value === null || value === undefined || value === "") return "—";
  if (name === "timeout_seconds") return `${value} s`;
  // The last attempt stopped at its timeout: after how long, and how (cancelled, killed or
  // abandoned), as the job's error says it.
  if (name === "timed_out") return `after ${value.after_seconds} s, ${value.stopped}`;
  return TIMES.has(name) ? when(value) : String(value);
}

async function openDetail(id) {
  const job = await api("GET", detailPath(id));
  $("detail-title").textContent = `${job.type} ${job.id}`;
  $("detail-fields").replaceChildren(...DETAIL_FIELDS.flatMap(([name, label]) => [
    el("dt", {}, label || name.replace(/_/g, " ")),
    el("dd", { dataField: name, title: job[name] && typeof job[name] !== "object" ? String(job[name]) : "" }, fieldText(job, name)),
  ]), ...(job.gate ? [el("dt", {}, job.gate.kind), el("dd", {}, job.gate.summary)] : []),
  // The key that alone keeps it from starting now (both detail routes say it).
  ...(job.held_by_flow_key ? [el("dt", {}, "flow"),
    el("dd", { id: "detail-flow" }, `held by flow key ${job.held_by_flow_key}`)] : []));
  const handled = handling(job);
  if (handled.length) {
    $("detail-fields").append(el("dt", {}, "handler"), el("dd", { id: "detail-handling" }, handled.join(" · ")));
  }
  renderSteps(job);
  renderGraph(job);
  $("detail-payload").textContent = "payload" in job ? JSON.stringify(job.payload, null, 2) : HIDDEN;
  $("detail-result").textContent = !("result" in job) ? HIDDEN
    : job.result === null ? "—" : JSON.stringify(job.result, null, 2);
  $("detail-errors").textContent = (job.errors || []).length
    ? job.errors.map((e) => `#${e.attempt} ${when(e.at)}  ${e.error}`).join("\n")
    : "—";
  if (!$("detail").open) $("detail").showModal();
}

// How the job's handler ran it (both detail routes add batch_id and completed_in_transaction),
// in the words of `tickq show`.
function handling(job) {
  const notes = [];
  if (job.batch_id) notes.push(`part of batch ${job.batch_id}`);
  if (job.completed_in_transaction) notes.push("completed in the handler's transaction");
  return notes;
}

// A job's durable steps (both detail routes add steps, waiting_for, resumes and maps).
function renderSteps(job) {
  $("detail-steps-section").hidden = job.steps === undefined;
  const steps = job.steps || [];
  const replayable = job.status === "dead" || job.status === "cancelled";
  $("detail-steps").tBodies[0].replaceChildren(...steps.map((step) => el("tr", { dataStep: step.name },
    el("td", {}, step.name),
    el("td", { title: step.finished_at || "" }, when(step.finished_at)),
    el("td", { className: "num" }, step.size),
    el("td", { className: "num" }, step.tries ?? 1),
    el("td", { className: "actions" }, replayable ? replayButton(job, step.name) : ""))));
  $("detail-steps").hidden = steps.length === 0;
  const notes = [];
  if (job.waiting_for) notes.push(`waiting: ${job.waiting_for.description}`);
  if (job.resumes) notes.push(`resumed ${job.resumes} ${job.resumes === 1 ? "time" : "times"}`);
  if (job.code_version) notes.push(`last ran under code ${job.code_version}`);
  // A map step is listed only once its children have all ended; until then, how far they are.
  for (const map of job.maps || []) notes.push(`map ${map.step}: ${map.ended} of ${map.children} children ended`);
  for (const step of job.retrying_steps || []) notes.push(`step ${step.name} tried ${step.tries}x: ${step.error}`);
  const undone = (job.undone || []).filter((u) => u.undone_at).map((u) => u.name);
  if (job.compensation) notes.push(`compensating (${job.compensation.ends}); undone: ${undone.join(", ") || "nothing"}`);
  if (!steps.length && !notes.length) notes.push("no steps");
  $("detail-waiting").textContent = notes.join(" · ");
}

// Replay from a step: the job forgets this step and every later one, keeps the earlier.
function replayButton(job, name) {
  const button = el("button", { type: "button", className: "action-replay" }, "Replay from here");
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      await api("POST", `jobs/${encodeURIComponent(job.id)}/retry`, undefined, { from_step: name });
      show(`Job ${job.id} replays from step ${name}`);
      await openDetail(job.id);
    } catch (error) {
      show(error.message, true);
      button.disabled = false;
    }
  });
  return button;
}

// The jobs around one job (both detail routes add "after" and "children"): each a link
// that opens that job in the same dialog, with its status.
function renderGraph(job) {
  $("detail-graph-section").hidden = job.after === undefined;
  // A workflow's children (job.map, job.call) and the parent awaiting it join the graph.
  $("detail-parents").replaceChildren(...relatives([...(job.after || []), ...(job.spawned_by || [])]));
  $("detail-children").replaceChildren(...relatives([...(job.children || []), ...(job.spawned || [])]));
}

function relatives(jobs) {
  if (!jobs || !jobs.length) return [el("li", { className: "muted" }, "none")];
  return jobs.map((other) => {
    const link = el("a", { href: "#", className: "graph-link", dataJobId: other.id },
      `${other.type} …${other.id.slice(-8)}`);
    link.addEventListener("click", (event) => {
      event.preventDefault();
      openDetail(other.id).catch((error) => show(error.message, true));
    });
    return el("li", { dataStatus: other.status }, link, " ",
      el("span", { className: `status status-${other.status}` }, other.status));
  });
}

// The operator view

async function loadOperator() {
  const [stats, paused] = await Promise.all([api("GET", "admin/stats"), api("GET", "admin/queues")]);
  const pauses = new Map((paused.pauses || []).map((p) => [p.queue, p]));
  const queues = stats.queues || [];
  for (const queue of pauses.keys()) {
    if (!queues.some((q) => q.queue === queue)) {
      queues.push({ queue, depth: 0, oldest_runnable_seconds: null, waiting: 0, running: 0, retrying: 0, dead: 0, total: 0 });
    }
  }
  queues.sort((a, b) => a.queue.localeCompare(b.queue));
  state.queues = queues.map((q) => q.queue);
  $("queues").tBodies[0].replaceChildren(...queues.map((q) => queueRow(q, pauses.get(q.queue))));
  const groups = (stats.groups || []).map((g) => el("tr", { dataGroup: g.group },
    el("td", {}, g.queue),
    el("td", {}, g.group || "(shared)"),
    el("td", { className: "num" }, g.waiting),
    el("td", { className: "num" }, g.running),
    el("td", { className: "num" }, age(g.oldest_runnable_seconds))));
  $("groups").tBodies[0].replaceChildren(...(groups.length ? groups
    : [el("tr", { className: "none" }, el("td", { colspan: "5", className: "muted" }, "none"))]));
  const chosen = $("chart-queue").value || state.chartQueue || "";
  $("chart-queue").replaceChildren(el("option", { value: "" }, "every queue"),
    ...state.queues.map((name) => el("option", { value: name }, name)));
  $("chart-queue").value = state.queues.includes(chosen) ? chosen : "";
  await Promise.all([loadCharts(), loadOutbox(), loadFlow()]);
}

// Flow limits per key prefix, and the keys with jobs or a hold now.
async function loadFlow() {
  const flow = await api("GET", "admin/flow");
  const none = (columns) => [el("tr", { className: "none" },
    el("td", { colspan: String(columns), className: "muted" }, "none"))];
  const limits = (flow.limits || []).map(flowLimitRow);
  $("flow-limits").tBodies[0].replaceChildren(...(limits.length ? limits : none(4)));
  const keys = (flow.keys || []).map((k) => el("tr", { dataKey: k.key },
    el("td", {}, k.key),
    el("td", {}, k.prefix || "—"),
    el("td", { className: "num" }, k.running),
    el("td", { className: "num" }, k.waiting),
    el("td", {}, k.held_until ? when(k.held_until) : "")));
  $("flow-keys").tBodies[0].replaceChildren(...(keys.length ? keys : none(5)));
}

function flowLimitRow(limit) {
  const button = el("button", { type: "button", className: "action-clear" }, "Clear");
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      await api("POST", "admin/flow/clear", null, { prefix: limit.prefix });
      show(`Cleared the flow limit of ${limit.prefix}`);
      await loadFlow();
    } catch (error) {
      show(error.message, true);
      button.disabled = false;
    }
  });
  const rate = limit.rate_limit ? `${limit.rate_limit} per ${limit.rate_period_seconds} s` : "—";
  return el("tr", { dataPrefix: limit.prefix },
    el("td", {}, limit.prefix),
    el("td", { className: "num" }, limit.max_running ?? "—"),
    el("td", {}, rate),
    el("td", { className: "actions" }, button));
}

async function setFlowLimit(event) {
  event.preventDefault();
  const body = { prefix: $("flow-prefix").value.trim() };
  if ($("flow-max-running").value) body.max_running = Number($("flow-max-running").value);
  if ($("flow-rate").value.trim()) body.rate = $("flow-rate").value.trim();
  try {
    await api("POST", "admin/flow/limits", null, body);
    show(`Set the flow limit of ${body.prefix}`);
    await loadFlow();
  } catch (error) {
    show(error.message, true);
  }
}

async function holdFlowKey(event) {
  event.preventDefault();
  const body = { key: $("flow-hold-key").value.trim(), seconds: Number($("flow-hold-seconds").value) };
  try {
    const held = await api("POST", "admin/flow/hold", null, body);
    show(`Held ${held.key} until ${when(held.held_until)}`);
    await loadFlow();
  } catch (error) {
    show(error.message, true);
  }
}

// The outbox's backlog: events (Job Dead and the others) not yet on the event bus.
async function loadOutbox() {
  const backlog = await api("GET", "admin/outbox");
  const waiting = backlog.pending === 0 ? "none waiting"
    : `${backlog.pending} waiting, the oldest for ${age(backlog.oldest_seconds)}`
      + (backlog.most_attempts ? ` (sent up to ${backlog.most_attempts} times; see tickq events --pending)` : "");
  $("outbox-backlog").textContent = `Events to publish: ${waiting}.`;
}

function queueRow(q, pause) {
  const button = el("button", { type: "button", className: pause ? "action-resume" : "action-pause" },
    pause ? "Resume" : "Pause");
  button.addEventListener("click", async () => {
    button.disabled = true;
    const verb = pause ? "resume" : "pause";
    try {
      await api("POST", `admin/queues/${encodeURIComponent(q.queue)}/${verb}`);
      show(`${pause ? "Resumed" : "Paused"} queue ${q.queue}`);
      await loadOperator();
    } catch (error) {
      show(error.message, true);
      button.disabled = false;
    }
  });
  const pausedText = pause ? `paused by ${pause.paused_by} at ${when(pause.paused_at)}` : "";
  return el("tr", { dataQueue: q.queue, dataPaused: pause ? "true" : "false" },
    el("td", {}, q.queue),
    el("td", { className: "num" }, q.depth),
    el("td", { className: "num" }, age(q.oldest_runnable_seconds)),
    el("td", { className: "num" }, q.waiting ?? 0),
    el("td", { className: "num" }, q.running),
    el("td", { className: "num" }, q.retrying),
    el("td", { className: q.dead ? "num dead" : "num" }, q.dead),
    el("td", { className: "num" }, q.total),
    el("td", { className: pause ? "paused" : "" }, pausedText),
    el("td", { className: "actions" }, button));
}

async function loadCharts() {
  const window_ = $("chart-window").value;
  const data = await api("GET", "admin/charts", { window: window_, queue: $("chart-queue").value });
  const charts = window.tickqCharts;
  const perHour = window_ === "day";
  $("chart-zone").textContent = `times in ${window.tickqTime.zone(new Date())}, this browser's time zone`;
  const buckets = data.throughput || [];
  const sum = (key) => buckets.reduce((total, b) => total + (b[key] || 0), 0);
  $("throughput-totals").textContent =
    `(${sum("succeeded")} succeeded, ${sum("failed")} failed and retried, ${sum("dead")} dead)`;
  $("chart-throughput").replaceChildren(charts.throughputChart(buckets, perHour),
    charts.legend([["bar-succeeded", "succeeded"], ["bar-failed", "failed (retried)"], ["bar-dead", "dead"]]));
  const samples = mergeSamples(data.depth || []);
  const end = buckets.length ? new Date(new Date(buckets[buckets.length - 1].start).getTime() + (perHour ? 3600e3 : 60e3)) : new Date();
  const start = buckets.length ? new Date(buckets[0].start) : new Date(end.getTime() - (perHour ? 86400e3 : 3600e3));
  $("chart-depth").replaceChildren(
    charts.lineChart("queue depth", samples, [{ key: "depth", label: "depth" }, { key: "running", label: "running" }], start, end),
    charts.legend([["line-depth", "depth (queued or retrying)"], ["line-running", "running"]]));
  $("chart-age").replaceChildren(
    charts.lineChart("oldest runnable age", samples, [{ key: "oldest_runnable_seconds", label: "seconds" }], start, end));
}

// Samples of every queue at one instant add up: depth and running sum, the oldest age is the max.
function mergeSamples(samples) {
  const byTime = new Map();
  for (const s of samples) {
    const seen = byTime.get(s.sampled_at) || { sampled_at: s.sampled_at, depth: 0, running: 0, oldest_runnable_seconds: 0 };
    seen.depth += s.depth;
    seen.running += s.running;
    seen.oldest_runnable_seconds = Math.max(seen.oldest_runnable_seconds, s.oldest_runnable_seconds || 0);
    byTime.set(s.sampled_at, seen);
  }
  return [...byTime.values()];
}

async function countDead(event) {
  event.preventDefault();
  const query = { type: $("dead-type").value.trim(), queue: $("dead-queue").value.trim() };
  try {
    const answer = await api("GET", "admin/dead/count", query);
    state.pending = { ...query, expected: answer.count };
    $("dead-found").textContent = `${answer.count} dead job${answer.count === 1 ? "" : "s"} match`;
    $("dead-confirm").textContent = `Retry ${answer.count} dead job${answer.count === 1 ? "" : "s"}`;
    $("dead-confirm").hidden = answer.count === 0;
  } catch (error) {
    show(error.message, true);
  }
}

async function retryCounted() {
  const pending = state.pending;
  if (!pending) return;
  const body = { expected: pending.expected };
  if (pending.type) body.type = pending.type;
  if (pending.queue) body.queue = pending.queue;
  $("dead-confirm").hidden = true;
  state.pending = null;
  try {
    const answer = await api("POST", "admin/dead/retry", null, body);
    showResults("Retried", answer.results);
    $("dead-found").textContent = "";
    await loadOperator();
  } catch (error) {
    const current = error.body && error.body.current;
    show(current === undefined ? error.message : `${error.message}; count again`, true);
    $("dead-found").textContent = current === undefined ? "" : `${current} match now`;
  }
}

async function whoAmI() {
  try {
    const me = await api("GET", "me");
    $("who").textContent = `signed in as ${me.name}`;
    $("who").title = `owner ${me.user_id}`;
    state.operator = Boolean(me.operator);
  } catch (error) {
    show(error.message, true);
    state.operator = false;
  }
  $("tab-operator").hidden = !state.operator;
  $("scope-label").hidden = !state.operator;
  if (!state.operator && (state.view === "operator" || state.scope === "all")) {
    state.scope = "mine";
    $("filter-scope").value = "mine";
    switchView("jobs");
  }
}

// Wiring

async function refresh() {
  try {
    if (state.view === "operator") await loadOperator();
    else await loadJobs(false);
    $("updated").textContent = `updated ${when(new Date().toISOString())}`;
    if ($("message").className === "error") show("");
  } catch (error) {
    show(error.message, true);
  }
}

function schedule() {
  clearInterval(state.timer);
  state.timer = $("auto-refresh").checked ? setInterval(refresh, REFRESH_MS) : null;
}

function switchView(view) {
  state.view = view;
  for (const tab of document.querySelectorAll(".tab")) {
    tab.classList.toggle("active", tab.dataset.view === view);
  }
  $("view-jobs").hidden = view !== "jobs";
  $("view-operator").hidden = view !== "operator";
  writeUrl();
  refresh();
}

function applyFilters() {
  state.scope = $("filter-scope").value === "all" ? "all" : "mine";
  state.selected.clear();
  state.focus = -1;
  writeUrl();
  refresh();
}

$("filters").addEventListener("submit", (event) => {
  event.preventDefault();
  applyFilters();
});
$("filter-status").addEventListener("change", applyFilters);
$("filter-scope").addEventListener("change", applyFilters);
$("filter-clear").addEventListener("click", () => {
  for (const name of FILTERS) $(`filter-${name}`).value = "";
  applyFilters();
});
$("select-page").addEventListener("change", () => {
  for (const job of state.jobs) {
    if ($("select-page").checked) state.selected.add(job.id);
    else state.selected.delete(job.id);
  }
  renderSelection();
});
$("bulk-retry").addEventListener("click", () => bulk("retry"));
$("bulk-cancel").addEventListener("click", () => bulk("cancel"));
$("more").addEventListener("click", () => loadJobs(true).catch((e) => show(e.message, true)));
$("auto-refresh").addEventListener("change", schedule);
$("detail-close").addEventListener("click", () => $("detail").close());
$("chart-window").addEventListener("change", () => { writeUrl(); loadCharts().catch((e) => show(e.message, true)); });
$("chart-queue").addEventListener("change", () => { writeUrl(); loadCharts().catch((e) => show(e.message, true)); });
$("retry-dead").addEventListener("submit", countDead);
$("dead-confirm").addEventListener("click", retryCounted);
$("flow-set").addEventListener("submit", setFlowLimit);
$("flow-hold").addEventListener("submit", holdFlowKey);
document.addEventListener("keydown", onListKey);
for (const tab of document.querySelectorAll(".tab")) {
  tab.addEventListener("click", () => switchView(tab.dataset.view));
}

offerSignIn().catch((e) => show(e.message, true));
readUrl();
for (const tab of document.querySelectorAll(".tab")) {
  tab.classList.toggle("active", tab.dataset.view === state.view);
}
$("view-jobs").hidden = state.view !== "jobs";
$("view-operator").hidden = state.view !== "operator";
whoAmI().then(refresh);
schedule();
