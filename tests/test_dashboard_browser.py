"""The dashboard in a real browser: Debian's headless Chromium (/usr/bin/chromium) driven by Playwright.

A tiny run on the sim backend writes a results folder; the page must show what a person checks: a row per trial in
its state, the dollars charged equal to summary.json's ``total_cost_usd`` to the cent, and the θ barrier having
stopped exactly the trials outside the top-k at the barrier step; it takes a screenshot. A second test follows a
``--backend local`` run live. Both skip, saying why, where Chromium or the ``playwright`` package is missing;
Playwright's own browser download (``playwright install``) is never used. ``SPOTTUNE_UPDATE_FIGURES=1`` rewrites
the README's screenshot (docs/figures/dashboard.png); without it the test writes it only where it is missing, so a
run leaves the checkout clean.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from spottune.cli import cli

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
FIGURE = Path(__file__).resolve().parents[1] / "docs" / "figures" / "dashboard.png"
SPEC = ("workload: logreg\nsearch_space: {lr: {grid_search: [0.02, 0.05, 0.1, 0.2]}}\nmax_steps: 20\ntheta: 0.5\n"
        "top_k: 2\ninstance_types: [r3.large, m3.medium]\nzones: [us-east-1a]\npredictor: none\n")

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed "
                               "(pip install -e '.[test]')")
pytestmark = [pytest.mark.server, pytest.mark.slow,
              pytest.mark.skipif(shutil.which(CHROMIUM) is None,
                                 reason=f"no {CHROMIUM} (Debian's chromium package: apt-get install chromium)")]


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("dash")
    (tmp / "tiny.yaml").write_text(SPEC)
    out = tmp / "res"
    result = CliRunner().invoke(cli, ["run", "--config", str(tmp / "tiny.yaml"), "--no-progress", "--output", str(out)])
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def test_the_page_shows_the_trials_the_dollars_and_the_theta_barrier(run_folder, browser):
    from spottune.dashboard._app import DashboardServer

    summary = json.loads((run_folder / "summary.json").read_text())
    trials = pd.read_csv(run_folder / "trials.csv")
    curves = pd.read_csv(run_folder / "curves.csv")
    server = DashboardServer(run_folder, port=0).start()
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(server.url)
        page.wait_for_selector("body[data-ready='1']", timeout=10_000)
        rows = page.locator("#trials-table tbody tr")
        assert rows.count() == len(trials) == 4
        shown = {rows.nth(i).get_attribute("data-trial"): rows.nth(i).get_attribute("data-state") for i in range(4)}
        assert shown == dict(zip(trials["trial_id"], trials["state"], strict=True))
        # the dollars charged, as a person reads them, equal summary.json's to the cent
        text = page.inner_text("#total-usd")
        assert text.startswith("$") and round(float(text[1:]), 2) == round(summary["total_cost_usd"], 2)
        # θ = 0.5 of 20 steps: every trial pauses at step 10; the 2 best there (min) go on, the others stop
        barrier = math.ceil(0.5 * 20)
        assert page.inner_text("#barrier") == f"step {barrier} (θ = 0.5)"
        at_barrier = curves[curves["step"] == barrier].set_index("trial_id")["value"].sort_values()
        kept, stopped = set(at_barrier.index[:2]), set(at_barrier.index[2:])
        assert {t for t, s in shown.items() if s == "finished"} == kept
        assert {t for t, s in shown.items() if s == "stopped_early"} == stopped
        for i in range(4):  # a stopped trial ran exactly to the barrier, a kept one to max_steps
            cells = rows.nth(i).locator("td")
            assert int(cells.nth(3).inner_text()) == (barrier if cells.nth(1).inner_text() == "stopped_early" else 20)
        assert page.locator("#timeline-chart .bars path").count() == summary["instances"]  # one bar per instance run
        # prices: a step line per market of the pool and a max-price line per market run on; the tables behind
        ledger = pd.read_csv(run_folder / "ledger.csv")
        pool = summary["settings"]["markets"]
        assert page.locator("#prices-chart .scatterlayer .trace").count() == len(pool) + ledger["market"].nunique()
        assert page.inner_text("#prices-source") == "replayed from us-east-1_2015.csv.gz"
        page.click("#h-prices ~ details summary")
        shown_max = page.locator("#max-prices-table tbody tr td:nth-child(6)").all_inner_texts()
        assert [float(x) for x in shown_max] == list(ledger.sort_values("end_s", kind="stable")["max_price_usd_per_hour"])
        assert {page.locator("#prices-table tbody tr").nth(i).get_attribute("data-market")
                for i in range(page.locator("#prices-table tbody tr").count())} == set(pool)
        # USD per useful step by market: the ledger's USD over its steps that count, as a person would divide
        page.click("#h-step-cost ~ details summary")
        useful = ledger.assign(m=ledger["market"].str.split("/").str[:2].str.join("/"),
                               u=ledger["steps"] - ledger["lost_steps"]).groupby("m")[["charged_usd", "u"]].sum()
        assert page.locator("#step-cost-chart .bars path").count() == len(useful)
        for m, r in useful.iterrows():
            cells = page.locator(f"#step-cost-table tr[data-market='{m}'] td")
            assert cells.nth(6).inner_text() == f"${r['charged_usd'] / r['u']:.6f}"
        page.click("#h-curves ~ details summary")
        assert page.locator("#barriers-table tbody tr").all_inner_texts() == ["θ barrier\t10\t2"]
        assert errors == []
        # a phone's width: one column, nothing wider than the screen (wide tables scroll inside their box)
        page.set_viewport_size({"width": 390, "height": 844})
        page.wait_for_function("document.querySelector('#curves-chart .main-svg').getBoundingClientRect().width <= 370",
                               timeout=5_000, polling=100)
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        boxes = page.evaluate("[...document.querySelectorAll('main > section')].map((e) => e.getBoundingClientRect())"
                              ".map((r) => [r.left, r.right])")
        assert len(boxes) == 6 and all(0 <= left and right <= 390 for left, right in boxes)
        page.set_viewport_size({"width": 1280, "height": 800})
        page.evaluate("document.querySelectorAll('details').forEach((d) => { d.open = false; })")  # charts only
        shot = run_folder.parent / "dashboard.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 20_000  # a drawn page, not a blank one
        if os.environ.get("SPOTTUNE_UPDATE_FIGURES") == "1" or not FIGURE.exists():  # else the checkout stays clean
            FIGURE.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(shot, FIGURE)
    finally:
        server.stop()


LOCAL_SPEC = ("workload: logreg\nsearch_space: {lr: {grid_search: [0.05, 0.2]}}\nmax_steps: 20\ntheta: 0.5\ntop_k: 1\n"
              "instance_types: [r3.large]\nzones: [us-east-1a]\npredictor: none\n"
              "provisioning: refund-hop\n")  # max prices near the price (not on-demand): a revocation comes early


@pytest.mark.process
def test_the_page_follows_a_local_run_as_it_writes_the_folder(tmp_path, browser):
    """The page is open before the run starts; it shows each revocation notice within about a second of the run
    writing it (it polls every second), and ends showing the finished run's cost, all without a reload."""
    import subprocess
    import sys
    import time

    from spottune.dashboard._app import DashboardServer
    from tests._wait import wait_until

    (tmp_path / "tiny.yaml").write_text(LOCAL_SPEC)
    out = tmp_path / "res"
    out.mkdir()
    server = DashboardServer(out, port=0).start()
    proc = None
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(server.url)
        page.wait_for_selector("body[data-ready='1']", timeout=10_000)
        assert page.inner_text("#status") == "waiting"
        page.evaluate("window.loadedOnce = true")  # gone if the page reloaded
        root = Path(__file__).resolve().parents[1]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
        proc = subprocess.Popen([sys.executable, "-m", "spottune", "run", "--config", str(tmp_path / "tiny.yaml"),
                                 "--backend", "local", "--time-scale", "1200", "--no-progress", "--output", str(out)],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

        def notice_written() -> float | None:
            assert proc.poll() is None or (out / "events.jsonl").exists(), proc.stderr.read()
            events = out / "events.jsonl"
            return time.monotonic() if events.exists() and "RevocationNotice" in events.read_text() else None

        written = wait_until(notice_written, 60, interval_s=0.02, what="the run writes a revocation notice")
        page.wait_for_function("Number(document.body.dataset.notices || 0) >= 1", timeout=5_000, polling=50)
        lag = time.monotonic() - written
        assert lag < 2.5, f"the notice reached the page {lag:.2f} s after the run wrote it"
        assert proc.wait(timeout=90) == 0, proc.stderr.read()
        page.wait_for_function("document.body.dataset.status === 'finished'", timeout=5_000, polling=100)
        summary = json.loads((out / "summary.json").read_text())
        assert round(float(page.inner_text("#total-usd")[1:]), 2) == round(summary["total_cost_usd"], 2)
        assert page.locator("#trials-table tbody tr").count() == 2
        assert page.evaluate("window.loadedOnce === true")
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        server.stop()
