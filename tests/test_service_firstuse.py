"""First use in three commands from one folder: ``spottune serve --team vision``, ``spottune submit ... --team
vision``, ``spottune status``, with no token given (decision SV9)."""

from __future__ import annotations

import stat
import threading
from pathlib import Path

import pytest

from spottune.service import Service, ServiceClient
from spottune.service._server import team_token_file
from tests._wait import wait_until
from tests.test_service_api import _cli
from tests.test_service_crash import _free_port

pytestmark = pytest.mark.server

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "digits_mlp.yaml"


def test_serve_with_a_team_then_submit_and_status_with_no_token(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SPOTTUNE_TOKEN", raising=False)
    monkeypatch.delenv("SPOTTUNE_ADMIN_TOKEN", raising=False)
    started: list[Service] = []
    real_run = Service.run

    def run(self):  # the real serve loop, on a thread; the instance is kept so the test can stop it
        started.append(self)
        real_run(self)

    monkeypatch.setattr(Service, "run", run)
    port = _free_port()
    from spottune.cli._serve import serve

    # budget 0 holds the queue: the submitted study stays queued, so the test runs no training
    args = ["--team", "vision", "--team", "nlp=3", "--port", str(port), "--org-budget-usd-per-hour", "0"]
    thread = threading.Thread(target=serve.main, args=(args,), kwargs={"standalone_mode": False}, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: started and started[0].server.started, 30, what="the service serves")
        monkeypatch.setenv("SPOTTUNE_URL", url)
        admin_file = tmp_path / "spottune-service" / "admin-token"
        assert stat.S_IMODE(admin_file.stat().st_mode) == 0o600
        code, out, err = _cli(monkeypatch, capsys, "submit", str(EXAMPLE), "--team", "vision")
        assert code == 0, err
        study_id, name, state = out.strip().split("\t")
        assert (name, state) == ("digits_mlp", "queued")
        code, out, err = _cli(monkeypatch, capsys, "status")
        assert (code, out) == (0, f"id\tteam\tname\tstate\tusd\n{study_id}\tvision\tdigits_mlp\tqueued\t-\n"), err
        code, out, _ = _cli(monkeypatch, capsys, "team", "list")
        assert out == "nlp\t3\t-\t-\nvision\t1\t-\t-\n"
        token_file = team_token_file(tmp_path / "spottune-service", "nlp")
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        with ServiceClient(url, token_file.read_text().strip()) as nlp:  # the team's own token works as one
            assert nlp.studies() == []
    finally:
        if started:
            started[0].server.should_exit = True
        thread.join(15)
    assert not thread.is_alive()


def test_a_restart_keeps_existing_teams_and_their_tokens(tmp_path):
    svc = Service(admin_token="a", data_dir=tmp_path, port=0, teams={"vision": 2.0})
    first = team_token_file(tmp_path, "vision").read_text()
    svc.store.engine.dispose()
    again = Service(admin_token="a", data_dir=tmp_path, port=0, teams={"vision": 5.0, "nlp": 1.0})
    assert (svc.created_teams, again.created_teams) == (["vision"], ["nlp"])
    assert team_token_file(tmp_path, "vision").read_text() == first  # not replaced: the old token still holds
    with again.store.session() as s:
        assert again.store.team_by_token(s, first.strip()).entitlement == 2.0
    again.store.engine.dispose()


def test_no_token_anywhere_and_a_bad_team_option_are_one_line_errors(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SPOTTUNE_TOKEN", raising=False)
    code, out, err = _cli(monkeypatch, capsys, "status")
    assert (code, err) == (2, "error: no token: give --token, set SPOTTUNE_TOKEN, or run from the folder where "
                              "`spottune serve` wrote spottune-service/admin-token\n")
    code, out, err = _cli(monkeypatch, capsys, "serve", "--team", "vision=lots")
    assert (code, err) == (2, "error: --team is 'vision=lots', but must be NAME or NAME=ENTITLEMENT (a number > 0)\n")
    code, out, err = _cli(monkeypatch, capsys, "serve", "--team", "vision=-1")
    assert (code, err) == (2, "error: --team vision=-1.0: the entitlement must be a finite number > 0\n")
