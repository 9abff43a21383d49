"""The browser tests' Chromium (the Debian package, driven by Playwright) and a checked tab."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench._page import FLAGS
from support import CHROMIUM


@pytest.fixture(scope="module")
def chromium_path() -> str:
    if os.environ.get("RTPLAN_SKIP_BROWSER") == "1":
        pytest.skip("RTPLAN_SKIP_BROWSER=1")
    if not Path(CHROMIUM).is_file():
        pytest.fail(
            f"no Chromium at {CHROMIUM}: the browser tests need the Debian package `chromium` "
            "(`make test` installs it; or apt-get install chromium), or RTPLAN_CHROMIUM=path; "
            "RTPLAN_SKIP_BROWSER=1 skips them"
        )
    return CHROMIUM


@pytest.fixture(scope="module")
def playwright(chromium_path):
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the browser tests need Playwright for Python: pip install -e '.[dev]'")
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="module")
def browser(playwright, chromium_path, tmp_path_factory):
    context = playwright.chromium.launch_persistent_context(
        str(tmp_path_factory.mktemp("chromium-profile")),
        executable_path=chromium_path,
        args=FLAGS,
        headless=True,
        viewport={"width": 960, "height": 720},
    )
    yield context
    context.close()


@pytest.fixture(scope="module")
def phone(playwright, chromium_path, tmp_path_factory):
    """A phone's browser: a 390 x 844 screen at 3 device pixels a CSS pixel, played by taps."""
    context = playwright.chromium.launch_persistent_context(
        str(tmp_path_factory.mktemp("chromium-phone")),
        executable_path=chromium_path,
        args=FLAGS,
        headless=True,
        viewport={"width": 390, "height": 844},
        device_scale_factor=3,
        is_mobile=True,
        has_touch=True,
    )
    yield context
    context.close()


def checked_tab(context):
    """A fresh tab of browser `context` whose console errors and page errors fail the test
    (a generator for a fixture to yield from)."""
    tab = context.new_page()
    errors: list[str] = []
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.on("pageerror", lambda e: errors.append(str(e)))
    yield tab
    tab.close()
    assert errors == [], errors


@pytest.fixture
def page(browser):
    """A fresh tab whose console errors and page errors fail the test."""
    yield from checked_tab(browser)


@pytest.fixture
def phone_tab(phone):
    """A fresh phone tab whose console errors and page errors fail the test."""
    yield from checked_tab(phone)
