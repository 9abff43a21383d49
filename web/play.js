// Human play on the watch page: in a human session (agent "human") the page that holds the
// session's token plays it. Keys or clicks are sent as actions for the frame on screen
// (server/_human.py); a line says what the last frame did with them.

import { $, loadToken, saveToken, setText } from "./api.js";
import { actionAt } from "./draw.js";
import { agentColour, game, model, view, viewer } from "./model.js";

const KEY_LABELS = { ArrowUp: "↑", ArrowDown: "↓", ArrowLeft: "←", ArrowRight: "→", " ": "space" };

/** The token of session `id` this page holds: from `#token=` in the address (then kept and
 * taken off the address bar), else the one the lobby kept; null when this page only watches. */
export function sessionToken(id) {
  const hash = new URLSearchParams(location.hash.slice(1)).get("token");
  if (hash) {
    saveToken(id, hash);
    history.replaceState(null, "", location.pathname + location.search); // off the address bar
    return hash;
  }
  return loadToken(id);
}

let send = null; // sends one message on the session's websocket

function sendAction(action) {
  const f = model.latest;
  if (!viewer.player || !f || f.done || model.end) return;
  // The frame on screen: an answer the server gets after its deadline plays the fallback.
  send({ type: "action", frame: f.frame, action });
  viewer.sent.push({ frame: f.frame, action, at: performance.now() });
}

/** Starts playing on the server's `player` message `msg`: keys, or clicks on the board's
 * cells (and a button for the action no cell plays: pass or swap). `sendMessage(obj)` sends
 * on the session's websocket. */
export function startPlaying(msg, sendMessage) {
  send = sendMessage;
  viewer.player = msg;
  $("play").hidden = false;
  const names = model.hello.spec.action_names;
  if (msg.input === "keys") {
    const byAction = {};
    for (const [key, a] of Object.entries(msg.keys)) (byAction[a] ||= []).push(KEY_LABELS[key] || key);
    const help = Object.entries(byAction).map(([a, keys]) => `${names[a]}: ${keys.join(" ")}`);
    const buffer = model.hello.spec.view.buffer
      ? " A turn into a wall waits (pending) and is taken at the first frame where it is open."
      : "";
    setText("play-help", `You play. Keys — ${help.join(" · ")}. Until your first key the reflex steers, so nothing ends before you can react; then a frame with no key by its deadline plays the fallback (${model.hello.spec.fallback}).${buffer}`);
    window.addEventListener("keydown", (event) => {
      if (event.repeat || !(event.key in msg.keys)) return;
      event.preventDefault();
      sendAction(msg.keys[event.key]);
    });
  } else {
    const onBoard = new Set(view().board.actions.flat());
    const last = names.findIndex((_, a) => !onBoard.has(a)); // pass or swap: a button
    const c = model.hello.config;
    const against = c.opponent === "planner"
      ? `the planner (k=${c.opponent_k}), whose search runs its own clock`
      : `the ${c.opponent}`;
    // The first mover (red in Hex, black in Go) is drawn per game: the frame says which is yours.
    clickHelp = () => {
      const st = model.latest && model.latest.state;
      if (!st) return;
      const mine = agentColour(st);
      const goal = goalWords(view().goal_edges, mine);
      setText("play-help", `You play ${view().colour_names[mine]}${goal} against ${against}: click a cell on your turn; your clock runs until you do.`);
    };
    clickHelp();
    const special = $("special");
    special.hidden = last < 0;
    special.textContent = names[last];
    special.addEventListener("click", () => sendAction(last));
    const canvas = $("board");
    canvas.classList.add("clickable");
    canvas.addEventListener("click", (event) => {
      const st = viewer.state;
      if (!st || st.to_play !== msg.player) return;
      const box = canvas.getBoundingClientRect();
      const at = (game && game.actionAt) || actionAt;
      const scale = viewer.layout.width / box.width; // a board shown smaller (a phone's screen)
      const [x, y] = [(event.clientX - box.left) * scale, (event.clientY - box.top) * scale];
      const action = at(x, y, st, viewer.layout, view());
      if (action < 0) return;
      // A stone already there: a slip of the finger, not a move (sent, it would be judged
      // illegal and the fallback would play for the person).
      const cell = cellOf(view().board, action);
      if (cell && st.board[cell[0]][cell[1]] !== ".") {
        setText("play-status", `${names[action]} is taken: choose an empty cell`);
        $("play-status").className = "invalid";
        return;
      }
      sendAction(action);
    });
  }
}

