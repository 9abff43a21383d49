// The lobby: the server's sessions (GET /v1/sessions, polled, live first, a page at a time; an
// arena's ranked episodes marked), a form that starts one (POST /v1/sessions), the recorded
// replays (GET /v1/replays, paged) and a link to the arena the server names (/healthz).
// Tokens of the sessions started here stay in sessionStorage so that this tab can stop them
// (DELETE needs the token) and play its human sessions on the watch page.

import { agentLabel, el, getJSON, loadToken, saveToken } from "./api.js";

const REFRESH_MS = 1000;
/** How often the game list is asked again while a planner is still compiling (or the server
 * did not answer), and otherwise (a planner service may restart). */
const COMPILING_POLL_MS = 2000;
const SETTLED_POLL_MS = 15000;
const form = document.getElementById("start");
const result = document.getElementById("start-result");
let games = [];

function watchLink(id) {
  return el("a", id, { href: `/watch?session=${encodeURIComponent(id)}` });
}

async function stop(id) {
  const token = loadToken(id);
  try {
    await getJSON(`/v1/sessions/${encodeURIComponent(id)}`, {
      method: "DELETE",
      headers: { Authorization: `Bearer ${token}` },
    });
  } catch (e) {
    result.textContent = `stopping ${id}: ${e.message}`;
    result.className = "error";
  }
  refresh();
}

function row(s) {
  const tr = el("tr");
  tr.dataset.session = s.id;
  const live = s.status === "running" || s.status === "waiting";
  const session = el("span");
  session.append(watchLink(s.id));
  // An arena's ranked episode: its seed stays hidden until it ends (a sealed session).
  if (s.sealed) session.append(" ", el("span", "ranked", { class: "tag", title: "a ranked episode of an arena (its seed hidden until it ends)" }));
  const cells = [
    session,
    el("span", s.game),
    el("span", agentLabel(s)),
    el("span", s.status + (s.reason ? ` (${s.reason})` : ""), { class: live ? "ok" : "muted" }),
    el("span", Number(s.fps).toFixed(s.fps % 1 ? 1 : 0)),
    el("span", s.frame),
    el("span", Number(s.episode_return).toFixed(1)),
    el("span", s.viewers),
  ];
  cells.forEach((c, i) => {
    const td = el("td", null, i >= 4 ? { class: "num" } : {});
    td.append(c);
    tr.append(td);
  });
  const td = el("td");
  if (live && loadToken(s.id)) {
    const b = el("button", "stop", { type: "button" });
    b.addEventListener("click", () => stop(s.id));
    td.append(b);
  }
  tr.append(td);
  return tr;
}

function replayRow(r) {
  const tr = el("tr");
  tr.dataset.replay = r.name;
  const link = el("a", r.name, { href: `/watch?replay=${encodeURIComponent(r.name)}` });
  const cells = [
    link,
    el("span", r.game),
    el("span", agentLabel(r)),
    el("span", r.fps),
    el("span", r.frames),
    el("span", r.complete ? r.reason : "(no end line)"),
    el("span", r.created),
  ];
  cells.forEach((c, i) => {
    const td = el("td", null, i === 3 || i === 4 ? { class: "num" } : {});
    td.append(c);
    tr.append(td);
  });
  return tr;
}

// The lists come a page at a time (GET ?offset=&limit=, with filters), live sessions first.
const PAGE = 20;

/** A list's pager: its filters, the offset shown, and the buttons that page it. */
function pager(id, load) {
  const box = document.getElementById(id);
  const state = { offset: 0, total: 0 };
  for (const b of box.querySelectorAll("button[data-step]")) {
    b.addEventListener("click", () => {
      state.offset = Math.max(0, state.offset + Number(b.dataset.step) * PAGE);
      load();
    });
  }
  for (const s of box.querySelectorAll("select")) {
    s.addEventListener("change", () => {
      state.offset = 0;
      load();
    });
  }
  state.show = (total, count) => {
    state.total = total;
    if (state.offset && state.offset >= total) {
      state.offset = Math.max(0, Math.floor((total - 1) / PAGE) * PAGE); // the list shrank
      load();
      return;
    }
    const range = box.querySelector("[data-range]");
    range.textContent = total ? `${state.offset + 1}–${state.offset + count} of ${total}` : "";
    box.querySelector('[data-step="-1"]').disabled = state.offset === 0;
    box.querySelector('[data-step="1"]').disabled = state.offset + PAGE >= total;
  };
  return state;
}

