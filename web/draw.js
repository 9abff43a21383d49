// Board drawing for the five games, from the JSON frames of games/render.py (the "state" of a
// viewer frame message). Each game has a layout (canvas size and cell centres, in CSS pixels)
// and a draw function; `annotate` derives what one frame alone does not say (Pac-Man's
// heading, the last move, captures, a pass or a swap) from the previous frame.

export const PALETTE = {
  pacman: {
    background: "#000000",
    wall: "#2b3bd9",
    wallCore: "#0a0f3c",
    pellet: "#ffc8b4",
    power: "#ffc8b4",
    player: "#ffe600",
    ghosts: ["#ff2020", "#ffb0ff", "#00e5ff", "#ffb347"],
    frightened: "#3a3aff",
  },
  tetris: {
    background: "#0c1014",
    grid: "#1c242c",
    locked: "#7d8796",
    pieces: {
      I: "#00d0e8", O: "#f2d600", T: "#b04de0", S: "#34c759",
      Z: "#f0413c", J: "#3566f0", L: "#ff9500",
    },
  },
  snake: { background: "#0f1a12", grid: "#16261a", body: "#49c46a", head: "#1d7a38",
           fruit: "#f0384f" },
  hex: { background: "#1a2027", empty: "#e9dfc7", line: "#6b6254", stones: ["#d8383b", "#2f6fd6"],
         mark: "#ffffff" },
  go: { board: "#dcb35c", line: "#3a2c10", stones: ["#111111", "#f2f2f2"], mark: "#e0303a" },
};

// Colour names of the clock games' colours 0 and 1 (render's "x" and "o").
export const COLOUR_NAMES = { "speed-hex-v0": ["red", "blue"], "speed-go-v0": ["black", "white"] };
const STONE_CHARS = ["x", "o"];

function rect(ctx, x, y, w, h, colour) {
  ctx.fillStyle = colour;
  ctx.fillRect(x, y, w, h);
}

function disc(ctx, x, y, r, colour) {
  ctx.beginPath();
  ctx.arc(x, y, r, 0, 2 * Math.PI);
  ctx.fillStyle = colour;
  ctx.fill();
}

function gridLayout(rows, cols, maxCell, maxSide = 560) {
  const cell = Math.max(6, Math.min(maxCell, Math.floor(maxSide / Math.max(rows, cols))));
  return {
    width: cols * cell,
    height: rows * cell,
    cell,
    center: (r, c) => [(c + 0.5) * cell, (r + 0.5) * cell],
  };
}

// Pac-Man ---------------------------------------------------------------------------------

function drawGhost(ctx, x, y, s, colour) {
  const r = 0.45 * s;
  ctx.beginPath();
  ctx.arc(x, y - 0.05 * s, r, Math.PI, 0);
  ctx.lineTo(x + r, y + r);
  for (let i = 1; i <= 4; i++) {
    ctx.lineTo(x + r - (i * 2 * r) / 4 + r / 4, y + r - (i % 2 ? 0.18 * s : 0));
    ctx.lineTo(x + r - (i * 2 * r) / 4, y + r);
  }
  ctx.closePath();
  ctx.fillStyle = colour;
  ctx.fill();
  for (const dx of [-0.17, 0.17]) {
    disc(ctx, x + dx * s, y - 0.16 * s, 0.12 * s, "#ffffff");
    disc(ctx, x + dx * s + 0.04 * s, y - 0.16 * s, 0.06 * s, "#1a2a80");
  }
}

const HEADINGS = { right: 0, down: Math.PI / 2, left: Math.PI, up: -Math.PI / 2 };