/** [row, column] of the cell of `board` (the description's `view.board`) that plays `action`. */
function cellOf(board, action) {
  for (let r = 0; r < board.actions.length; r++) {
    const c = board.actions[r].indexOf(action);
    if (c >= 0) return [r, c];
  }
  return null;
}

let clickHelp = () => {}; // sets the help line of a game played by clicks, once a frame says your colour

/** ": join the top and bottom edges" when colour `mine` wins by a chain between two edges
 * (the game's `goal_edges`), else "". */
export function goalWords(goals, mine) {
  const edges = { rows: "the top and bottom edges", columns: "the left and right edges" };
  return goals && goals[mine] ? ` (join ${edges[goals[mine]]})` : "";
}

/** A time to spare as a person reads it: "85 ms", "4.2 s", "3:00" (a clock game's minutes). */
export function spareText(ms) {
  if (ms < 1000) return `${Math.max(0, ms).toFixed(0)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.floor(ms / 1000);
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}

/** One line saying what the last frame did with this page's input: [its kind, the text]. */
function playLine(rep) {
  const names = model.hello.spec.action_names;
  const name = (a) => names[a] ?? a;
  if (rep.answer_source === "opponent") {
    if (rep.provenance !== "on_time") {
      return ["fallback", `frame ${rep.frame}: the opponent missed its clock: the fallback played (${name(rep.action)})`];
    }
    const ms = rep.latency_ms != null ? `, ${rep.latency_ms.toFixed(0)} ms` : "";
    const how = rep.k != null ? ` (planner k=${rep.k}${ms})` : "";
    return ["on_time", `opponent played ${name(rep.action)}${how}`];
  }
  const kind = rep.provenance;
  const said = {
    on_time: `your ${name(rep.action)} on time (${spareText(rep.slack_ms)} to spare)`,
    fallback: rep.source === "reflex"
      ? `the reflex steers (${name(rep.action)}) until your first key`
      : `no input by the deadline: the fallback played (${name(rep.action)})`,
    late: `your ${name(rep.received_action)} came ${(-rep.slack_ms).toFixed(0)} ms late: the fallback played (${name(rep.action)})`,
    invalid: `${name(rep.received_action)} is not legal here: the fallback played (${name(rep.action)})`,
  }[kind];
  return [kind, `frame ${rep.frame}: ${said}`];
}

/** Shows what frame `f`'s report says of this page's input, when it plays (or the turn the
 * server holds for it, pending until a frame where it is legal). */
export function drawPlayStatus(f) {
  if (!viewer.player) return;
  clickHelp();
  if (model.startsAt && model.startsAt > performance.now()) {
    setText("play-status", "get ready: nothing moves until the countdown ends (a key now is your first move)");
    $("play-status").className = "pending";
    return;
  }
  if (f.pending != null) {
    const name = model.hello.spec.action_names[f.pending] ?? f.pending;
    setText("play-status", `pending: ${name}, taken at the first frame where it is legal`);
    $("play-status").className = "pending";
    return;
  }
  // A key after its frame's deadline: the frame it missed says so (its report turned LATE).
  const late = (f.late || []).filter((r) => r.answer_source !== "opponent");
  const rep = late.length ? late[late.length - 1] : f.previous;
  if (!rep) {
    // Frame 0, the countdown over: the "get ready" line no longer holds.
    const turn = f.state && f.state.to_play === viewer.player.player;
    setText("play-status", viewer.player.input === "keys" || turn ? "your move" : "the opponent's move");
    $("play-status").className = "pending";
    return;
  }
  const [kind, text] = playLine(rep);
  setText("play-status", text);
  $("play-status").className = kind;
}
