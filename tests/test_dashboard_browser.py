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
        by_end = ledger.sort_values("end_s", kind="stable")
        assert [float(x) for x in shown_max] == list(by_end["max_price_usd_per_hour"])
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
        page.evaluate("document.querySelectorAll('details').forEach((d) => { d.open = false; })")  # charts only
        shot = run_folder.parent / "dashboard.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 20_000  # a drawn page, not a blank one
        if os.environ.get("SPOTTUNE_UPDATE_FIGURES") == "1" or not FIGURE.exists():  # else the checkout stays clean
            FIGURE.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(shot, FIGURE)
        # a phone's width, every table view open: one column, nothing wider than the screen (wide tables scroll
        # inside their box)
        page.evaluate("document.querySelectorAll('details').forEach((d) => { d.open = true; })")
        page.set_viewport_size({"width": 390, "height": 844})
        # Plotly redraws each chart on its own after a resize: wait for the page to settle, then read what it is
        try:
            page.wait_for_function("document.documentElement.scrollWidth <= 390 && [...document.querySelectorAll("
                                   "'.js-plotly-plot .main-svg')].every((e) => e.getBoundingClientRect().width <= 370)",
                                   timeout=15_000, polling=100)
        except sync_api.TimeoutError:
            pass  # the assertions below say by how much the page is too wide
        too_wide = page.evaluate("[...document.querySelectorAll('body *')].filter((e) => e.getBoundingClientRect().right"
                                 " > 390 && !e.closest('.scroll, .js-plotly-plot')).map((e) => e.tagName + '#' + "
                                 "e.id + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))")
        assert page.evaluate("document.documentElement.scrollWidth") <= 390, too_wide[:10]
        boxes = page.evaluate("[...document.querySelectorAll('main > section')].map((e) => e.getBoundingClientRect())"
                              ".map((r) => [r.left, r.right])")
        assert len(boxes) == 6 and all(0 <= left and right <= 390 for left, right in boxes)
    finally:
        server.stop()


# max prices near the price (not on-demand): the price crosses them 331 s into the run. 30 steps to the θ barrier take
# 500-700 s of the run at 1,200x on a quiet machine (logreg steps are a few ms of wall time each), so the crossing
# revokes both trials before they pause there; with 10 steps a fast machine reached θ first and saw no notice.
LOCAL_SPEC = ("workload: logreg\nsearch_space: {lr: {grid_search: [0.05, 0.2]}}\nmax_steps: 60\ntheta: 0.5\ntop_k: 1\n"
              "instance_types: [r3.large]\nzones: [us-east-1a]\npredictor: none\n"
              "provisioning: refund-hop\n")


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


ADMIN = "admin-secret"
#: A study with a rung before θ and a deadline: 4 trials, the rung at step 2 keeps 3, θ at step 4 keeps 1.
RUNG_STUDY = {"workload": "linreg", "search_space": {"lr": {"grid_search": [0.01, 0.02, 0.03, 0.05]}}, "max_steps": 8,
              "theta": 0.5, "top_k": 1, "rungs": "0.25:3", "deadline": "2h", "predictor": "none"}


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    """``spottune serve`` with an org budget, teams vision (entitlement 3) and nlp (1), and vision's finished study."""
    from spottune.service import Service, ServiceClient

    svc = Service(admin_token=ADMIN, data_dir=tmp_path_factory.mktemp("service"), port=0).start()
    try:
        with ServiceClient(svc.url, ADMIN) as admin:
            admin.set_org_budget(4.0)
            tokens = {n: admin.create_team(n, e)["token"] for n, e in (("vision", 3.0), ("nlp", 1.0))}
            with ServiceClient(svc.url, tokens["vision"]) as vision:
                vision.submit(RUNG_STUDY, team="vision", name="rungs")
                study = vision.wait("rungs", timeout_s=120)
            org = admin.org()
        assert study["state"] == "finished", study["error"]
        yield svc, tokens, study, org
    finally:
        svc.stop()