/** The query of a page: offset, limit and the filters that are set. */
function pageQuery(state, filters) {
  const q = new URLSearchParams({ offset: state.offset, limit: PAGE });
  for (const [k, v] of Object.entries(filters)) if (v) q.set(k, v);
  return q.toString();
}

const replayPager = pager("replays-pager", refreshReplays);
let replaysShown = "";
async function refreshReplays() {
  try {
    const q = pageQuery(replayPager, { game: document.getElementById("replays-game").value });
    const { replays, total } = await getJSON(`/v1/replays?${q}`);
    replayPager.show(total, replays.length);
    const key = JSON.stringify(replays);
    if (key === replaysShown) return; // keep the rows (and a hovered link) as they are
    replaysShown = key;
    document.querySelector("#replays tbody").replaceChildren(...replays.map(replayRow));
    document.getElementById("no-replays").hidden = replays.length > 0;
  } catch (e) {
    document.getElementById("no-replays").textContent = `cannot list replays: ${e.message}`;
    document.getElementById("no-replays").hidden = false;
  }
}

const sessionPager = pager("sessions-pager", refresh);
async function refresh() {
  const err = document.getElementById("list-error");
  try {
    const q = pageQuery(sessionPager, {
      status: document.getElementById("sessions-status").value,
      game: document.getElementById("sessions-game").value,
    });
    const { sessions, total } = await getJSON(`/v1/sessions?${q}`); // live first, newest first
    sessionPager.show(total, sessions.length);
    document.querySelector("#sessions tbody").replaceChildren(...sessions.map(row));
    document.getElementById("empty").hidden = sessions.length > 0;
    err.hidden = true;
  } catch (e) {
    err.textContent = `cannot list sessions: ${e.message}`;
    err.hidden = false;
  }
}

/** Why the planner service cannot play `game` (at budget `k` when given), or "" when it can:
 * GET /v1/games says what the service serves (`game.planner`). */
function plannerRefusal(game, k) {
  const p = game.planner || { available: false, budgets: [], reason: "no planner service" };
  if (!game.checkpoint) return `${game.id} has no planner checkpoint here`;
  if (!p.available) return p.reason;
  if (k != null && !p.budgets.includes(k)) {
    return `the planner service does not plan ${game.id} at k=${k} (its budgets: ${p.budgets.join(", ")})`;
  }
  return "";
}

/** Why the planner with its gate (the agent without k, as the demo plays) cannot play `game`
 * now, or "" when it can. */
function gateRefusal(game) {
  const p = game.planner || { gate: false, gate_reason: "no planner service" };
  if (!game.checkpoint) return `${game.id} has no planner checkpoint here`;
  return p.gate ? "" : p.gate_reason || `the planner service has no gate for ${game.id}`;
}

/** The planner service has a gate for `game`, ready or compiling. */
const hasGate = (game) => Boolean(game.planner && (game.planner.gate || game.planner.gate_compiling));

/** What the game list says beside `game`: what of its planner plays now, per choice. */
function readiness(game) {
  const p = game.planner || {};
  if (!game.checkpoint) return " (no checkpoint)";
  const forced = !plannerRefusal(game);
  const gated = Boolean(p.gate);
  if (forced && (gated || !p.gate_compiling)) return "";
  if (forced) return " (gate compiling)";
  if (gated) return p.compiling ? " (gated planner ready, budgets compiling)" : " (gated planner only)";
  return p.compiling || p.gate_compiling ? " (planner compiling)" : " (no planner)";
}

/** An <option>, disabled with its reason as the tooltip when `why` is set. */
function choice(value, label, why) {
  const o = el("option", label, why ? { value, title: why } : { value });
  o.disabled = Boolean(why);
  return o;
}

/** The clock games' opponents for `game`: the planner with its clock gate (disabled unless the
 * planner service serves one), the planner at each of the game's budgets (disabled where the
 * planner service does not plan it), the reflex (with a checkpoint), random. */
function opponents(game) {
  const p = game.planner || {};
  const gateWhy = gateRefusal(game) || (p.clock_gate ? "" : `the planner service has no clock gate for ${game.id}`);
  const list = [choice("gate", "planner (gate)", gateWhy)];
  list.push(...game.budgets.map((b) => choice(`planner:${b}`, `planner (k=${b})`, plannerRefusal(game, b))));
  list.push(choice("reflex", "reflex", game.checkpoint ? "" : `${game.id} has no planner checkpoint here`));
  list.push(choice("random", "random", ""));
  return list;
}

