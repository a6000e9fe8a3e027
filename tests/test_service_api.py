"""``spottune serve`` over a real uvicorn server on 127.0.0.1: teams and tokens, studies run on the simulator,
bad input refused with a one-line 4xx and nothing written, the CLI's client commands (decisions SV7-SV9)."""

from __future__ import annotations

import json
import sys

import httpx
import pytest

from spottune.service import Service, ServiceClient, ServiceError
from tests._wait import wait_until

pytestmark = pytest.mark.server

ADMIN = "admin-secret"
#: A study that runs in about a second on the simulator: 2 trials of linear regression, 8 steps each.
QUICK = {"workload": "linreg", "search_space": {"lr": {"grid_search": [0.01, 0.05]}}, "max_steps": 8, "theta": 1,
         "top_k": 1, "predictor": "none"}
#: One that runs long enough to be cancelled while it runs (it stops at its next event).
LONG = {**QUICK, "search_space": {"lr": {"grid_search": [0.01, 0.02, 0.03, 0.05]}}, "max_steps": 20000}


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    svc = Service(admin_token=ADMIN, data_dir=tmp_path_factory.mktemp("service"), port=0).start()
    yield svc
    svc.stop()


@pytest.fixture(scope="module")
def admin(service):
    with ServiceClient(service.url, ADMIN) as c:
        yield c


@pytest.fixture(scope="module")
def team_tokens(admin):
    return {name: admin.create_team(name, entitlement)["token"] for name, entitlement in (("vision", 3.0),
                                                                                           ("nlp", 1.0))}


@pytest.fixture(scope="module")
def teams(service, team_tokens):
    clients = {name: ServiceClient(service.url, token) for name, token in team_tokens.items()}
    yield clients
    for c in clients.values():
        c.close()


def _refused(call, status, message):
    with pytest.raises(ServiceError) as info:
        call()
    assert info.value.status == status
    assert str(info.value) == f"{message} (HTTP {status})"
    assert "\n" not in str(info.value)


def test_a_team_submits_a_study_that_runs_on_the_simulator_through_tune(service, teams):
    vision = teams["vision"]
    study = vision.submit(QUICK, team="vision", name="quick")
    assert (study["team"], study["name"], study["spec"]) == ("vision", "quick", QUICK)
    done = vision.wait("quick", timeout_s=120)
    assert done["state"] == "finished" and done["error"] is None
    written = json.loads((service.data_dir / "studies" / str(study["id"]) / "summary.json").read_text())
    assert done["summary"]["total_cost_usd"] == written["total_cost_usd"] > 0
    assert done["summary"]["steps_executed"] == 16
    assert done["summary"]["best"]["config"] in ({"lr": 0.01}, {"lr": 0.05})
    assert vision.study(study["id"]) == done  # by id or by name


def test_tokens_decide_who_sees_and_changes_what(service, admin, teams):
    vision, nlp = teams["vision"], teams["nlp"]
    mine = vision.submit(QUICK, team="vision", name="private")
    with ServiceClient(service.url, token=None) as anonymous:
        _refused(anonymous.studies, 401, "missing bearer token: send the header 'Authorization: Bearer <token>'")
    with ServiceClient(service.url, "not-a-token") as stranger:
        _refused(stranger.studies, 401, "unknown token: it is neither the admin's nor a team's")
    _refused(lambda: nlp.study("private"), 404, "no study 'private' visible to team nlp")
    _refused(lambda: nlp.cancel(mine["id"]), 404, f"no study '{mine['id']}' visible to team nlp")
    _refused(lambda: nlp.submit(QUICK, team="vision", name="sneaky"), 403,
             "the token of team nlp cannot submit for team vision")
    _refused(lambda: nlp.create_team("mallory"), 403, "team nlp may not do this: it needs the admin token")
    _refused(lambda: nlp.set_org_budget(100.0), 403, "team nlp may not do this: it needs the admin token")
    assert "private" not in {s["name"] for s in nlp.studies()}
    assert "private" in {s["name"] for s in admin.studies()}  # the admin sees every team's
    assert {t["name"] for t in admin.teams()} >= {"vision", "nlp"}
    assert vision.cancel("private")["cancel_requested"] is True  # its owner may (and the suite need not run it)


