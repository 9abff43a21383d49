"""The wheel's package data: the shipped checkpoints and browser pages (the rest: pyproject.toml).

A checkout keeps checkpoints/ and web/ at its root, beside the packages; a wheel carries a copy
of each inside the package that owns it, `rtplan/harness/_assets/checkpoints` and
`rtplan/server/_assets/web`,
where `harness.assets.shipped_dir` finds them once installed.

Why a `build_py` step rather than mapping the folders in as packages (`package-dir`): the
folders stay where they are with no `__init__.py`, no fake `harness._assets.*` packages join
the package list (tests/packaging/test_layers.py) or the editable install's import finder, and
"only the top-level files of each checkpoints/<game>/" is one plain filter (`shipped_files`)
instead of globs, since the training runs, calibration data and CSV logs beside them never ship. It
runs in `pip wheel .` (with or without build isolation) and in a wheel built from the sdist
(MANIFEST.in carries the same files); the editable install (`pip install -e .`) copies nothing,
since there the checkout's own folders are found first.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent

#: Checkout folder -> where the wheel carries it (`harness.assets.shipped_dir`: <package>/_assets).
SHIPPED = {
    "checkpoints": "rtplan/harness/_assets/checkpoints",
    "web": "rtplan/server/_assets/web",
}

#: The files of each checkpoints/<game>/ that ship: its top-level files of these kinds (the
#: planner, the gate, their JSON metadata, README, figures); never a subfolder or a CSV.
CHECKPOINT_SUFFIXES = (".msgpack", ".json", ".md", ".png")


def shipped_files(root: Path = ROOT) -> dict[str, Path]:
    """Path in the wheel -> source file, for every shipped file: all of web/, and of each
    checkpoints/<game>/ its top-level files with a suffix in CHECKPOINT_SUFFIXES."""
    web = [p for p in (root / "web").rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    ckpt = [
        p
        for p in (root / "checkpoints").glob("*/*")
        if p.is_file() and p.suffix in CHECKPOINT_SUFFIXES
    ]
    files = {}
    for path in sorted(web + ckpt):
        folder, *rest = path.relative_to(root).parts
        files["/".join([SHIPPED[folder], *rest])] = path
    return files


class BuildPy(build_py):
    """`build_py`, then the shipped files copied into the build as package data."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for dest in SHIPPED.values():  # no file of an earlier build lingers in the wheel
            shutil.rmtree(Path(self.build_lib) / dest, ignore_errors=True)
        for dest, source in shipped_files().items():
            target = Path(self.build_lib) / dest
            self.mkpath(str(target.parent))
            self.copy_file(str(source), str(target))

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        outputs = super().get_outputs(include_bytecode)
        if getattr(self, "editable_mode", False):
            return outputs
        return outputs + [str(Path(self.build_lib) / dest) for dest in shipped_files()]


setup(cmdclass={"build_py": BuildPy})
