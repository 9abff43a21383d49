"""Where a folder the project ships (checkpoints/, web/) is: the checkout's, else the wheel's."""

from __future__ import annotations

import importlib.util
from pathlib import Path

# A checkout (or its editable install) keeps the folders at its root, beside the packages. A
# wheel carries them as package data of the package that owns them, `<package>/_assets/<name>`
# (setup.py copies them there): an installed package then finds them wherever it runs from.

#: The checkout's root: the folder that holds the packages.
CHECKOUT = Path(__file__).resolve().parents[1]

#: The folder, inside its owner package, where a wheel carries a shipped folder (setup.py).
ASSETS = "_assets"


def shipped_dir(name: str, package: str) -> Path:
    """The shipped folder `name`: the checkout's `<root>/name` when the code runs from a
    checkout (that folder exists beside the packages), else the package data of the installed
    `package` (`<package>/_assets/name`, found without importing it). The path may not exist
    (an install without it): a caller that finds nothing there names it and its override flag.

    Args:
        name: the folder at the checkout's root ("checkpoints", "web").
        package: the package that owns it in a wheel ("rtplan.harness", "rtplan.server").
    """
    checkout = CHECKOUT / name
    if checkout.is_dir():
        return checkout
    # A wheel installs unpacked, so the package's data is a real folder. Its spec names the
    # folder without running the package: the arena finds the pages the env server's package
    # carries without loading the env server.
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"no package {package!r}", name=package)
    return Path(next(iter(spec.submodule_search_locations))) / ASSETS / name


#: The browser pages' folder, which the env server and the arena both serve: a wheel carries it
#: as the env server package's data (setup.py), found without importing that package.
WEB, WEB_PACKAGE = "web", "rtplan.server"


def web_dir(configured: Path | None = None) -> Path:
    """Where the browser pages are looked for: `configured` (a service's `--web-dir`) when
    given, else the shipped web/ (`shipped_dir`). The folder may not exist or hold no pages."""
    return Path(configured) if configured is not None else shipped_dir(WEB, WEB_PACKAGE)


def find_pages(configured: Path | None, page: str) -> Path | None:
    """The pages' folder (`web_dir(configured)`) when it holds the file `page`, else None.

    Args:
        configured: the service's `--web-dir`, or None for the shipped web/.
        page: the file that says the folder holds this service's pages ("index.html").
    """
    web = web_dir(configured)
    return web if (web / page).is_file() else None
