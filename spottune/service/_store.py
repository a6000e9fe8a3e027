"""The service's store: teams, studies and the org budget in one database (SQLAlchemy 2; decision SV7).

SQLite file by default, PostgreSQL by URL. The schema is created and upgraded only by the Alembic migrations shipped
in :mod:`spottune.service.migrations` (:func:`upgrade`); the tables below are the models those migrations build.
Team tokens are stored as SHA-256 digests, never in clear.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Boolean, DateTime, Float, ForeignKey, Integer, String, Text, UniqueConstraint, create_engine, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker

from spottune.errors import ConfigError

__all__ = ["SQLITE_BUSY_TIMEOUT_S", "STUDY_STATES", "TERMINAL_STATES", "Base", "Org", "OrgRound", "Store", "Study", "Team", "hash_token", "new_token",
           "round_view", "study_view", "upgrade"]

#: A study's states: queued (waiting for the runner), running, then one of the terminal states.
STUDY_STATES = ("queued", "running", "finished", "failed", "cancelled")
#: Wall seconds a SQLite writer waits for the database lock before it fails (SV7).
SQLITE_BUSY_TIMEOUT_S = 30.0
#: States a study never leaves.
TERMINAL_STATES = ("finished", "failed", "cancelled")


def _now() -> datetime:
    return datetime.now(UTC)


def new_token() -> str:
    """A fresh random token (32 bytes, URL-safe text)."""
    return secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """SHA-256 hex digest of a token (what the store keeps)."""
    return hashlib.sha256(token.encode()).hexdigest()


class Base(DeclarativeBase):
    """Declarative base of the service's tables."""


class Org(Base):
    """The organisation: one row (id 1) with the org budget, USD/hour (None: no budget set)."""

    __tablename__ = "org"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    budget_usd_per_hour: Mapped[float | None] = mapped_column(Float, nullable=True)


class Team(Base):
    """A team: a name, its entitlement (share of the org budget, > 0), the digest of its token, an optional
    guaranteed minimum and cap on its share (USD/hour, SV14) and its learned unit demand (the interval
    ``[demand_low, demand_high]`` USD/hour per running study, learned with ``theta_max``; SV14)."""

    __tablename__ = "teams"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    entitlement: Mapped[float] = mapped_column(Float, default=1.0)
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    created_utc: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    min_usd_per_hour: Mapped[float | None] = mapped_column(Float, nullable=True)
    max_usd_per_hour: Mapped[float | None] = mapped_column(Float, nullable=True)
    demand_low_usd_per_hour: Mapped[float | None] = mapped_column(Float, nullable=True)
    demand_high_usd_per_hour: Mapped[float | None] = mapped_column(Float, nullable=True)
    demand_theta_max_usd_per_hour: Mapped[float | None] = mapped_column(Float, nullable=True)
    demand_probes: Mapped[int | None] = mapped_column(Integer, nullable=True)