/** The opponent the server picks when none is asked for: a person plays the planner at the
 * largest budget the planner service plans, else the reflex, else random. */
function defaultOpponent(game, agent) {
  const planned = game.budgets.filter((b) => !plannerRefusal(game, b));
  if (agent === "human" && planned.length) return `planner:${Math.max(...planned)}`;
  return game.checkpoint ? "reflex" : "random";
}

/** Selects the first enabled option of `select` when its value is disabled (or none). */
function firstEnabled(select) {
  const current = select.selectedOptions[0];
  if (current && !current.disabled) return;
  const ok = [...select.options].find((o) => !o.disabled);
  if (ok) select.value = ok.value;
}

function updateForm(event) {
  const game = games.find((g) => g.id === form.game.value);
  const k = form.k;
  if (!event || event.target === form.game) {
    const kept = event ? null : k.value; // a refresh of the list keeps the visitor's k
    k.replaceChildren(...(game ? game.budgets : []).map((b) => choice(b, b, plannerRefusal(game, b))));
    if (kept !== null && [...k.options].some((o) => o.value === kept && !o.disabled)) k.value = kept;
    firstEnabled(k);
  }
  // The planner with its gate: offered where the service has a gate, enabled once it plays.
  const gated = form.agent.querySelector('option[value="gate"]');
  const gateWhy = game ? gateRefusal(game) : "no game";
  gated.hidden = !game || !hasGate(game);
  gated.disabled = gated.hidden || Boolean(gateWhy);
  gated.title = gateWhy;
  if (gated.disabled && form.agent.value === "gate") form.agent.value = "reflex";
  const planner = form.agent.querySelector('option[value="planner"]');
  let why = game ? plannerRefusal(game) : "no game";
  if (!why && ![...k.options].some((o) => !o.disabled)) {
    why = k.options.length ? k.options[0].title : `${game.id} has no budgets here`;
  }
  planner.disabled = Boolean(why);
  planner.title = why;
  if (planner.disabled && form.agent.value === "planner") form.agent.value = "reflex";
  k.disabled = form.agent.value !== "planner";
  // k only where it means something: the planner agent, with budgets to offer (never empty).
  k.closest("label").hidden = k.disabled || !k.options.length;
  // Clock games: who plays player 1; a new game or agent picks the server's default again.
  const clock = Boolean(game && game.num_players === 2);
  const opponent = form.opponent;
  opponent.closest("label").hidden = !clock;
  opponent.disabled = !clock;
  if (clock && (!event || event.target === form.game || event.target === form.agent)) {
    const kept = !event && opponentChosen ? opponent.value : null;
    opponent.replaceChildren(...opponents(game));
    opponent.value = defaultOpponent(game, form.agent.value);
    if (kept !== null && [...opponent.options].some((o) => o.value === kept && !o.disabled)) opponent.value = kept;
    // A person plays on a clock in minutes (3+2); an agent a ply a second at least on "1+1"
    // (the server's default for them: server/_config.py WATCHED), so a game lasts minutes.
    const person = form.agent.value === "human";
    form.time_control.value = person ? "3+2" : "1+1";
    // (A poll of the game list keeps a rate the visitor typed in.)
    if (event || ["1", "9"].includes(form.fps.value)) form.fps.value = person ? 9 : 1;
  } else if (!clock && event && event.target === form.game) {
    form.fps.value = 9;
  }
  form.time_control.closest("label").hidden = !clock;
  form.time_control.disabled = !clock;
  const button = form.querySelector("button");
  const needsNetwork = form.agent.value !== "human";
  button.disabled = !game || (needsNetwork && !game.checkpoint);
  button.title = button.disabled && game ? "this game has no planner checkpoint here" : "";
}