function drawPacman(ctx, f, L, annot) {
  const P = PALETTE.pacman;
  const s = L.cell;
  const rows = f.board;
  rect(ctx, 0, 0, L.width, L.height, P.background);
  const wall = (r, c) => rows[r] !== undefined && rows[r][c] === "#";
  for (let r = 0; r < rows.length; r++) {
    for (let c = 0; c < rows[r].length; c++) {
      const ch = rows[r][c];
      const [x, y] = L.center(r, c);
      if (ch === "#") {
        // Dark blocks outlined in blue where they face a corridor.
        rect(ctx, c * s, r * s, s, s, P.wallCore);
        const t = Math.max(2, Math.round(s / 6));
        if (r > 0 && !wall(r - 1, c)) rect(ctx, c * s, r * s, s, t, P.wall);
        if (r < rows.length - 1 && !wall(r + 1, c)) rect(ctx, c * s, (r + 1) * s - t, s, t, P.wall);
        if (c > 0 && !wall(r, c - 1)) rect(ctx, c * s, r * s, t, s, P.wall);
        if (c < rows[r].length - 1 && !wall(r, c + 1)) rect(ctx, (c + 1) * s - t, r * s, t, s, P.wall);
      } else if (ch === ".") {
        disc(ctx, x, y, Math.max(1.5, 0.14 * s), P.pellet);
      } else if (ch === "o") {
        disc(ctx, x, y, 0.36 * s, P.power);
      }
    }
  }
  const frightened = f.frightened > 0;
  f.ghosts.forEach(([r, c], i) => {
    const [x, y] = L.center(r, c);
    const blink = frightened && f.frightened < 10 && f.frame % 2 === 1;
    const colour = frightened ? (blink ? "#f0f0ff" : P.frightened) : P.ghosts[i % P.ghosts.length];
    drawGhost(ctx, x, y, s, colour);
  });
  const [x, y] = L.center(f.player[0], f.player[1]);
  const heading = HEADINGS[(annot && annot.heading) || "right"];
  const mouth = f.frame % 2 ? 0.08 : 0.28;
  ctx.beginPath();
  ctx.moveTo(x, y);
  ctx.arc(x, y, 0.48 * s, heading + mouth * Math.PI, heading - mouth * Math.PI + 2 * Math.PI);
  ctx.closePath();
  ctx.fillStyle = P.player;
  ctx.fill();
}

// Tetris ----------------------------------------------------------------------------------

function block(ctx, x, y, s, colour) {
  rect(ctx, x + 1, y + 1, s - 2, s - 2, colour);
  ctx.fillStyle = "rgba(255,255,255,0.25)";
  ctx.fillRect(x + 1, y + 1, s - 2, 3);
  ctx.fillStyle = "rgba(0,0,0,0.25)";
  ctx.fillRect(x + 1, y + s - 4, s - 2, 3);
}

function drawTetris(ctx, f, L) {
  const P = PALETTE.tetris;
  const s = L.cell;
  rect(ctx, 0, 0, L.width, L.height, P.background);
  ctx.strokeStyle = P.grid;
  ctx.lineWidth = 1;
  for (let c = 1; c < f.board[0].length; c++) {
    ctx.beginPath();
    ctx.moveTo(c * s + 0.5, 0);
    ctx.lineTo(c * s + 0.5, L.height);
    ctx.stroke();
  }
  for (let r = 1; r < f.board.length; r++) {
    ctx.beginPath();
    ctx.moveTo(0, r * s + 0.5);
    ctx.lineTo(L.width, r * s + 0.5);
    ctx.stroke();
  }
  f.board.forEach((row, r) => {
    for (let c = 0; c < row.length; c++) if (row[c] !== " ") block(ctx, c * s, r * s, s, P.locked);
  });
  const colour = P.pieces[f.piece] || "#ffffff";
  for (const [r, c] of f.piece_cells) block(ctx, c * s, r * s, s, colour);
}

// Snake -----------------------------------------------------------------------------------

function drawSnake(ctx, f, L) {
  const P = PALETTE.snake;
  const s = L.cell;
  rect(ctx, 0, 0, L.width, L.height, P.background);
  f.board.forEach((row, r) => {
    for (let c = 0; c < row.length; c++) {
      if ((r + c) % 2) rect(ctx, c * s, r * s, s, s, P.grid);
      if (row[c] === "s") rect(ctx, c * s + 2, r * s + 2, s - 4, s - 4, P.body);
    }
  });
  const [fx, fy] = L.center(f.fruit[0], f.fruit[1]);
  disc(ctx, fx, fy, 0.36 * s, P.fruit);
  const [hr, hc] = f.head;
  if (hr >= 0 && hr < f.board.length && hc >= 0 && hc < f.board[0].length) {
    const [x, y] = L.center(hr, hc);
    rect(ctx, hc * s + 1, hr * s + 1, s - 2, s - 2, P.head);
    disc(ctx, x - 0.2 * s, y - 0.2 * s, 0.08 * s, "#ffffff");
    disc(ctx, x + 0.2 * s, y - 0.2 * s, 0.08 * s, "#ffffff");
  }
}

// Speed Hex: an n x n rhombus of pointy-top hexagons; cell (r, c) neighbours (r, c +- 1),
// (r - 1, c), (r - 1, c + 1), (r + 1, c - 1), (r + 1, c) as in pgx hex. Colour 0 ("x") joins
// columns 0 and n-1 (left and right edges), colour 1 ("o") rows 0 and n-1 (top and bottom).

function hexLayout(f) {
  const n = f.board.length;
  const R = Math.floor(470 / (Math.sqrt(3) * (1.5 * n - 0.5)));
  const w = Math.sqrt(3) * R;
  const m = R + 6;
  return {
    width: Math.ceil(2 * m + w * (1.5 * n - 0.5)),
    height: Math.ceil(2 * m + R * (1.5 * n + 0.5)),
    cell: w,
    radius: R,
    center: (r, c) => [m + w / 2 + (c + r / 2) * w, m + R + 1.5 * R * r],
  };
}

