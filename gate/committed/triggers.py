"""State features recorded at each gate decision, to see what makes the gate think longer."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import jax

from rtplan import games
from rtplan.games.tetris import PIECE_NAMES

__all__ = ["FEATURES", "PIECE_NAMES", "trigger_features"]


class _FeatureNames(Mapping):
    """Game id -> the names `trigger_features` returns, for every registered game that has
    trigger features (a live view of the registry records)."""

    def _ids(self) -> list[str]:
        return [g for g in games.registered_games() if games.game_record(g).features is not None]

    def __getitem__(self, game_id: str) -> tuple[str, ...]:
        if game_id not in self._ids():
            raise KeyError(game_id)
        return games.game_record(game_id).feature_names

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids())

    def __len__(self) -> int:
        return len(self._ids())


#: Feature names per game, as `trigger_features` returns them.
FEATURES: Mapping[str, tuple[str, ...]] = _FeatureNames()


def trigger_features(game_id: str) -> Callable[[games.State], dict[str, jax.Array]]:
    """`states [B] -> {name: [B] float32}` for a game whose record has trigger features (the
    returned function is already vmapped)."""
    if game_id not in FEATURES:
        raise ValueError(f"no trigger features for {game_id}: choose from {sorted(FEATURES)}")
    return jax.vmap(games.resolve(games.game_record(game_id).features))