form.addEventListener("change", updateForm);
/** The visitor picked an opponent: the list's refreshes keep it (a new game or agent does not). */
let opponentChosen = false;
form.addEventListener("change", (event) => {
  if (event.target === form.opponent) opponentChosen = true;
  else if (event.target === form.game || event.target === form.agent) opponentChosen = false;
});

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const body = {
    game: form.game.value,
    agent: form.agent.value,
    fps: Number(form.fps.value),
    seed: Number(form.seed.value),
    max_frames: Number(form.max_frames.value),
  };
  if (body.agent === "planner") body.k = Number(form.k.value);
  if (body.agent === "gate") body.agent = "planner"; // no k: the gate picks it, as in the demo
  if (!form.opponent.disabled) {
    const [opponent, k] = form.opponent.value.split(":");
    body.opponent = opponent;
    if (k) body.opponent_k = Number(k);
  }
  if (!form.time_control.disabled && form.time_control.value) {
    // "M+S": M minutes on each side's clock, S seconds back after each move.
    const [minutes, seconds] = form.time_control.value.split("+").map(Number);
    body.time_s = minutes * 60;
    body.increment_s = seconds;
  }
  body.record = form.record.checked;
  const button = form.querySelector("button");
  button.disabled = true;
  result.className = "muted";
  result.textContent = `starting ${body.game} (the first session of a game compiles it)…`;
  try {
    const created = await getJSON("/v1/sessions", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    saveToken(created.id, created.token);
    result.className = "ok";
    result.replaceChildren(`started ${body.game}: opening `, watchLink(created.id), "…");
    location.assign(`/watch?session=${encodeURIComponent(created.id)}`); // this tab keeps its token
    return;
  } catch (e) {
    result.className = "error";
    result.textContent = `could not start: ${e.message}`;
  }
  button.disabled = false;
  refresh();
});

/** The game the form offers until the visitor picks one: the first whose planner plays (forced
 * or with its gate), else the first with a checkpoint, else the first. */
function defaultGame() {
  const ready = (g) => !plannerRefusal(g) || !gateRefusal(g);
  return games.find(ready) || games.find((g) => g.checkpoint) || games[0] || {};
}

/** The visitor picked a game: the list's refreshes keep it. */
let chosen = false;
form.game.addEventListener("change", () => (chosen = true));

/** True while what GET /v1/games says will change by itself soon: a planner still compiling. */
const settling = () => games.some((g) => g.planner && (g.planner.compiling || g.planner.gate_compiling));

/** The game list from GET /v1/games into the form (the selected game kept), each game labelled
 * with what of its planner plays now (`readiness`). */
let gamesShown = "";
async function loadGames() {
  const selected = form.game.value;
  games = (await getJSON("/v1/games")).games;
  const key = JSON.stringify(games);
  if (key === gamesShown) return; // the form as it is (an open list stays open)
  gamesShown = key;
  form.game.replaceChildren(
    ...games.map((g) => {
      const why = [plannerRefusal(g), hasGate(g) ? gateRefusal(g) : ""].filter(Boolean).join("; ");
      return el("option", g.id + readiness(g), why ? { value: g.id, title: why } : { value: g.id });
    }),
  );
  if (chosen && games.some((g) => g.id === selected)) form.game.value = selected;
  else form.game.value = defaultGame().id; // until the visitor picks one: a game ready to play
  updateForm();
}

/** Asks for the game list again and again: every COMPILING_POLL_MS while a planner compiles (so
 * each choice is offered as it becomes ready, without a reload) or the server did not answer,
 * else every SETTLED_POLL_MS. */
async function pollGames() {
  let failed = false;
  try {
    await loadGames();
  } catch (e) {
    failed = true;
  }
  setTimeout(pollGames, failed || settling() ? COMPILING_POLL_MS : SETTLED_POLL_MS);
}

async function init() {
  try {
    const health = await getJSON("/healthz");
    document.getElementById("server").textContent =
      `${health.version} · planner ${health.planner_address || "not connected"}`;
    if (health.arena_url) {
      const arena = document.getElementById("arena");
      arena.href = `${health.arena_url}/arena`;
      arena.hidden = false;
    }
    await loadGames();
    setTimeout(pollGames, settling() ? COMPILING_POLL_MS : SETTLED_POLL_MS);
    for (const id of ["sessions-game", "replays-game"]) {
      document.getElementById(id).append(...games.map((g) => el("option", g.id, { value: g.id })));
    }
  } catch (e) {
    result.className = "error";
    result.textContent = `cannot reach the server: ${e.message}`;
  }
  refresh();
  refreshReplays();
  setInterval(refresh, REFRESH_MS);
  setInterval(refreshReplays, 5 * REFRESH_MS);
}

init();