function hexPath(ctx, x, y, R) {
  ctx.beginPath();
  for (let i = 0; i < 6; i++) {
    const a = Math.PI / 6 + (i * Math.PI) / 3;
    ctx.lineTo(x + R * Math.cos(a), y + R * Math.sin(a));
  }
  ctx.closePath();
}

function drawHex(ctx, f, L, annot) {
  const P = PALETTE.hex;
  const n = f.board.length;
  const R = L.radius;
  rect(ctx, 0, 0, L.width, L.height, P.background);
  // The goal edges, drawn under the outer hexagons.
  const corner = (r, c, dx, dy) => {
    const [x, y] = L.center(r, c);
    return [x + dx, y + dy];
  };
  const tl = corner(0, 0, -L.cell / 2 - 4, -R - 4);
  const tr = corner(0, n - 1, L.cell / 2 + 4, -R - 4);
  const br = corner(n - 1, n - 1, L.cell / 2 + 4, R + 4);
  const bl = corner(n - 1, 0, -L.cell / 2 - 4, R + 4);
  ctx.lineWidth = 8;
  for (const [a, b, colour] of [
    [tl, tr, P.stones[1]], [bl, br, P.stones[1]], [tl, bl, P.stones[0]], [tr, br, P.stones[0]],
  ]) {
    ctx.beginPath();
    ctx.moveTo(...a);
    ctx.lineTo(...b);
    ctx.strokeStyle = colour;
    ctx.stroke();
  }
  ctx.lineWidth = 1.5;
  ctx.strokeStyle = P.line;
  for (let r = 0; r < n; r++) {
    for (let c = 0; c < n; c++) {
      const [x, y] = L.center(r, c);
      const k = STONE_CHARS.indexOf(f.board[r][c]);
      hexPath(ctx, x, y, R);
      ctx.fillStyle = k >= 0 ? P.stones[k] : P.empty;
      ctx.fill();
      ctx.stroke();
    }
  }
  for (const [r, c] of (annot && annot.lastMoves) || []) {
    const [x, y] = L.center(r, c);
    ctx.beginPath();
    ctx.arc(x, y, 0.3 * R, 0, 2 * Math.PI);
    ctx.strokeStyle = P.mark;
    ctx.lineWidth = 2.5;
    ctx.stroke();
  }
}

// Speed Go --------------------------------------------------------------------------------

function goLayout(f) {
  const n = f.board.length;
  const cell = Math.floor(480 / (n + 1));
  const m = cell;
  return {
    width: 2 * m + (n - 1) * cell,
    height: 2 * m + (n - 1) * cell,
    cell,
    center: (r, c) => [m + c * cell, m + r * cell],
  };
}

const GO_LETTERS = "ABCDEFGHJKLMNOPQRST";

function drawGo(ctx, f, L, annot) {
  const P = PALETTE.go;
  const n = f.board.length;
  const s = L.cell;
  rect(ctx, 0, 0, L.width, L.height, P.board);
  ctx.strokeStyle = P.line;
  ctx.lineWidth = 1.2;
  for (let i = 0; i < n; i++) {
    const [x0, y0] = L.center(i, 0);
    const [x1, y1] = L.center(i, n - 1);
    ctx.beginPath();
    ctx.moveTo(x0, y0);
    ctx.lineTo(x1, y1);
    ctx.stroke();
    const [u0, v0] = L.center(0, i);
    const [u1, v1] = L.center(n - 1, i);
    ctx.beginPath();
    ctx.moveTo(u0, v0);
    ctx.lineTo(u1, v1);
    ctx.stroke();
  }
  if (n === 9) {
    for (const [r, c] of [[2, 2], [2, 6], [6, 2], [6, 6], [4, 4]]) {
      disc(ctx, ...L.center(r, c), 0.08 * s, P.line);
    }
  }
  ctx.fillStyle = P.line;
  ctx.font = `${Math.round(0.28 * s)}px system-ui, sans-serif`;
  ctx.textAlign = "center";
  ctx.textBaseline = "middle";
  for (let i = 0; i < n; i++) {
    const [x] = L.center(0, i);
    ctx.fillText(GO_LETTERS[i], x, 0.45 * s);
    const [, y] = L.center(i, 0);
    ctx.fillText(String(n - i), 0.45 * s, y);
  }
  for (let r = 0; r < n; r++) {
    for (let c = 0; c < n; c++) {
      const k = STONE_CHARS.indexOf(f.board[r][c]);
      if (k < 0) continue;
      const [x, y] = L.center(r, c);
      disc(ctx, x, y, 0.46 * s, P.stones[k]);
      ctx.lineWidth = 1;
      ctx.strokeStyle = "#000000";
      ctx.stroke();
    }
  }
  for (const [r, c] of (annot && annot.lastMoves) || []) {
    const [x, y] = L.center(r, c);
    ctx.beginPath();
    ctx.arc(x, y, 0.2 * s, 0, 2 * Math.PI);
    ctx.strokeStyle = P.mark;
    ctx.lineWidth = 2.5;
    ctx.stroke();
  }
}