class Study(Base):
    """A team's study: an experiment spec (JSON of :class:`spottune.experiment.ExperimentSpec` keys), an optional
    trial budget, its state and, once ended, its summary (JSON) or its error (one line)."""

    __tablename__ = "studies"
    __table_args__ = (UniqueConstraint("team_id", "name", name="uq_studies_team_name"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id"))
    name: Mapped[str] = mapped_column(String(128))
    spec_json: Mapped[str] = mapped_column(Text)
    trial_budget: Mapped[int | None] = mapped_column(Integer, nullable=True)
    state: Mapped[str] = mapped_column(String(16), default="queued")
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    output: Mapped[str | None] = mapped_column(Text, nullable=True)
    summary_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_utc: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    started_utc: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    ended_utc: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    max_usd_per_hour: Mapped[float | None] = mapped_column(Float, nullable=True)


class OrgRound(Base):
    """One fair-share round of the org budget (decision SV11): when, for which starting study, the budget, the
    allocations and the learned demands per team (JSON, USD/hour) and the round's accounting: unallocated U,
    over-allocated O, unmet M and loss ``min(U + O, M)`` (USD/hour), and per team its useful allocation and that of
    the entitlement-only split (JSON ``{team: {"useful": ..., "entitled": ...}}``, USD/hour; SV14)."""

    __tablename__ = "org_rounds"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at_utc: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    study_id: Mapped[int | None] = mapped_column(ForeignKey("studies.id"), nullable=True)
    budget_usd_per_hour: Mapped[float] = mapped_column(Float)
    allocations_json: Mapped[str] = mapped_column(Text)
    demands_json: Mapped[str] = mapped_column(Text)
    unallocated: Mapped[float] = mapped_column(Float)
    over_allocated: Mapped[float] = mapped_column(Float)
    unmet: Mapped[float] = mapped_column(Float)
    loss: Mapped[float] = mapped_column(Float)
    utility_json: Mapped[str | None] = mapped_column(Text, nullable=True)


def upgrade(engine: Engine) -> None:
    """Bring the database's schema to the newest migration (Alembic ``upgrade head``), creating it if empty.

    Parameters
    ----------
    engine : sqlalchemy.engine.Engine
    """
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


class Store:
    """Sessions on the service's database, after :func:`upgrade`.

    Parameters
    ----------
    url : str
        SQLAlchemy URL, e.g. ``sqlite:///spottune-service/service.db`` or ``postgresql+psycopg://...``.

    Raises
    ------
    ConfigError
        On a URL SQLAlchemy cannot read or a database it cannot open.
    """

    def __init__(self, url: str):
        from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError

        self.url = url
        try:
            # SQLite: one writer at a time, so a writer waits up to SQLITE_BUSY_TIMEOUT_S for the lock (studies'
            # threads and API calls write at once); WAL lets readers go on while one writes (SV7)
            args = {"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_S} if url.startswith("sqlite") else {}
            if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
                Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
            self.engine = create_engine(url, connect_args=args)
            if url.startswith("sqlite") and url != "sqlite:///:memory:":
                from sqlalchemy import event

                @event.listens_for(self.engine, "connect")
                def _wal(dbapi_conn: Any, _: Any) -> None:
                    dbapi_conn.execute("PRAGMA journal_mode=WAL")
            upgrade(self.engine)
        except (ArgumentError, NoSuchModuleError, OperationalError) as exc:
            raise ConfigError(f"--db is {url!r}, but the database cannot be opened: "
                              f"{str(exc).splitlines()[0]}") from None
        self.session = sessionmaker(self.engine, expire_on_commit=False)
        with self.session.begin() as s:
            if s.get(Org, 1) is None:
                s.add(Org(id=1, budget_usd_per_hour=None))

    def team_by_token(self, s: Session, token: str) -> Team | None:
        """The team whose token this is, or None."""
        return s.scalar(select(Team).where(Team.token_sha256 == hash_token(token)))

    def team_by_name(self, s: Session, name: str) -> Team | None:
        """The team of this name, or None."""
        return s.scalar(select(Team).where(Team.name == name))

    def ensure_team(self, name: str, entitlement: float = 1.0) -> str | None:
        """Create team ``name`` unless it exists; return its new token (shown once), or None if it existed.

        Parameters
        ----------
        name : str
        entitlement : float, default 1.0
            Its share of the org budget (a weight, > 0); an existing team's is left as it is.

        Returns
        -------
        str or None
        """
        with self.session.begin() as s:
            if self.team_by_name(s, name) is not None:
                return None
            token = new_token()
            s.add(Team(name=name, entitlement=entitlement, token_sha256=hash_token(token)))
        return token

    def learned_demands(self) -> dict[str, dict[str, float]]:
        """Every team's stored learned unit demand: ``{team: {low, high, theta_max, probes}}`` (USD/hour; SV14)."""
        with self.session() as s:
            return {t.name: {"low": t.demand_low_usd_per_hour, "high": t.demand_high_usd_per_hour,
                             "theta_max": t.demand_theta_max_usd_per_hour, "probes": t.demand_probes or 0}
                    for t in s.scalars(select(Team).where(Team.demand_theta_max_usd_per_hour.is_not(None)))}

    def save_learned_demands(self, learned: dict[str, dict[str, float]]) -> None:
        """Store learned unit demands (:meth:`spottune.service._orgplan.OrgPlan.learned`'s answer; SV14)."""
        with self.session.begin() as s:
            for team in s.scalars(select(Team).where(Team.name.in_(list(learned)))):
                d = learned[team.name]
                team.demand_low_usd_per_hour, team.demand_high_usd_per_hour = d["low"], d["high"]
                team.demand_theta_max_usd_per_hour, team.demand_probes = d["theta_max"], int(d["probes"])

    def set_org_budget(self, budget_usd_per_hour: float | None) -> None:
        """Set the org budget (USD/hour; None clears it)."""
        with self.session.begin() as s:
            s.get(Org, 1).budget_usd_per_hour = budget_usd_per_hour  # type: ignore[union-attr]


def _iso(t: datetime | None) -> str | None:
    if t is None:
        return None
    return (t if t.tzinfo is not None else t.replace(tzinfo=UTC)).isoformat()  # SQLite drops the zone: it was UTC


def study_view(study: Study, team: str) -> dict[str, Any]:
    """A study as the API shows it (JSON-ready; times UTC, ISO 8601)."""
    return {
        "id": study.id, "name": study.name, "team": team, "state": study.state,
        "trial_budget": study.trial_budget, "max_usd_per_hour": study.max_usd_per_hour,
        "cancel_requested": study.cancel_requested,
        "spec": json.loads(study.spec_json), "output": study.output,
        "summary": json.loads(study.summary_json) if study.summary_json else None, "error": study.error,
        "created_utc": _iso(study.created_utc), "started_utc": _iso(study.started_utc),
        "ended_utc": _iso(study.ended_utc),
    }


def round_view(r: OrgRound) -> dict[str, Any]:
    """A fair-share round as GET /v1/org shows it (JSON-ready; USD/hour)."""
    return {"at_utc": _iso(r.at_utc), "study_id": r.study_id, "budget_usd_per_hour": r.budget_usd_per_hour,
            "allocations_usd_per_hour": json.loads(r.allocations_json),
            "demands_usd_per_hour": json.loads(r.demands_json), "unallocated": r.unallocated,
            "over_allocated": r.over_allocated, "unmet": r.unmet, "loss": r.loss,
            "utility_usd_per_hour": json.loads(r.utility_json) if r.utility_json else None}
