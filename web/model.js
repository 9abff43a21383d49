// The watch page's model: what the messages (live or replayed) say, the counters the browser
// tests read (`window.rtplanViewer`), and the game's drawing module, loaded once the hello
// names it. The page's other modules (play, panels, replay) read and update these.

import { carryAnnot, loadGame } from "./draw.js";

export const HISTORY = 118; // frames in the strip and the charts
export const RECENT = 64; // frame messages kept in viewer.frames

export const model = {
  hello: null,
  latest: null, // the newest frame message
  previous: null, // the frame message before it
  annot: null,
  history: [], // {frame, kind, k, latency}
  end: null,
  error: null,
  dirty: false,
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

/** The game description's view (`spec.view`: drawing module, board cells, colour names). */
export const view = () => model.hello.spec.view;

/** Loads the drawing module once the hello is here; resolves when it can draw. */
export function ensureGame() {
  if (!gameLoad && model.hello) {
    gameLoad = loadGame(view()).then((g) => {
      game = g;
      viewer.palette = g.PALETTE;
      model.dirty = true;
    });
  }
  return gameLoad;
}

/** What frame `f` did since `prev` (a rendered state, or null), by the game's module. */
export function annotate(prev, f, prevAnnot) {
  ensureGame();
  return game ? game.annotate(prev, f, prevAnnot, view()) : carryAnnot(prevAnnot);
}

/** The strip's colour key of a frame's report: its answer's source when on time, else why not. */
export function kindOf(report) {
  return report.provenance === "on_time" ? report.answer_source : report.provenance;
}

/** One frame's entry in the charts' history, from its report. */
export function historyEntry(report) {
  return { frame: report.frame, kind: kindOf(report), k: report.k, latency: report.latency_ms };
}
