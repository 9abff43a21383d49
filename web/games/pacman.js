// Pac-Man (pacman-rt-v0): maze walls, pellets, ghosts and Pac-Man facing where it last moved.

import { advanced, carryAnnot, disc, gridLayout, rect } from "../draw.js";

export const PALETTE = {
  background: "#000000",
  wall: "#2b3bd9",
  wallCore: "#0a0f3c",
  pellet: "#ffc8b4",
  power: "#ffc8b4",
  player: "#ffe600",
  ghosts: ["#ff2020", "#ffb0ff", "#00e5ff", "#ffb347"],
  frightened: "#3a3aff",
};

const HEADINGS = { right: 0, down: Math.PI / 2, left: Math.PI, up: -Math.PI / 2 };

export function layout(f) {
  return gridLayout(f.board.length, f.board[0].length, 16);
}

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

export function draw(ctx, f, L, annot) {
  const P = PALETTE;
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

/** Pac-Man's heading: where it moved since the previous frame (through the tunnel too). */
export function annotate(prev, f, prevAnnot) {
  const annot = carryAnnot(prevAnnot);
  if (!advanced(prev, f)) return annot;
  let dr = f.player[0] - prev.player[0];
  let dc = f.player[1] - prev.player[1];
  if (Math.abs(dc) > 1) dc = -Math.sign(dc); // through the tunnel
  if (Math.abs(dr) > 1) dr = -Math.sign(dr);
  if (dc) annot.heading = dc > 0 ? "right" : "left";
  else if (dr) annot.heading = dr > 0 ? "down" : "up";
  return annot;
}

export function caption(f) {
  const fr = f.frightened > 0 ? ` · ghosts frightened (${f.frightened})` : "";
  return `score ${f.score} · pellets left ${f.pellets}${fr}`;
}
