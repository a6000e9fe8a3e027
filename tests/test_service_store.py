"""The service's store on SQLite and on a real PostgreSQL server (decision SV7): the Alembic migration builds the
schema, a second start leaves it alone, and the API's rules (unique names, team scoping) hold on both.

The PostgreSQL server is started here from the ``initdb`` and ``pg_ctl`` binaries (PATH, or Debian's
``/usr/lib/postgresql/<version>/bin``); without them, or without the ``psycopg`` driver, the PostgreSQL cases skip
and say why.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text

from spottune.service import Service, ServiceClient, ServiceError
from spottune.service._store import Store

pytestmark = [pytest.mark.server, pytest.mark.process, pytest.mark.slow]

ADMIN = "store-admin"
SPEC = {"workload": "linreg", "search_space": {"lr": {"grid_search": [0.01, 0.05]}}, "max_steps": 8, "theta": 1,
        "top_k": 1, "predictor": "none"}


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def postgres_url():
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if initdb is None or pg_ctl is None:
        pytest.skip("no PostgreSQL server binaries (initdb, pg_ctl) on PATH or in /usr/lib/postgresql/*/bin")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("no PostgreSQL driver: pip install 'psycopg[binary]'")
    root = Path(tempfile.mkdtemp(prefix="spottune-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root: run it as nobody, in a folder nobody owns
        runuser = shutil.which("runuser")
        if runuser is None:
            pytest.skip("running as root and no runuser to start PostgreSQL as another user")
        root.chmod(0o755)
        shutil.chown(root, "nobody")
        as_user = [runuser, "-u", "nobody", "--"]
    data, port = root / "data", _free_port()
    subprocess.run([*as_user, initdb, "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"], check=True,
                   capture_output=True, cwd=root)
    subprocess.run([*as_user, pg_ctl, "-D", str(data), "-w", "-l", str(root / "log"), "-o",
                    f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off", "start"],
                   check=True, capture_output=True, cwd=root)
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*as_user, pg_ctl, "-D", str(data), "-m", "immediate", "stop"], capture_output=True, cwd=root)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'service.db'}"
    url = request.getfixturevalue("postgres_url")
    engine = create_engine(url)
    with engine.begin() as conn:  # a fresh schema for each test
        conn.execute(text("DROP TABLE IF EXISTS org_rounds, studies, teams, org, alembic_version"))
    engine.dispose()
    return url


def test_the_migration_builds_the_schema_once(db_url):
    Store(db_url).engine.dispose()
    store = Store(db_url)  # a second start upgrades nothing
    names = set(inspect(store.engine).get_table_names())
    assert names >= {"alembic_version", "org", "teams", "studies", "org_rounds"}
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all() == ["0003"]
        assert conn.execute(text("SELECT id FROM org")).scalars().all() == [1]
    store.engine.dispose()


def test_the_api_rules_hold_on_each_store(db_url, tmp_path):
    svc = Service(admin_token=ADMIN, db_url=db_url, data_dir=tmp_path / "data", port=0).start()
    try:
        with ServiceClient(svc.url, ADMIN) as admin:
            token = admin.create_team("vision", 2.0)["token"]
            admin.create_team("nlp")
            with pytest.raises(ServiceError, match=r"team 'vision' exists already \(HTTP 409\)"):
                admin.create_team("vision")
            with ServiceClient(svc.url, token) as vision:
                study = vision.submit(SPEC, team="vision", name="s")
                with pytest.raises(ServiceError, match=r"team vision has a study named 's' already \(HTTP 409\)"):
                    vision.submit(SPEC, team="vision", name="s")
                assert vision.wait("s", timeout_s=120)["state"] == "finished"
            other = admin.submit(SPEC, team="nlp", name="s")  # the same name in another team is fine
            assert other["id"] != study["id"]
            admin.cancel(other["id"])
            assert [(s["team"], s["name"]) for s in admin.studies()] == [("vision", "s"), ("nlp", "s")]
            with pytest.raises(ServiceError, match=r"study name 's' is used by several teams: give its id"):
                admin.study("s")
            capped = admin.create_team("capped", 1.0, min_usd_per_hour=0.5, max_usd_per_hour=2.0)
            assert {k: capped[k] for k in ("min_usd_per_hour", "max_usd_per_hour")} == {
                "min_usd_per_hour": 0.5, "max_usd_per_hour": 2.0}
            assert [(t["name"], t["min_usd_per_hour"], t["max_usd_per_hour"]) for t in admin.teams()] == [
                ("capped", 0.5, 2.0), ("nlp", None, None), ("vision", None, None)]
            with pytest.raises(ServiceError, match=r"^body: Value error, min_usd_per_hour is 3, but must be at most "
                                                   r"max_usd_per_hour 2 \(HTTP 422\)$"):
                admin.create_team("upside-down", min_usd_per_hour=3.0, max_usd_per_hour=2.0)
        learned = {"vision": {"low": 0.25, "high": 0.5, "theta_max": 4.0, "probes": 3}}
        svc.store.save_learned_demands(learned)
        assert svc.store.learned_demands() == learned
    finally:
        svc.stop()


def test_a_database_of_revision_0002_is_upgraded_with_its_teams_kept(tmp_path):
    from alembic import command
    from alembic.config import Config

    import spottune.service._store as store_module

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = create_engine(url)
    cfg = Config()
    cfg.set_main_option("script_location", str(Path(store_module.__file__).parent / "migrations"))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0002")
        conn.execute(text("INSERT INTO teams (name, entitlement, token_sha256, created_utc) "
                          "VALUES ('vision', 2.0, 'x', '2026-11-29 00:00:00')"))
    engine.dispose()
    store = Store(url)
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all() == ["0003"]
        assert conn.execute(text("SELECT name, entitlement, min_usd_per_hour, demand_high_usd_per_hour "
                                 "FROM teams")).all() == [("vision", 2.0, None, None)]
    assert store.learned_demands() == {}
    store.engine.dispose()