@pytest.mark.parametrize(("body", "status", "message"), [
    ({"team": "nobody", "name": "x", "spec": QUICK}, 404, "unknown team 'nobody'"),
    ({"team": "vision", "name": "x", "spec": {**QUICK, "theta": 1.5}}, 422,
     "spec: theta is 1.5, but must be 0 < theta <= 1"),
    ({"team": "vision", "name": "x", "spec": {**QUICK, "colour": "red"}}, 422, None),
    ({"team": "vision", "name": "x", "spec": {**QUICK, "backend": "local"}}, 422,
     "spec: backend is 'local', but this server runs studies on 'sim'"),
    ({"team": "vision", "name": "x", "spec": {**QUICK, "workload": "os:System"}}, 422,
     "spec: workload is 'os:System', but a study on the service must name a built-in workload: the server imports no "
     "code of its tenants"),
    ({"team": "vision", "name": "x", "spec": {**QUICK, "storage_path": "/etc"}}, 422,
     "spec: storage_path is '/etc', but a study on the service may not name server paths"),
    ({"team": "vision", "name": "x", "spec": {**QUICK, "prices": "/etc/passwd"}}, 422,
     "spec: prices is '/etc/passwd', but a study on the service must name a bundled price dataset, not a path"),
    ({"team": "vision", "name": "x", "spec": QUICK, "trial_budget": 0}, 422,
     "trial_budget: Input should be greater than or equal to 1"),
    ({"team": "vision", "name": "no spaces", "spec": QUICK}, 422, None),
    ({"team": "vision", "name": "x", "spec": QUICK, "extra": 1}, 422, "extra: Extra inputs are not permitted"),
    ({"team": "vision", "name": "x"}, 422, "spec: Field required"),
])
def test_bad_submissions_get_a_one_line_4xx_and_write_nothing(service, admin, body, status, message):
    before = admin.studies()
    r = httpx.post(f"{service.url}/v1/studies", json=body, headers={"Authorization": f"Bearer {ADMIN}"})
    assert r.status_code == status
    detail = r.json()["detail"]
    assert isinstance(detail, str) and "\n" not in detail
    if message is not None:
        assert detail == message
    assert admin.studies() == before or len(admin.studies()) == len(before)


def test_malformed_and_oversized_bodies_are_refused_before_anything_is_written(service, admin):
    before = len(admin.studies())
    auth = {"Authorization": f"Bearer {ADMIN}", "Content-Type": "application/json"}
    r = httpx.post(f"{service.url}/v1/studies", content=b"{not json", headers=auth)
    assert r.status_code == 422 and r.json()["detail"].startswith("1: JSON decode error")
    big = json.dumps({"team": "vision", "name": "big", "spec": {**QUICK, "pad": "x" * 1_100_000}}).encode()
    r = httpx.post(f"{service.url}/v1/studies", content=big, headers=auth)
    assert r.status_code == 413
    assert r.json() == {"detail": f"request body is {len(big)} bytes, but must be at most 1000000"}

    def chunks():
        for _ in range(30):
            yield b"x" * 50_000

    r = httpx.post(f"{service.url}/v1/studies", content=chunks(), headers=auth)  # no Content-Length: counted
    assert r.status_code == 413 and r.json() == {"detail": "request body is more than 1000000 bytes, but must be "
                                                           "at most 1000000"}
    assert len(admin.studies()) == before


def test_names_are_unique_and_a_refused_duplicate_changes_nothing(admin, teams):
    _refused(lambda: admin.create_team("vision"), 409, "team 'vision' exists already")
    teams["nlp"].submit(QUICK, team="nlp", name="twice")
    _refused(lambda: teams["nlp"].submit(QUICK, team="nlp", name="twice"), 409,
             "team nlp has a study named 'twice' already")
    assert [s["name"] for s in teams["nlp"].studies()].count("twice") == 1
    teams["nlp"].cancel("twice")


def test_cancel_a_running_and_a_queued_study_and_the_org_budget_split(service, admin, teams):
    vision, nlp = teams["vision"], teams["nlp"]
    admin.set_org_budget(2.0)
    running = vision.submit(LONG, team="vision", name="long")
    wait_until(lambda: vision.study("long")["state"] == "running", 60, what="the long study runs")
    # the first probe of a team's unit demand is half the budget's upper bound (binary search): 1.0 of 2.0
    assert vision.study("long")["max_usd_per_hour"] == 1.0
    admin.set_org_budget(0.0)  # a budget of 0 holds the queue: the next study stays queued
    queued = nlp.submit(LONG, team="nlp", name="waiting")
    org = nlp.org()
    assert org["budget_usd_per_hour"] == 0.0
    assert org["shares_usd_per_hour"] == {"nlp": 0.0, "vision": 0.0}
    last = org["rounds"][-1]
    assert (last["study_id"], last["allocations_usd_per_hour"]["vision"], last["unmet"]) == (running["id"], 1.0, 0.0)
    assert nlp.cancel("waiting")["state"] == "cancelled"
    assert vision.cancel("long")["cancel_requested"] is True
    done = vision.wait("long", timeout_s=60)
    assert (done["state"], done["error"]) == ("cancelled", f"study {running['id']} was cancelled")
    assert nlp.study(queued["id"])["started_utc"] is None  # it never ran
    _refused(lambda: vision.cancel("long"), 409, "study long is cancelled already")
    assert admin.org()["shares_usd_per_hour"] == {} or "nlp" not in admin.org()["shares_usd_per_hour"]
    admin.set_org_budget(None)


