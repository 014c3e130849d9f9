"""A real browser for the pages people look at: Debian's headless Chromium driven by its
ChromeDriver through selenium (both installed by .ci/run: ``apt-get install chromium
chromium-driver``).

Each test gets a fresh browser with a fresh profile folder, started with no network traffic of its
own (no background networking, component updates, sync or first-run pages) and no sandbox (CI runs
as root).  Screenshots are kept as test artefacts in ``test-artifacts/browser/`` at the top of the
repository (ignored by git).  Teardown ends the browser and its driver and then checks that no
process of that profile is left: the check names a leftover and ends it, by its id.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("CONQ_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CONQ_CHROMEDRIVER", "/usr/bin/chromedriver")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"


def _profile_processes(profile: str) -> list[int]:
    """Ids of the processes whose command line names this profile folder (the browser's)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if f"--user-data-dir={profile}".encode() in cmd:
            pids.append(int(entry.name))
    return pids


@pytest.fixture
def browser(request):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            pytest.fail(f"{path} is missing: apt-get install -y chromium chromium-driver (.ci/run does)")
    profile = tempfile.mkdtemp(prefix="conq-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                f"--user-data-dir={profile}", "--window-size=1280,1200"):
        opts.add_argument(arg)
    service = Service(CHROMEDRIVER)
    driver = webdriver.Chrome(options=opts, service=service)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        try:
            driver.quit()
        finally:
            service.stop()
            left = _profile_processes(profile)
            for _ in range(100):  # the browser's processes end within moments of quit(); 10 s at most
                if not left:
                    break
                time.sleep(0.1)
                left = _profile_processes(profile)
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            shutil.rmtree(profile, ignore_errors=True)
            driver_proc = getattr(service, "process", None)
            assert driver_proc is None or driver_proc.poll() is not None, "chromedriver is still running"
            assert not left, f"browser processes left after quit: {left}"


@pytest.fixture
def screenshot(request):
    """``screenshot(name)``: save the browser's window as test-artifacts/browser/<test>-<name>.png."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def take(driver, name: str) -> Path:
        path = ARTIFACTS / f"{request.node.name}-{name}.png"
        driver.save_screenshot(str(path))
        assert path.stat().st_size > 1000, f"an empty screenshot: {path}"
        return path

    return take
