"""Go board judgements the engine makes on the host: own eyes, dead stones, the area count."""

from __future__ import annotations

import numpy as np

from games.go import SIZE


def neighbours(point: int) -> list[int]:
    """The on-board orthogonal neighbours of a point (row * 9 + col)."""
    r, c = divmod(point, SIZE)
    out = []
    for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        if 0 <= r + dr < SIZE and 0 <= c + dc < SIZE:
            out.append((r + dr) * SIZE + c + dc)
    return out


def own_eye(board: np.ndarray, point: int) -> bool:
    """Whether `point` is an eye of the player whose stones are +1 on `board` `[81]` (-1 the
    opponent's, 0 empty): empty, every orthogonal neighbour ours, and at most one diagonal the
    opponent's (none on the edge), the usual rule of thumb for an eye that is not false.
    Filling one is never a useful move under area scoring."""
    if board[point] != 0 or any(board[n] != 1 for n in neighbours(point)):
        return False
    r, c = divmod(point, SIZE)
    diagonals = [
        (r + dr) * SIZE + c + dc
        for dr in (-1, 1)
        for dc in (-1, 1)
        if 0 <= r + dr < SIZE and 0 <= c + dc < SIZE
    ]
    theirs = sum(board[d] == -1 for d in diagonals)
    return theirs == 0 if len(diagonals) < 4 else theirs <= 1
