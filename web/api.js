// What every page shares: the server's REST API with its errors, the key a session's token is
// kept under, how a session's agent is named, and two small DOM helpers.

/** GETs (or, with `options`, sends) `path` and returns its JSON body; a refusal throws an Error
 * whose message is the server's `detail` (server/app.py's error handlers). */
export async function getJSON(path, options) {
  const r = await fetch(path, options);
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body.detail || `${r.status} ${r.statusText}`);
  return body;
}

// A session's token, kept in this tab's sessionStorage: the lobby that started the session can
// stop it (DELETE needs the token) and the watch page plays its human sessions.
const tokenKey = (id) => `rtplan-token-${id}`;

export function saveToken(id, token) {
  sessionStorage.setItem(tokenKey(id), token);
}

/** The token this tab holds for session `id`, or null. */
export function loadToken(id) {
  return sessionStorage.getItem(tokenKey(id));
}

/** A clock game's built-in opponent, as `s` (a session summary) has it. */
export function opponentLabel(s) {
  if (s.opponent === "gate") return "planner (gate)";
  return s.opponent === "planner" ? `planner k=${s.opponent_k}` : s.opponent;
}

/** Who plays: the agent (a planner with its budgets, or the gate's choice) and, in a clock
 * game, against whom. The one label of the lobby's sessions and replays and the watch and
 * replay pages. `s`: a session summary (`GET /v1/sessions`, a hello's `session`) or a replay's
 * listing (`GET /v1/replays`), which carry the same agent, ks, gated, opponent and opponent_k. */
export function agentLabel(s) {
  let agent = s.agent;
  const ks = s.ks || [];
  const gated = s.gated === undefined ? s.agent === "planner" && !ks.length : s.gated;
  if (s.agent === "planner") agent = gated ? "planner (gate)" : `planner k=${ks.join(",")}`;
  return s.opponent ? `${agent} vs ${opponentLabel(s)}` : agent;
}

// DOM helpers --------------------------------------------------------------------------------

/** The element with id `id`. */
export const $ = (id) => document.getElementById(id);

/** A new element with `text` (if given) and attributes. */
export function el(tag, text, attrs = {}) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

/** Sets the text of element `id`, touching the DOM only when it changes. */
export function setText(id, text) {
  const node = $(id);
  if (node.textContent !== text) node.textContent = text;
}
