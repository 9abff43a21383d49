"""`rtplan.processes`' API keys: the key file's rules, rotation by a rewrite or a move, the
token beside the file, the loopback rule, and no key in a repr, an error or a log line."""

from __future__ import annotations

import logging
import os

import pytest

from rtplan.processes import (
    ApiKeys,
    KeyFileError,
    Verdict,
    check_key,
    exposure_refusal,
    exposure_warning,
    first_key,
    is_loopback,
    read_key_file,
)

K1, K2, K3, TOKEN = "a" * 16, "b" * 40, "c-_.~" * 5, "t0ken-" * 4


def _write(path, text: str, mode: int = 0o600) -> None:
    path.write_text(text)
    path.chmod(mode)


def test_a_key_file_is_one_key_a_line_with_comments_and_blank_lines_left_out(tmp_path):
    path = tmp_path / "keys"
    _write(path, f"# the lab's keys\n\n  {K1}  \n# {K3} retired\n{K2}\n", mode=0o644)
    assert read_key_file(path) == (K1, K2)
    assert first_key(path) == K1


@pytest.mark.parametrize(
    ("text", "mode", "says"),
    [
        ("", 0o600, "holds no key"),
        ("# only a comment\n\n", 0o600, "holds no key"),
        (f"{K1}\nshort\n", 0o600, "line 2 of the API key file"),
        (f"{K1}\nwith a space inside it\n", 0o600, "line 2 of the API key file"),
        (f"{K1}\n", 0o666, "writable by anyone"),
        ("\u00e9" * 20 + "\n", 0o600, "not ASCII text"),
    ],
    ids=["empty", "comments-only", "short", "space", "world-writable", "not-ascii"],
)
def test_a_key_file_that_cannot_serve_is_refused_naming_it_but_no_key(tmp_path, text, mode, says):
    path = tmp_path / "keys"
    _write(path, text, mode)
    with pytest.raises(KeyFileError) as refused:
        read_key_file(path)
    assert says in str(refused.value) and str(path) in str(refused.value)
    assert K1 not in str(refused.value)
    with pytest.raises(KeyFileError):
        ApiKeys(key_file=path)  # a service refuses to start on it


def test_a_missing_file_or_a_folder_is_refused(tmp_path):
    with pytest.raises(KeyFileError, match=r"cannot read the API key file .* \(No such file"):
        read_key_file(tmp_path / "nothing")
    with pytest.raises(KeyFileError, match="Is a directory|is not a file"):
        read_key_file(tmp_path)


def test_check_key_names_where_never_what():
    assert check_key(K2) == K2
    for bad in ("", "x" * 15, "x" * 15 + " ", "x" * 20 + "\t", "\u00e9" * 20):
        with pytest.raises(ValueError) as refused:
            check_key(bad, "the agent token")
        assert str(refused.value).startswith("the agent token must be at least 16 visible")
        assert not bad or bad not in str(refused.value)


def test_verdicts_for_every_key_of_the_file_and_the_token(tmp_path):
    path = tmp_path / "keys"
    _write(path, f"{K1}\n{K2}\n")
    keys = ApiKeys(token=TOKEN, key_file=path)
    assert keys.required and keys.key_file == path
    assert [keys.verdict(k) for k in (K1, K2, TOKEN)] == [Verdict.GRANTED] * 3
    assert keys.verdict(None) is keys.verdict("") is Verdict.MISSING
    assert keys.verdict(K3) is keys.verdict(K1 + "x") is keys.verdict(K1[:-1]) is Verdict.WRONG
    assert ApiKeys(token=TOKEN).verdict(K1) is Verdict.WRONG
    assert ApiKeys(token=TOKEN).verdict(TOKEN) is Verdict.GRANTED
    open_ = ApiKeys()
    assert not open_.required and open_.verdict(None) is open_.verdict(K1) is Verdict.OPEN
    for shown in (repr(keys), str(keys)):
        assert all(k not in shown for k in (K1, K2, TOKEN)), shown
        assert "token=set" in shown and str(path) in shown


def test_a_rewritten_or_replaced_file_rotates_its_keys_without_a_restart(tmp_path, caplog):
    path = tmp_path / "keys"
    _write(path, f"{K1}\n{K2}\n")
    keys = ApiKeys(key_file=path)
    assert keys.verdict(K1) is Verdict.GRANTED
    # Rewritten in place (as a compose secret, a bind-mounted file, must be): K1 is dropped.
    with caplog.at_level(logging.INFO, logger="rtplan.keys"):
        with path.open("w") as f:
            f.write(f"{K2}\n{K3}\n")
        os.utime(path, ns=(1, 1))  # a new mtime even where the clock is coarse
        assert keys.verdict(K1) is Verdict.WRONG
        assert keys.verdict(K2) is keys.verdict(K3) is Verdict.GRANTED
        # Replaced by a move (a new inode: how an editor saves, and a Kubernetes Secret swaps).
        new = tmp_path / "keys.new"
        _write(new, f"{K1}\n")
        new.replace(path)
        assert keys.verdict(K1) is Verdict.GRANTED and keys.verdict(K3) is Verdict.WRONG
    assert caplog.text.count("read again: ") == 2
    assert all(k not in caplog.text for k in (K1, K2, K3))


def test_a_file_that_stops_serving_opens_nothing_says_so_once_and_the_token_still_works(
    tmp_path, caplog
):
    path = tmp_path / "keys"
    _write(path, f"{K1}\n")
    keys = ApiKeys(token=TOKEN, key_file=path)
    with caplog.at_level(logging.WARNING, logger="rtplan.keys"):
        path.write_text("")  # emptied: fail closed, not open
        for _ in range(3):
            assert keys.verdict(K1) is Verdict.WRONG
        assert keys.verdict(TOKEN) is Verdict.GRANTED
        path.unlink()
        assert keys.verdict(K1) is Verdict.WRONG
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2, warnings
    assert "holds no key" in warnings[0] and "cannot read" in warnings[1]
    assert all("none of its keys opens anything" in w for w in warnings)
    _write(path, f"{K1}\n")  # fixed: it serves again
    assert keys.verdict(K1) is Verdict.GRANTED


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("::1", True),
        ("[::1]", True),
        ("::ffff:127.0.0.1", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("0.0.0.0", False),
        ("::", False),
        ("", False),
        ("192.168.1.20", False),
        ("10.0.0.1", False),
        ("fe80::1", False),
        ("my-host.lan", False),
    ],
)
def test_loopback(host, loopback):
    assert is_loopback(host) is loopback


def test_the_refusal_names_both_ways_out_and_only_where_it_must():
    kwargs = dict(guarded="create sessions", token_variable="RTPLAN_SERVER_AGENT_TOKEN")
    line = exposure_refusal("env server", "0.0.0.0", ApiKeys(), open_on_purpose=False, **kwargs)
    assert line == (
        "env server: refusing to serve 0.0.0.0, which is not loopback, with no key (anyone who "
        "reaches it could create sessions): give keys with --api-key-file FILE (one a line) or "
        "RTPLAN_SERVER_AGENT_TOKEN, or pass --open to serve it open on purpose"
    )
    assert "\n" not in line
    for host, keys, open_ in (
        ("0.0.0.0", ApiKeys(token=TOKEN), False),
        ("0.0.0.0", ApiKeys(), True),
        ("127.0.0.1", ApiKeys(), False),
    ):
        assert exposure_refusal("env server", host, keys, open_on_purpose=open_, **kwargs) is None
    assert exposure_warning("arena", "::", "call its administration routes") == (
        "arena serves :: open (--open, no key): anyone who reaches it can call its "
        "administration routes"
    )