def _cli(monkeypatch, capsys, *args):
    from spottune.cli import main

    monkeypatch.setattr(sys, "argv", ["spottune", *args])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_cli_adds_a_team_submits_shows_and_cancels(service, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SPOTTUNE_URL", service.url)
    code, token, err = _cli(monkeypatch, capsys, "team", "add", "cli-team", "--token", ADMIN)
    assert code == 0 and len(token.strip()) > 20, err
    monkeypatch.setenv("SPOTTUNE_TOKEN", token.strip())
    spec = tmp_path / "digits.yaml"
    spec.write_text("workload: linreg\nsearch_space:\n  lr:\n    grid_search: [0.01, 0.05]\nmax_steps: 8\n"
                    "theta: 1\ntop_k: 1\npredictor: none\n")
    code, out, err = _cli(monkeypatch, capsys, "submit", str(spec), "--team", "cli-team")
    assert code == 0, err
    study_id, name, state = out.strip().split("\t")
    assert (name, state) == ("digits", "queued")
    code, out, _ = _cli(monkeypatch, capsys, "status")
    assert out.splitlines()[0] == "id\tteam\tname\tstate\tusd"
    assert out.splitlines()[1].split("\t")[:3] == [study_id, "cli-team", "digits"]  # a team sees only its own
    assert len(out.splitlines()) == 2
    code, out, err = _cli(monkeypatch, capsys, "cancel", "digits")
    assert code == 0, err
    assert out in (f"{study_id}\tdigits\tcancelled\n", f"{study_id}\tdigits\trunning (stopping)\n")
    with ServiceClient(service.url) as c:
        assert c.wait(study_id, timeout_s=60)["state"] == "cancelled"
    code, out, _ = _cli(monkeypatch, capsys, "status", "digits")
    assert f"id: {study_id}\nteam: cli-team\nname: digits\nstate: cancelled\n" in out and "usd: -" in out
    code, out, err = _cli(monkeypatch, capsys, "cancel", "digits")
    assert (code, out, err) == (2, "", "error: study digits is cancelled already (HTTP 409)\n")
    code, out, err = _cli(monkeypatch, capsys, "submit", str(spec), "--team", "vision")
    assert (code, err) == (2, "error: the token of team cli-team cannot submit for team vision (HTTP 403)\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("theta: 2\n")
    code, out, err = _cli(monkeypatch, capsys, "submit", str(bad), "--team", "cli-team")
    assert (code, err) == (2, "error: spec: theta is 2.0, but must be 0 < theta <= 1 (HTTP 422)\n")


def test_the_study_dashboard_and_the_org_view_follow_the_tokens(service, admin, teams, team_tokens):
    """The pages hold no data; their api/snapshot answers as the API does: a team sees its own studies only (404
    for another team's), the admin every study and the org view (decisions DS5, DS6)."""
    from spottune.service._store import OrgRound

    vision, nlp = teams["vision"], teams["nlp"]
    study = vision.submit(QUICK, team="vision", name="watched")
    done = vision.wait("watched", timeout_s=120)
    base = f"{service.url}/studies/{study['id']}/dashboard"

    def get(url, token=None, **kw):
        return httpx.get(url, headers={"Authorization": f"Bearer {token}"} if token else {}, **kw)

    page = get(base + "/")
    assert page.status_code == 200 and 'poll("api/snapshot"' in page.text and "watched" not in page.text
    moved = get(base)
    assert moved.status_code == 307 and moved.headers["location"] == f"/studies/{study['id']}/dashboard/"
    assert get(base + "/plotly.min.js").status_code == 200
    assert get(base + "/api/snapshot").json() == {
        "detail": "missing bearer token: send the header 'Authorization: Bearer <token>'"}
    for token in (team_tokens["vision"], ADMIN):
        snap = get(base + "/api/snapshot", token).json()
        assert snap["folder"] == f"study {study['id']}: vision/watched (finished)"
        assert (snap["status"], len(snap["trials"]), snap["total_usd"]) == (
            "finished", 2, pytest.approx(done["summary"]["total_cost_usd"]))
    by_name = get(f"{service.url}/studies/watched/dashboard/api/snapshot", team_tokens["vision"])
    assert by_name.status_code == 200 and by_name.json()["folder"].startswith(f"study {study['id']}: ")
    refused = get(base + "/api/snapshot", team_tokens["nlp"])
    assert (refused.status_code, refused.json()) == (404, {"detail": f"no study '{study['id']}' visible to team nlp"})

    # one fair-share round with known values (a real one needs a budget and a study start; this fixes its numbers)
    with service.store.session.begin() as s:
        s.add(OrgRound(study_id=study["id"], budget_usd_per_hour=8.0,
                       allocations_json=json.dumps({"vision": 5.0, "nlp": 2.0}),
                       demands_json=json.dumps({"vision": 5.0, "nlp": 3.0}),
                       unallocated=1.0, over_allocated=0.0, unmet=1.0, loss=1.0))
    assert get(f"{service.url}/org/api/snapshot", team_tokens["nlp"]).json() == {
        "detail": "team nlp may not do this: it needs the admin token"}
    assert get(f"{service.url}/org/").status_code == 200
    org = get(f"{service.url}/org/api/snapshot", ADMIN).json()
    assert {t["name"]: t["entitlement"] for t in org["teams"]}.items() >= {"vision": 3.0, "nlp": 1.0}.items()
    last = org["rounds"][-1]
    # the entitled split of 8 USD/hour between entitlements 3 and 1, each team asking for all of it
    assert last["entitled_usd_per_hour"] == {"nlp": 2.0, "vision": 6.0}
    assert (last["allocations_usd_per_hour"], last["loss"]) == ({"vision": 5.0, "nlp": 2.0}, 1.0)
    assert {k: v for k, v in last.items() if k != "entitled_usd_per_hour"} == admin.org()["rounds"][-1]
    assert study["id"] in {s["id"] for s in org["studies"] if s["team"] == "vision" and s["state"] == "finished"}


def test_the_admin_changes_a_teams_bounds_and_a_refused_change_changes_nothing(service, admin, teams, monkeypatch,
                                                                              capsys):
    view = admin.update_team("nlp", min_usd_per_hour=0.5, max_usd_per_hour=2.0)
    assert view == {"name": "nlp", "entitlement": 1.0, "min_usd_per_hour": 0.5, "max_usd_per_hour": 2.0}
    _refused(lambda: admin.update_team("nlp", min_usd_per_hour=3.0), 422,
             "min_usd_per_hour would be 3, but must be at most max_usd_per_hour 2")
    _refused(lambda: admin.update_team("nlp", entitlement=None), 422,
             "body: Value error, entitlement is None, but must be a number > 0")
    _refused(lambda: admin.update_team("nlp", token="x"), 422, "token: Extra inputs are not permitted")
    _refused(lambda: admin.update_team("nobody", entitlement=2.0), 404, "no team named 'nobody'")
    _refused(lambda: teams["nlp"].update_team("nlp", entitlement=9.0), 403,
             "team nlp may not do this: it needs the admin token")
    assert next(t for t in admin.teams() if t["name"] == "nlp") == view  # nothing changed by the refusals
    # left out keeps, None removes a bound; the CLI does the same
    assert admin.update_team("nlp", max_usd_per_hour=None) == {**view, "max_usd_per_hour": None}
    monkeypatch.setenv("SPOTTUNE_URL", service.url)
    code, out, err = _cli(monkeypatch, capsys, "team", "set", "nlp", "--min-usd-per-hour", "none", "--entitlement",
                          "1", "--token", ADMIN)
    assert (code, out, err) == (0, "nlp\t1\t-\t-\n", "")
    code, out, err = _cli(monkeypatch, capsys, "team", "set", "nlp", "--token", ADMIN)
    assert code == 2 and err.count("\n") == 1 and "nothing to change" in err
    code, out, err = _cli(monkeypatch, capsys, "team", "set", "nlp", "--max-usd-per-hour", "lots", "--token", ADMIN)
    assert (code, out, err) == (2, "", "error: Invalid value for --max-usd-per-hour: 'lots' is not a number of "
                                       "USD/hour nor 'none'\n")
