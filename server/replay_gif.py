"""A replay as an animated GIF: each frame's rendered board and a strip of k and the value."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw, ImageFont

from rtplan.server._replay_view import ReplayView

#: Frames one GIF may hold (the route's bound; the command takes any --max-frames).
MAX_GIF_FRAMES = 600
#: The strip under the board: a text line and the k (bars) and value (line) timeline, px.
STRIP_TEXT, STRIP_CHART = 14, 22
#: The board's longer side aims at about this many pixels (cells of 6 to 24 px).
BOARD_PX = 264

# The pages' palettes (web/games/*.js), as far as a plain raster needs them.
_CELL = {
    " ": "#0f1a12",
    "#": "#2b3bd9",
    "s": "#49c46a",
    "S": "#1d7a38",
    "*": "#f0384f",
}
_TETRIS = {"bg": "#101018", "locked": "#7a8194", "piece": "#ffd23f"}
_PACMAN = {"bg": "#000000", "wall": "#2b3bd9", "pellet": "#ffc8b4", "player": "#ffe600"}
_GHOSTS = ("#ff2020", "#ffb0ff", "#00e5ff", "#ffb347")
_STONES = ("#111111", "#f2f2f2")
_BOARD, _LINE = "#dcb35c", "#3a2c10"
_STRIP = {"bg": "#181818", "text": "#e8e8e8", "k": "#4fb3ff", "value": "#ffb347", "now": "#f0384f"}


def cell_px(board: dict[str, Any]) -> int:
    """The side of a cell of rendered board `board` (`games.render.render`'s dict), px."""
    rows = board["board"]
    return max(6, min(24, BOARD_PX // max(len(rows), len(rows[0]))))


def board_size(board: dict[str, Any]) -> tuple[int, int]:
    """(width, height) of `board_image(board)` (Speed Hex's rows shift half a cell each)."""
    rows, s = board["board"], cell_px(board)
    width = len(rows[0]) * s + (
        s * (len(rows) - 1) // 2 if board.get("game") == "speed-hex-v0" else 0
    )
    return width, len(rows) * s


def board_image(board: dict[str, Any]) -> Image.Image:
    """A raster of rendered board `board` in the pages' colours (a plain grid per game).

    Args:
        board: a frame as `games.render.render` returns it (``board`` rows and the game's keys).

    Returns:
        An RGB image of `board_size(board)`.
    """
    rows, s = board["board"], cell_px(board)
    img = Image.new("RGB", board_size(board), _CELL[" "])
    d = ImageDraw.Draw(img)
    if "to_play_colour" in board:  # Speed Hex, Speed Go: stones on a board
        d.rectangle([0, 0, *img.size], fill=_BOARD)
        shift = board.get("game") == "speed-hex-v0"
        for r, row in enumerate(rows):
            for c, ch in enumerate(row):
                x, y = c * s + (r * s // 2 if shift else 0), r * s
                d.rectangle([x, y, x + s - 1, y + s - 1], outline=_LINE)
                if ch in "xo":
                    d.ellipse([x + 1, y + 1, x + s - 2, y + s - 2], fill=_STONES["xo".index(ch)])
        return img
    if "ghosts" in board:  # Pac-Man
        d.rectangle([0, 0, *img.size], fill=_PACMAN["bg"])
        for r, row in enumerate(rows):
            for c, ch in enumerate(row):
                x, y = c * s, r * s
                if ch == "#":
                    d.rectangle([x, y, x + s - 1, y + s - 1], fill=_PACMAN["wall"])
                elif ch in ".o":
                    q = s // 6 if ch == "." else s // 3
                    h = s // 2
                    d.ellipse([x + h - q, y + h - q, x + h + q, y + h + q], fill=_PACMAN["pellet"])
        for i, (r, c) in enumerate(board["ghosts"]):
            d.rectangle([c * s + 1, r * s + 1, c * s + s - 2, r * s + s - 2], fill=_GHOSTS[i % 4])
        r, c = board["player"]
        d.ellipse([c * s + 1, r * s + 1, c * s + s - 2, r * s + s - 2], fill=_PACMAN["player"])
        return img
    if "piece_cells" in board:  # Tetris
        d.rectangle([0, 0, *img.size], fill=_TETRIS["bg"])
        cells = [
            (r, c, _TETRIS["locked"]) for r, row in enumerate(rows) for c, ch in enumerate(row)
        ]
        cells = [x for x in cells if rows[x[0]][x[1]] != " "]
        cells += [(r, c, _TETRIS["piece"]) for r, c in board["piece_cells"]]
        for r, c, colour in cells:
            d.rectangle([c * s + 1, r * s + 1, c * s + s - 2, r * s + s - 2], fill=colour)
        return img
    for r, row in enumerate(rows):  # Snake, and any grid of cell characters
        for c, ch in enumerate(row):
            if ch != " ":
                fill = _CELL.get(ch, "#c0c0c0")
                d.rectangle([c * s + 1, r * s + 1, c * s + s - 2, r * s + s - 2], fill=fill)
    return img


def strip_rows(frames: Sequence[dict[str, Any]]) -> list[tuple[int | None, float | None]]:
    """Per frame message: the k of the option its previous frame played and the planner's
    value at that option's decision (None where there is none: frame 0, a reflex)."""
    out: list[tuple[int | None, float | None]] = []
    for f in frames:
        p = f.get("previous") or {}
        decision = p.get("decision") or {}
        out.append((p.get("k"), decision.get("value")))
    return out


def strip_image(rows: Sequence[tuple[int | None, float | None]], n: int, width: int) -> Image.Image:
    """The strip under frame `n`'s board: its frame, k and value, and the whole replay's k (bars,
    log scale) and value (line, -1 .. 1) with a mark at frame `n`."""
    img = Image.new("RGB", (width, STRIP_TEXT + STRIP_CHART), _STRIP["bg"])
    d = ImageDraw.Draw(img)
    k, v = rows[n]
    text = f"frame {n}/{len(rows) - 1}  k={'-' if k is None else k}"
    if v is not None:
        text += f"  value {v:+.2f}"
    d.text((3, 1), text, fill=_STRIP["text"], font=ImageFont.load_default(size=11))
    top, h = STRIP_TEXT, STRIP_CHART - 2
    kmax = max([x for x, _ in rows if x] or [1])
    x_of = lambda i: int(i * (width - 1) / max(1, len(rows) - 1))  # noqa: E731
    for i, (ki, _) in enumerate(rows):
        if ki:
            bar = max(1, round(h * math.log2(ki + 1) / math.log2(kmax + 1)))
            d.line([x_of(i), top + h, x_of(i), top + h - bar], fill=_STRIP["k"])
    line = [
        (x_of(i), top + h * (1 - (max(-1.0, min(1.0, vi)) + 1) / 2))
        for i, (_, vi) in enumerate(rows)
        if vi is not None
    ]
    if len(line) > 1:
        d.line(line, fill=_STRIP["value"])
    d.line([x_of(n), top, x_of(n), top + h], fill=_STRIP["now"])
    return img


def frame_numbers(total: int, *, every: int = 1, max_frames: int | None = None) -> list[int]:
    """The frames of a `total`-frame replay a GIF shows: every `every`-th from 0, at most
    `max_frames` of them."""
    if every < 1:
        raise ValueError(f"every must be >= 1, got {every}")
    if max_frames is not None and max_frames < 1:
        raise ValueError(f"max_frames must be >= 1, got {max_frames}")
    return list(range(0, total, every))[:max_frames]


#: The longest delay a GIF frame can hold (65535 hundredths of a second).
MAX_DELAY_MS = 655_350


def gif_bytes(
    view: ReplayView,
    *,
    fps: float | None = None,
    every: int = 1,
    max_frames: int | None = None,
) -> bytes:
    """Renders replay `view` as an animated GIF: per shown frame its board (`board_image`) over
    the k and value strip (`strip_image`), looping.

    Args:
        view: the re-simulated replay.
        fps: GIF frames per second (default: the recorded FPS divided by `every`, so the GIF
            plays at the recorded speed; GIF delays are in 10 ms steps).
        every: show every n-th frame.
        max_frames: show at most this many frames.

    Returns:
        The GIF file's bytes: `len(frame_numbers(...))` frames of one size.
    """
    numbers = frame_numbers(len(view.frames), every=every, max_frames=max_frames)
    rows = strip_rows(view.frames)
    if fps is None:
        fps = float(view.hello["config"].get("fps") or 10.0) / every
    if fps <= 0:
        raise ValueError(f"fps must be > 0, got {fps}")
    images = []
    for n in numbers:
        board = board_image(view.boards(n, 1)[0])
        width = max(board.width, 160)
        img = Image.new("RGB", (width, board.height + STRIP_TEXT + STRIP_CHART), _STRIP["bg"])
        img.paste(board, ((width - board.width) // 2, 0))
        img.paste(strip_image(rows, n, width), (0, board.height))
        images.append(img.quantize(colors=64, dither=Image.Dither.NONE))
    out = io.BytesIO()
    # A GIF delay is 16 bits of 10 ms: at most 655.35 s a frame (a slow fps or a large every).
    duration = max(20, round(min(1000 / fps, MAX_DELAY_MS)))  # 1000 / 5e-324 is inf
    images[0].save(
        out,
        format="GIF",
        save_all=True,
        append_images=images[1:],
        duration=duration,
        loop=0,
        disposal=1,
    )
    return out.getvalue()


def write_gif(path: str | Path, out: str | Path, **kwargs: Any) -> int:
    """Re-simulates replay file `path` and writes its GIF (`gif_bytes`'s keywords) to `out`.

    Returns:
        The number of frames written.

    Raises:
        ReplayError: as `server.replay.replay`.
    """
    view = ReplayView(path)
    data = gif_bytes(view, **kwargs)
    Path(out).write_bytes(data)
    return len(
        frame_numbers(
            len(view.frames), every=kwargs.get("every", 1), max_frames=kwargs.get("max_frames")
        )
    )