// Registry --------------------------------------------------------------------------------

const GAMES = {
  "pacman-rt-v0": { layout: (f) => gridLayout(f.board.length, f.board[0].length, 16), draw: drawPacman },
  "tetris-rt-v0": { layout: (f) => gridLayout(f.board.length, f.board[0].length, 24), draw: drawTetris },
  "snake-rt-v0": { layout: (f) => gridLayout(f.board.length, f.board[0].length, 40, 480), draw: drawSnake },
  "speed-hex-v0": { layout: hexLayout, draw: drawHex },
  "speed-go-v0": { layout: goLayout, draw: drawGo },
};

export function layoutFor(f) {
  const g = GAMES[f.game];
  if (!g) throw new Error(`no drawing for game ${f.game}`);
  return g.layout(f);
}

export function drawBoard(ctx, f, L, annot) {
  GAMES[f.game].draw(ctx, f, L, annot);
}

/** What the frame `f` did since `prev` (the previous frame received, or null). */
export function annotate(prev, f, prevAnnot) {
  const annot = { heading: "right", lastMoves: [], captures: [0, 0], event: null, moveCost: null };
  if (prevAnnot) {
    annot.heading = prevAnnot.heading;
    annot.captures = prevAnnot.captures.slice();
    annot.lastMoves = prevAnnot.lastMoves;
    annot.event = prevAnnot.event;
    annot.moveCost = prevAnnot.moveCost;
  }
  if (!prev || prev.game !== f.game || f.frame <= prev.frame) return annot;
  if (f.game === "pacman-rt-v0") {
    let dr = f.player[0] - prev.player[0];
    let dc = f.player[1] - prev.player[1];
    if (Math.abs(dc) > 1) dc = -Math.sign(dc); // through the tunnel
    if (Math.abs(dr) > 1) dr = -Math.sign(dr);
    if (dc) annot.heading = dc > 0 ? "right" : "left";
    else if (dr) annot.heading = dr > 0 ? "down" : "up";
  } else if (f.clocks) {
    const added = [];
    const removed = [0, 0];
    let changed = false;
    f.board.forEach((row, r) => {
      for (let c = 0; c < row.length; c++) {
        const was = prev.board[r][c];
        const now = row[c];
        if (was === now) continue;
        changed = true;
        if (now !== ".") added.push([r, c]);
        if (was !== "." && now === ".") removed[STONE_CHARS.indexOf(was)] += 1;
      }
    });
    annot.lastMoves = added;
    annot.captures[0] += removed[1]; // stones a colour took are the other colour's
    annot.captures[1] += removed[0];
    const stones = (b) => b.join("").replace(/\./g, "").length;
    if (!changed) annot.event = "pass";
    else if (added.length && stones(f.board) === stones(prev.board) && f.game === "speed-hex-v0") {
      annot.event = "swap";
    } else annot.event = null;
    const mover = prev.to_play;
    annot.moveCost = prev.clocks[mover] - f.clocks[mover];
    annot.mover = mover;
  }
  return annot;
}

/** One line under the board. */
export function caption(f, annot) {
  if (f.game === "pacman-rt-v0") {
    const fr = f.frightened > 0 ? ` · ghosts frightened (${f.frightened})` : "";
    return `score ${f.score} · pellets left ${f.pellets}${fr}`;
  }
  if (f.game === "tetris-rt-v0") return `score ${f.score} · lines ${f.lines} · piece ${f.piece}`;
  if (f.game === "snake-rt-v0") return `length ${f.length} · score ${f.score}`;
  const names = COLOUR_NAMES[f.game];
  const parts = [`${names[f.to_play_colour]} to play`];
  const coord = ([r, c]) =>
    f.game === "speed-go-v0" ? `${GO_LETTERS[c]}${f.board.length - r}` : `${"abcdefghijk"[c]}${r + 1}`;
  if (annot.event) parts.push(`last move: ${annot.event}`);
  else if (annot.lastMoves.length) parts.push(`last move ${annot.lastMoves.map(coord).join(" ")}`);
  if (f.game === "speed-go-v0") {
    parts.push(`captures ${names[0]} ${annot.captures[0]} · ${names[1]} ${annot.captures[1]}`);
  }
  if (f.timed_out) parts.push("time out");
  return parts.join(" · ");
}
