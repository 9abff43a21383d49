"""bench/protocol_audit.py: the paper's protocol on known truths reads rtplan eval's files and
reports noise as noise (no JAX)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bench.protocol_audit import audit, pooled_returns


def _write(root, game, split, k, returns):
    path = root / game / split / f"k{k}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"returns": returns, "seeds": list(range(len(returns)))}))


def test_pools_join_every_split_per_budget(tmp_path):
    _write(tmp_path, "g", "tuning", 1, [1.0, 2.0])
    _write(tmp_path, "g", "holdout", 1, [3.0])
    _write(tmp_path, "g", "eval", 2, [5.0])
    pools = pooled_returns("g", tmp_path)
    assert list(pools) == [1, 2]
    assert sorted(pools[1]) == [1.0, 2.0, 3.0] and list(pools[2]) == [5.0]
    with pytest.raises(SystemExit, match="no always-k results"):
        pooled_returns("other", tmp_path)


def test_known_truths_report_no_gain_on_average():
    rng = np.random.default_rng(0)
    pools = {k: rng.normal(100 + k, 20, size=500) for k in (1, 2, 3, 4)}
    result = audit(pools, draws=4000, rng=np.random.default_rng(1))
    assert result["best"] == int(max(pools, key=lambda k: pools[k].mean()))
    # Two copies of one budget: centred on no gain, spread ~ sqrt(2) * 20 / sqrt(100) / 100.
    assert abs(result["copies"].mean()) < 0.005
    assert 0.025 < np.quantile(result["copies"], 0.95) < 0.06
    # The highest of four means favours the baseline; a gate picked among copies cannot win.
    assert result["best of four"].mean() < result["copies"].mean()
    assert result["picked gate"].mean() <= result["best of four"].mean() + 0.002
