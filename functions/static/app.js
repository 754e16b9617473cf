// The job list page: plain JavaScript over the HTTP API, no build step.
// Every URL is relative to the page, so the page works under an API Gateway stage prefix.
"use strict";

const REFRESH_MS = 5000;
const PAGE_SIZE = 50;
const WAITING = new Set(["waiting", "queued", "retrying"]);
const RETRYABLE = new Set(["dead", "cancelled"]);

const state = { view: "jobs", cursor: null, jobs: [], operator: false, timer: null };
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

async function api(method, path, query) {
  const url = new URL(path, document.baseURI);
  for (const [key, value] of Object.entries(query || {})) {
    if (value !== null && value !== undefined && value !== "") url.searchParams.set(key, value);
  }
  const headers = { Accept: "application/json" };
  if (method !== "GET") headers["Content-Type"] = "application/json";
  if (bearer) headers.Authorization = "Bearer " + bearer;
  const response = await fetch(url, { method, headers, credentials: "same-origin" });
  const text = await response.text();
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch (_) {
    body = { message: text };
  }
  if (!response.ok) {
    const reason = (body && (body.message || body.error)) || response.statusText;
    const error = new Error(`${method} ${url.pathname}: ${response.status} ${reason}`);
    error.status = response.status;
    throw error;
  }
  return body;
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

function when(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  return date.toLocaleString(undefined, {
    month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit",
  });
}

function age(seconds) {
  if (seconds === null || seconds === undefined) return "";
  if (seconds < 90) return `${seconds.toFixed(1)} s`;
  if (seconds < 5400) return `${(seconds / 60).toFixed(1)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

function progress(value) {
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

// The user's jobs

function filters() {
  return { status: $("filter-status").value, type: $("filter-type").value.trim() };
}

async function loadJobs(append) {
  const query = { ...filters(), limit: PAGE_SIZE, cursor: append ? state.cursor : null };
  const page = await api("GET", "jobs", query);
  const jobs = Array.isArray(page) ? page : page.jobs || [];
  state.jobs = append ? state.jobs.concat(jobs) : jobs;
  state.cursor = Array.isArray(page) ? null : page.next_cursor || null;
  renderJobs();
}

function renderJobs() {
  const body = $("jobs").tBodies[0];
  body.replaceChildren(...state.jobs.map(jobRow));
  $("empty").hidden = state.jobs.length > 0;
  $("more").hidden = !state.cursor;
  const types = new Set(state.jobs.map((job) => job.type));
  $("known-types").replaceChildren(...[...types].sort().map((t) => el("option", { value: t })));
}

function jobRow(job) {
  const actions = el("td", { className: "actions" });
  if (RETRYABLE.has(job.status)) actions.append(action("Retry", job, "retry"));
  if (WAITING.has(job.status)) actions.append(action("Cancel", job, "cancel"));
  const row = el("tr", { dataJobId: job.id, dataStatus: job.status },
    el("td", {}, el("a", { href: "#", className: "job-link", title: job.id }, "…" + job.id.slice(-8))),
    el("td", {}, job.type),
    el("td", {}, job.queue),
    el("td", {}, el("span", { className: `status status-${job.status}` }, job.status)),
    el("td", { className: "num" }, `${job.attempts}/${job.max_attempts}`),
    el("td", {}, progress(job.progress)),
    el("td", { title: job.created_at }, when(job.created_at)),
    el("td", { title: job.updated_at }, when(job.updated_at)),
    el("td", { className: "error-text", title: job.error || "" }, job.error || ""),
    actions);
  row.querySelector(".job-link").addEventListener("click", (event) => {
    event.preventDefault();
    openDetail(job.id).catch((error) => show(error.message, true));
  });
  return row;
}

function action(label, job, verb) {
  const button = el("button", { type: "button", className: `action-${verb}` }, label);
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      const changed = await api("POST", `jobs/${encodeURIComponent(job.id)}/${verb}`);
      show(`${label === "Retry" ? "Retried" : "Cancelled"} ${job.type} job …${job.id.slice(-8)}: now ${changed.status}`);
      await refresh();
    } catch (error) {
      show(error.message, true);
      button.disabled = false;
    }
  });
  return button;
}

async function openDetail(id) {
  const job = await api("GET", `jobs/${encodeURIComponent(id)}`);
  $("detail-title").textContent = `${job.type} ${job.id}`;
  const fields = ["status", "queue", "attempts", "max_attempts", "priority", "idempotency_key",
    "run_after", "lease_until", "created_at", "started_at", "finished_at", "error"];
  $("detail-fields").replaceChildren(...fields.flatMap((name) => [
    el("dt", {}, name.replace(/_/g, " ")),
    el("dd", {}, job[name] === null || job[name] === undefined ? "—" : String(job[name])),
  ]));
  $("detail-payload").textContent = JSON.stringify(job.payload, null, 2);
  $("detail-result").textContent = job.result === null ? "—" : JSON.stringify(job.result, null, 2);
  $("detail-errors").textContent = (job.errors || []).length
    ? job.errors.map((e) => `#${e.attempt} ${e.at}  ${e.error}`).join("\n")
    : "—";
  renderSteps(job);
  $("detail-parents").replaceChildren(...relatives(job.after));
  $("detail-children").replaceChildren(...relatives(job.children));
  if (!$("detail").open) $("detail").showModal();
}

// The jobs around one job: each a link that opens that job in the same dialog.
function relatives(jobs) {
  if (!jobs || !jobs.length) return [el("li", { className: "muted" }, "none")];
  return jobs.map((other) => {
    const link = el("a", { href: "#", dataJobId: other.id }, `${other.type} …${other.id.slice(-8)}`);
    link.addEventListener("click", (event) => {
      event.preventDefault();
      openDetail(other.id).catch((error) => show(error.message, true));
    });
    return el("li", {}, link, " ",
      el("span", { className: `status status-${other.status}` }, other.status));
  });
}

// A job's durable steps (GET /jobs/{id} adds steps, waiting_for and resumes)
function renderSteps(job) {
  const steps = job.steps || [];
  $("detail-steps").tBodies[0].replaceChildren(...steps.map((step) => el("tr", {},
    el("td", {}, step.name),
    el("td", { title: step.finished_at }, when(step.finished_at)),
    el("td", { className: "num" }, step.size))));
  $("detail-steps").hidden = steps.length === 0;
  const notes = [];
  if (job.waiting_for) notes.push(`waiting: ${job.waiting_for.description}`);
  if (job.resumes) notes.push(`resumed ${job.resumes} ${job.resumes === 1 ? "time" : "times"}`);
  if (!steps.length && !notes.length) notes.push("no steps");
  $("detail-waiting").textContent = notes.join(" · ");
}

// The operator view

async function loadOperator() {
  const stats = await api("GET", "admin/stats");
  const rows = (stats.queues || []).map((q) => el("tr", { dataQueue: q.queue },
    el("td", {}, q.queue),
    el("td", { className: "num" }, q.depth),
    el("td", { className: "num" }, age(q.oldest_runnable_seconds)),
    el("td", { className: "num" }, q.waiting),
    el("td", { className: "num" }, q.running),
    el("td", { className: "num" }, q.retrying),
    el("td", { className: q.dead ? "num dead" : "num" }, q.dead),
    el("td", { className: "num" }, q.total)));
  $("queues").tBodies[0].replaceChildren(...rows);
  const groups = (stats.groups || []).map((g) => el("tr", { dataGroup: g.group },
    el("td", {}, g.queue),
    el("td", {}, g.group || "(shared)"),
    el("td", { className: "num" }, g.waiting),
    el("td", { className: "num" }, g.running),
    el("td", { className: "num" }, age(g.oldest_runnable_seconds))));
  $("groups").tBodies[0].replaceChildren(...groups);
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
}

// Wiring

async function refresh() {
  try {
    if (state.view === "operator") await loadOperator();
    else await loadJobs(false);
    $("updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
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
  refresh();
}

$("filters").addEventListener("submit", (event) => {
  event.preventDefault();
  refresh();
});
$("filter-status").addEventListener("change", refresh);
$("more").addEventListener("click", () => loadJobs(true).catch((e) => show(e.message, true)));
$("auto-refresh").addEventListener("change", schedule);
$("detail-close").addEventListener("click", () => $("detail").close());
for (const tab of document.querySelectorAll(".tab")) {
  tab.addEventListener("click", () => switchView(tab.dataset.view));
}

offerSignIn().catch((e) => show(e.message, true));
whoAmI();
refresh();
schedule();
