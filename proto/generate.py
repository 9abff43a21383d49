"""Generates the Python stubs of proto/rtplan/v1 into rtplan/v1 (the one way to make them).

Usage: python proto/generate.py [--out DIR]   (DIR defaults to the repository root)

The stubs are checked in; tests/rtplan/test_proto.py regenerates them into a temporary folder and
fails when they differ, so edit the .proto files, run this, and commit both.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROTO_ROOT = ROOT / "proto"
FILES = ("tensor.proto", "env.proto", "planner.proto")
INIT = '"""Generated protocol stubs of package rtplan.v1 (proto/generate.py; do not edit)."""\n'


def generate(out: Path) -> list[Path]:
    """Writes the stubs under `out`/rtplan/v1 and returns the paths written."""
    import grpc_tools
    from grpc_tools import protoc

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    pkg = out / "rtplan" / "v1"
    pkg.mkdir(parents=True, exist_ok=True)
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{well_known}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        f"--grpc_python_out={out}",
        *(str(PROTO_ROOT / "rtplan" / "v1" / f) for f in FILES),
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed: {' '.join(args)}")
    (pkg / "__init__.py").write_text(INIT)
    return sorted(p for p in pkg.iterdir() if p.suffix in (".py", ".pyi"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT)
    args = parser.parse_args()
    for path in generate(args.out):
        print(path.relative_to(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