def test_the_service_shows_a_team_its_study_and_refuses_another_team(service, browser):
    svc, tokens, study, _ = service
    trials = pd.read_csv(svc.data_dir / "studies" / str(study["id"]) / "trials.csv")
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{svc.url}/studies/{study['id']}/dashboard#token={tokens['vision']}")
    page.wait_for_selector("body[data-ready='1']", timeout=10_000)
    assert "token" not in page.url  # the token left the address bar (and never reached the server: a fragment)
    assert page.inner_text("#folder") == f"study {study['id']}: vision/rungs (finished)"
    rows = page.locator("#trials-table tbody tr")
    assert {rows.nth(i).get_attribute("data-trial"): rows.nth(i).get_attribute("data-state")
            for i in range(rows.count())} == dict(zip(trials["trial_id"], trials["state"], strict=True))
    assert round(float(page.inner_text("#total-usd")[1:]), 2) == round(study["summary"]["total_cost_usd"], 2)
    # the rung and the θ barrier on the curves, the deadline on the dollars, each also in a table
    assert (page.inner_text("#rungs"), page.inner_text("#deadline")) == ("step 2 keep 3 (barrier)", "2.00 h")
    assert page.locator("#curves-chart .annotation-text", has_text="rung 1").count() == 1
    assert page.locator("#dollars-chart .annotation-text", has_text="deadline").count() == 1
    page.click("#h-curves ~ details summary")
    assert page.locator("#barriers-table tbody tr").all_inner_texts() == ["rung 1 (barrier)\t2\t3", "θ barrier\t4\t1"]
    page.click("#h-dollars ~ details summary")
    assert page.locator("#limits-table tbody tr").all_inner_texts() == ["deadline (hours since start)\t2.000"]
    assert sorted(trials["steps"]) == [2, 4, 4, 8]  # one stopped at the rung, two at θ, one finished
    assert errors == []

    other = browser.new_page(viewport={"width": 1280, "height": 800})
    other.goto(f"{svc.url}/studies/{study['id']}/dashboard/#token={tokens['nlp']}")
    other.wait_for_selector("body[data-refused='404']", timeout=10_000)
    assert other.inner_text("#refusal") == f"refused: no study '{study['id']}' visible to team nlp (HTTP 404)"
    assert other.locator("#trials-table tbody tr").count() == 0


def test_the_org_view_shows_the_teams_shares_and_the_fairness_loss(service, browser):
    svc, _, study, org = service
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(f"{svc.url}/org/#token={ADMIN}")
    page.wait_for_selector("body[data-ready='1']", timeout=10_000)
    rows = page.locator("#teams-table tbody tr")
    assert [rows.nth(i).get_attribute("data-team") for i in range(rows.count())] == ["nlp", "vision"]
    # one fair-share round (vision's study started with a 4 USD/hour budget): what GET /v1/org says, as shown
    (last,) = org["rounds"]
    vision = page.locator("#teams-table tr[data-team='vision'] td").all_inner_texts()
    assert vision[:2] == ["vision", "3.00"]
    assert vision[4] == f"{last['allocations_usd_per_hour']['vision']:.4f}"
    assert page.inner_text("#latest-loss") == f"{last['loss']:.4f} USD/h"
    assert page.locator("#loss-table tbody tr").count() == 1
    in_round = set(last["allocations_usd_per_hour"]) | set(last["demands_usd_per_hour"])
    # entitled, demand and allocation of each team in the round, and the budget
    assert page.locator("#shares-chart .scatterlayer .trace").count() == 3 * len(in_round) + 1
    page.click("#h-shares ~ details summary")
    assert page.locator("#shares-table tbody tr").count() == len(in_round)
    # the study's link opens its dashboard in this tab, with the token the tab holds
    page.click(f"#studies-table tr[data-study='{study['id']}'] a")
    page.wait_for_selector("body[data-ready='1'][data-status='finished']", timeout=10_000)
    assert page.locator("#trials-table tbody tr").count() == 4
    # (a team's token on the org view gets 403: tests/test_service_api.py)
