"""The docs stay true: links resolve, the README stays short, documented commands exist."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
#: The pages whose links and commands are checked: the README, docs/, the package READMEs.
PAGES = sorted(
    [
        README,
        *(ROOT / "docs").glob("*.md"),
        *(p for p in ROOT.glob("*/README.md") if not p.parent.name.startswith(".")),
    ]
)
#: Pages whose `rtplan` commands are checked too: the shipped checkpoints' READMEs cite them.
COMMAND_PAGES = sorted([*PAGES, *ROOT.glob("checkpoints/**/README.md")])
MAX_README_LINES = 200

_FENCE = re.compile(r"^```.*?^```[^\n]*$", re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"`([^`]+)`")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.MULTILINE)
#: `rtplan <subcommand>` and the arguments that follow it, up to a shell separator or comment.
_COMMAND = re.compile(r"(?<![\w./-])rtplan ([a-z][a-z0-9-]*)([^&;|#\n]*)")
_FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _split(text: str) -> tuple[str, list[str]]:
    """(prose with fenced code blocks removed, the fenced blocks)."""
    return _FENCE.sub("", text), _FENCE.findall(text)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lowercase, punctuation gone, spaces -> -."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").replace("*", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    prose, _ = _split(path.read_text())
    anchors, seen = set(), {}
    for _, title in _HEADING.findall(prose):
        slug = _slug(title)
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def _links(path: Path) -> list[str]:
    prose, _ = _split(path.read_text())
    prose = _INLINE_CODE.sub("", prose)
    return _LINK.findall(prose)


def _snippets(path: Path) -> list[str]:
    """Every piece of code on a page: fenced blocks (backslash continuations joined) and inline
    code spans (which may wrap across lines)."""
    prose, blocks = _split(path.read_text())
    spans = [" ".join(s.split()) for s in _INLINE_CODE.findall(prose)]
    return [b.replace("\\\n", " ") for b in blocks] + spans


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    jax_before = "jax" in sys.modules
    from rtplan.cli import build_parser

    parser = build_parser()
    if not jax_before:  # the parser must stay cheap: `--devices` is set before jax loads
        assert "jax" not in sys.modules, "building the rtplan parser imported jax"
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def _group(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    """The subcommands of a command group (`rtplan arena`), or None."""
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def _options(parser: argparse.ArgumentParser) -> set[str] | None:
    """A subcommand's long options, or None when it forwards its arguments (the services)."""
    if any(a.nargs == argparse.REMAINDER for a in parser._actions):
        return None
    return {s for a in parser._actions for s in a.option_strings}


def test_pages_found():
    names = {_rel(p) for p in PAGES}
    assert {"README.md", "docs/results.md", "server/README.md"} <= names


def test_readme_is_short():
    lines = README.read_text().count("\n")
    assert lines < MAX_README_LINES, f"README.md has {lines} lines; move detail into docs/"


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_relative_links_resolve(page: Path):
    broken = []
    for target in _links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading with anchor #{anchor} in {_rel(dest)}")
        elif anchor and dest.suffix != ".md":
            broken.append(f"{target}: anchor into a non-Markdown file")
    assert not broken, f"{_rel(page)}: " + "; ".join(broken)


def test_documented_commands_exist():
    subcommands = _subcommands()
    problems, seen = [], 0
    for page in COMMAND_PAGES:
        for snippet in _snippets(page):
            for name, rest in _COMMAND.findall(snippet):
                seen += 1
                if name not in subcommands:
                    problems.append(f"{_rel(page)}: `rtplan {name}` is not a subcommand")
                    continue
                parser, words = subcommands[name], rest.split()
                group = _group(parser)  # a command group's subcommand: `rtplan arena register`
                if group is not None and words and words[0] in group.choices:
                    parser = group.choices[words[0]]
                elif group is not None and words and not words[0].startswith("-"):
                    problems.append(f"{_rel(page)}: `rtplan {name} {words[0]}` is no subcommand")
                    continue
                options = _options(parser)
                for flag in _FLAG.findall(rest) if options is not None else []:
                    if flag not in options:
                        problems.append(f"{_rel(page)}: `rtplan {name}` has no {flag}")
    assert seen >= 10, f"found only {seen} rtplan commands: is the pattern still right?"
    assert not problems, "\n".join(problems)


def test_checks_catch_breakage(tmp_path: Path):
    """The helpers above report a missing file, a missing anchor and an unknown subcommand."""
    (tmp_path / "a.md").write_text("# Hello, `world`!\n\n```\n# not a heading\n```\n")
    page = tmp_path / "b.md"
    page.write_text("[ok](a.md#hello-world) [x](missing.md) `rtplan no-such-cmd --x`\n")
    assert _anchors(tmp_path / "a.md") == {"hello-world"}
    assert _links(page) == ["a.md#hello-world", "missing.md"]
    assert _COMMAND.findall(" ".join(_snippets(page))) == [("no-such-cmd", " --x")]
    subcommands = _subcommands()
    assert "no-such-cmd" not in subcommands
    assert "--max-frames" in _options(subcommands["cross-eval"])
    assert "--no-such-flag" not in _options(subcommands["cross-eval"])
    assert _options(subcommands["env-server"]) is None  # its own parser checks its flags
    arena = _group(subcommands["arena"]).choices
    assert "--version" in _options(arena["register"]) and _options(arena["serve"]) is None
