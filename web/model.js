// The watch page's model: what the messages (live or replayed) say, the counters the browser
// tests read (`window.rtplanViewer`), and the game's drawing module, loaded once the hello
// names it. The page's other modules (play, panels, replay) read and update these.

import { carryAnnot, loadGame } from "./draw.js";

export const HISTORY = 118; // frames in the strip and the charts
export const RECENT = 64; // frame messages kept in viewer.frames
export const GAME_LOG = 8192; // decisions and moves kept for the whole-game charts

export const model = {
  hello: null,
  latest: null, // the newest frame message
  previous: null, // the frame message before it
  annot: null,
  history: [], // {frame, kind, k, latency, probabilities, value}
  decisions: [], // the planner's decisions of the whole game: {frame, k, gated, probabilities, value}
  moves: [], // a clock game's moves: {frame, action, source} (the report of each frame)
  end: null,
  error: null,
  dirty: false,
  startsAt: null, // performance.now() when frame 0's clock starts (a person's countdown)
};

// Read by the browser tests and handy in the console.
export const viewer = {
  received: 0,
  drawn: 0,
  frame: null, // index of the frame last drawn
  state: null, // its rendered state
  layout: null,
  palette: null, // the drawing module's colours, once it is loaded
  ended: false,
  paused: false, // true: keep the board as drawn (new frames still update the model)
  rate: { received: 0, drawn: 0 }, // per second over the last second
  center: (r, c) => viewer.layout.center(r, c),
  frames: [], // the last RECENT frame messages received (tests, console)
  player: null, // the player hello when this page plays the session
  sent: [], // actions this page sent: {frame, action, at}
  errors: [], // error messages the server sent this page
  replay: null, // replay mode: {name, frames, index, seek(n)}
  drawMs: 0, // a draw's duration, averaged over the last ~20 draws
  drawLog: [], // the last 1024 draws of a frame message: [frame, performance.now() of the draw]
};
window.rtplanViewer = viewer;

// The game's drawing module (web/games/<module>.js, or the generic grid), named by the game
// description's `view`; loaded once the hello (live or replay) is here.
export let game = null;
let gameLoad = null; // the module's promise, once asked for

/** Forgets the session shown (the TV page's next game): the model, what the page drew and
 * the drawing module (the next hello loads its game's; a module loaded before comes from the
 * browser's module map at once). */
export function resetModel() {
  Object.assign(model, {
    hello: null, latest: null, previous: null, annot: null, history: [], decisions: [], moves: [],
    end: null, error: null, dirty: true, startsAt: null,
  });
  Object.assign(viewer, { frame: null, state: null, layout: null, ended: false, frames: [] });
  game = null;
  gameLoad = null;
}

/** The game description's view (`spec.view`: drawing module, board cells, colour names). */
export const view = () => model.hello.spec.view;

/** Loads the drawing module once the hello is here; resolves when it can draw. */
export function ensureGame() {
  if (!gameLoad && model.hello) {
    const load = loadGame(view()).then((g) => {
      if (gameLoad !== load) return; // the page moved on to another game (resetModel)
      game = g;
      viewer.palette = g.PALETTE;
      model.dirty = true;
    });
    gameLoad = load;
  }
  return gameLoad;
}

/** What frame `f` did since `prev` (a rendered state, or null), by the game's module. */
export function annotate(prev, f, prevAnnot) {
  ensureGame();
  return game ? game.annotate(prev, f, prevAnnot, view()) : carryAnnot(prevAnnot);
}

/** True when a person plays the session shown (a human session): the page then speaks of
 * player 0 as "you" (on the player's page) or "the player", never "the agent". */
export const humanGame = () => Boolean(model.hello && model.hello.config.agent === "human");

/** Whether a planner plays in the session shown (its agent, or a clock game's opponent): the
 * planner's panels (k, latency, the gate's thinking) have something to show only then. */
export function plannerPlays() {
  if (!model.hello) return false;
  const c = model.hello.config;
  const twoPlayer = model.hello.spec.num_players === 2;
  return c.agent === "planner" || (twoPlayer && (c.opponent === "planner" || c.opponent === "gate"));
}

/** What the page calls player 0: "you" on the page that plays, "the player" to a spectator of
 * a person's game, else "the agent". */
export function agentName() {
  if (viewer.player) return "you";
  return humanGame() ? "the player" : "the agent";
}

/** A planner decision's value for player 0 (the side the bar's bottom and the graph's +1 are):
 * in a person's clock game the planner decisions are the opponent's, valued for the opponent. */
export function agentValue(d) {
  const theirs = humanGame() && model.hello.spec.num_players === 2;
  return theirs ? -d.value : d.value;
}

/** The agent's (player 0's) colour in a clock game, from a rendered state (0 without one). */
export function agentColour(st) {
  if (!st || st.to_play_colour === undefined) return 0;
  return st.to_play === 0 ? st.to_play_colour : 1 - st.to_play_colour;
}

/** The strip's colour key of a frame's report: its answer's source when on time, else why not. */
export function kindOf(report) {
  if (report.provenance === "on_time") return report.answer_source;
  // A person's fair start: the reflex played the frames before their first key.
  return report.source === "reflex" ? "reflex" : report.provenance;
}

/** One frame's entry in the charts' history, from its report (with its option's decision:
 * the gate's probabilities and the planner's value, when the planner decided it). */
export function historyEntry(report) {
  const d = report.decision;
  return {
    frame: report.frame,
    kind: kindOf(report),
    k: report.k,
    latency: report.latency_ms,
    probabilities: d ? d.probabilities : null,
    value: d ? d.value : null,
  };
}

/** Adds what frame report `report` tells the whole-game charts: its option's decision (once
 * per decision) and, in a clock game, its move. */
export function logReport(report) {
  const d = report.decision;
  const last = model.decisions[model.decisions.length - 1];
  if (d && (!last || last.frame !== d.frame)) {
    model.decisions.push(d);
    if (model.decisions.length > GAME_LOG) model.decisions.shift();
  }
  if (model.hello && model.hello.spec.num_players === 2) {
    const moves = model.moves;
    if (!moves.length || moves[moves.length - 1].frame < report.frame) {
      moves.push({ frame: report.frame, action: report.action, source: report.answer_source });
      if (moves.length > GAME_LOG) moves.shift();
    }
  }
}
