"""The service's HTTP API (FastAPI; decision SV9): teams, the org budget and studies, behind bearer tokens.

Nouns follow OSS Vizier's service (studies) and the fair-share schedulers (teams with an entitlement). Every error
is a JSON ``{"detail": "<one line>"}`` with a 4xx status, and a refused request writes nothing.

=======================================  =======  ===========================================================
route                                    who      what
=======================================  =======  ===========================================================
``GET /v1/health``                       anyone   ``{"ok": true}``
``POST /v1/teams``                       admin    create a team ``{name, entitlement, min_usd_per_hour,
                                                  max_usd_per_hour}``; returns its token once
``GET /v1/teams``                        admin    the teams
``GET /v1/org``, ``PUT /v1/org``         any/adm  the org budget (USD/hour), its max-min fair split, the latest
                                                  fair-share rounds with their accounting and learned demands
``POST /v1/studies``                     team     submit ``{team, name, spec, trial_budget}`` (admin: any team)
``GET /v1/studies[/{study}]``            team     its own studies (admin: all); ``study`` is an id or a name
``POST /v1/studies/{study}/cancel``      team     cancel one of its studies
=======================================  =======  ===========================================================

The web pages (each study's dashboard, the org view) are :mod:`spottune.service._pages`'s.
"""

from __future__ import annotations

import hmac
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Depends, FastAPI, Header, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from spottune.errors import SpottuneError
from spottune.scheduling import max_min_fair
from spottune.service._store import (TERMINAL_STATES, Org, OrgRound, Store, Study, Team, hash_token, new_token,
                                     round_view, study_view)

__all__ = ["DEFAULT_MAX_BODY_BYTES", "ORG_ROUNDS_SHOWN", "create_app", "tenant_refusal"]

#: Fair-share rounds GET /v1/org shows, the latest ones (SV11).
ORG_ROUNDS_SHOWN = 24
#: Largest request body accepted, bytes (a spec is a few kB).
DEFAULT_MAX_BODY_BYTES = 1_000_000

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class _TeamIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=_NAME.pattern)
    entitlement: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    min_usd_per_hour: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    max_usd_per_hour: float | None = Field(default=None, ge=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _min_below_max(self) -> _TeamIn:
        lo, hi = self.min_usd_per_hour, self.max_usd_per_hour
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"min_usd_per_hour is {lo:g}, but must be at most max_usd_per_hour {hi:g}")
        return self


class _TeamPatch(BaseModel):
    """The fields of a team an admin may change; a field left out keeps its value, ``null`` removes a bound."""

    model_config = ConfigDict(extra="forbid")
    entitlement: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    min_usd_per_hour: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    max_usd_per_hour: float | None = Field(default=None, ge=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _entitlement_is_a_number(self) -> _TeamPatch:
        if "entitlement" in self.model_fields_set and self.entitlement is None:
            raise ValueError("entitlement is None, but must be a number > 0")
        return self


def _team_view(t: Team) -> dict[str, Any]:
    return {"name": t.name, "entitlement": t.entitlement, "min_usd_per_hour": t.min_usd_per_hour,
            "max_usd_per_hour": t.max_usd_per_hour}


class _OrgIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    budget_usd_per_hour: float | None = Field(ge=0, allow_inf_nan=False)


class _StudyIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    team: str
    name: str = Field(pattern=_NAME.pattern)
    spec: dict[str, Any]
    trial_budget: int | None = Field(default=None, ge=1)


class _Caller(BaseModel):
    admin: bool
    team_id: int | None = None
    team: str | None = None


def _fail(status: int, detail: str) -> HTTPException:
    return HTTPException(status_code=status, detail=detail)


class _BodyLimit:
    """ASGI middleware: a body larger than ``max_bytes`` (by its Content-Length, or counted while read) gets 413
    before any route sees it."""

    def __init__(self, app: Any, max_bytes: int):
        self.app, self.max_bytes = app, max_bytes

    async def _refuse(self, send: Callable[..., Awaitable[None]], size: str) -> None:
        body = json.dumps({"detail": f"request body is {size} bytes, but must be at most {self.max_bytes}"}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers", [])).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await self._refuse(send, length.decode())
            return
        body, more = b"", True  # read the whole body first (at most max_bytes), then hand it on
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                await self._refuse(send, f"more than {self.max_bytes}")
                return
            more = message.get("more_body", False)
        handed = False

        async def replay() -> dict:
            nonlocal handed
            if not handed:
                handed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def _validation_line(exc: RequestValidationError) -> str:
    err = exc.errors()[0] if exc.errors() else {}
    where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
    return f"{where}: {err.get('msg', 'invalid request')}"


def tenant_refusal(spec: Any) -> str | None:
    """Why a team may not run this spec on the shared server, or None (decision SV9).

    A study runs inside the server's process with the server's files: it may name only built-in workloads and
    bundled price datasets, and neither a checkpoint folder nor a curve file of its own (the server keeps
    checkpoints in the study's results folder).

    Parameters
    ----------
    spec : spottune.experiment.ExperimentSpec

    Returns
    -------
    str or None
        One line naming the field, its value and the rule.
    """
    from spottune.workloads import list_workloads

    if spec.workload not in list_workloads():
        return (f"workload is {spec.workload!r}, but a study on the service must name a built-in workload "
                f"({', '.join(list_workloads())}): the server imports no code of its tenants")
    if "/" in spec.prices or "\\" in spec.prices:
        return f"prices is {spec.prices!r}, but a study on the service must name a bundled price dataset, not a path"
    for name in ("storage_path", "stopper_curves"):
        if getattr(spec, name) is not None:
            return f"{name} is {getattr(spec, name)!r}, but a study on the service may not name server paths"
    return None


def create_app(store: Store, *, admin_token: str, runner: Any = None, backend: str = "sim",
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, cloud: Any = None) -> FastAPI:
    """The FastAPI application over ``store``.

    Parameters
    ----------
    store : Store
    admin_token : str
        The admin's bearer token (non-empty).
    runner : StudyRunner, optional
        Told about new and cancelled studies.
    backend : str, default "sim"
        The backend this server runs studies on; a spec naming another is refused.
    max_body_bytes : int, default :data:`DEFAULT_MAX_BODY_BYTES`
    cloud : AwsServing or RayServing, optional
        The org's settings of the cloud backend (SV16): a spec naming one of them is refused (``cloud.refusal``);
        on aws the org budget may not be removed (every study runs under its fair-share cap).

    Returns
    -------
    fastapi.FastAPI
    """
    if not admin_token:
        raise SpottuneError("admin_token is empty, but must be a secret string")
    app = FastAPI(title="spottune serve", version="1")
    app.add_middleware(_BodyLimit, max_bytes=max_body_bytes)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(status_code=422, content={"detail": _validation_line(exc)})

    def caller(authorization: str | None = Header(default=None)) -> _Caller:
        if not authorization or not authorization.startswith("Bearer "):
            raise _fail(401, "missing bearer token: send the header 'Authorization: Bearer <token>'")
        token = authorization.removeprefix("Bearer ").strip()
        if hmac.compare_digest(hash_token(token), hash_token(admin_token)):
            return _Caller(admin=True)
        with store.session() as s:
            team = store.team_by_token(s, token)
            if team is None:
                raise _fail(401, "unknown token: it is neither the admin's nor a team's")
            return _Caller(admin=False, team_id=team.id, team=team.name)

    def admin(who: _Caller = Depends(caller)) -> _Caller:
        if not who.admin:
            raise _fail(403, f"team {who.team} may not do this: it needs the admin token")
        return who

    @app.get("/v1/health")
    def health() -> dict[str, Any]:
        return {"ok": True, "backend": backend}

    @app.post("/v1/teams", status_code=201)
    def create_team(body: _TeamIn, _: _Caller = Depends(admin)) -> dict[str, Any]:
        token = new_token()
        try:
            with store.session.begin() as s:
                team = Team(name=body.name, entitlement=body.entitlement, token_sha256=hash_token(token),
                            min_usd_per_hour=body.min_usd_per_hour, max_usd_per_hour=body.max_usd_per_hour)
                s.add(team)
                s.flush()
                view = _team_view(team)
        except IntegrityError:
            raise _fail(409, f"team {body.name!r} exists already") from None
        return {**view, "token": token}

    @app.patch("/v1/teams/{name}")
    def update_team(name: str, body: _TeamPatch, _: _Caller = Depends(admin)) -> dict[str, Any]:
        with store.session.begin() as s:
            team = store.team_by_name(s, name)
            if team is None:
                raise _fail(404, f"no team named {name!r}")
            changes = body.model_dump(include=body.model_fields_set)
            lo = changes.get("min_usd_per_hour", team.min_usd_per_hour)
            hi = changes.get("max_usd_per_hour", team.max_usd_per_hour)
            if lo is not None and hi is not None and lo > hi:
                raise _fail(422, f"min_usd_per_hour would be {lo:g}, but must be at most max_usd_per_hour {hi:g}")
            for key, value in changes.items():  # read by the next fair-share round (SV14)
                setattr(team, key, value)
            s.flush()
            return _team_view(team)

    @app.get("/v1/teams")
    def teams(_: _Caller = Depends(admin)) -> list[dict[str, Any]]:
        with store.session() as s:
            return [_team_view(t) for t in s.scalars(select(Team).order_by(Team.name))]

    def _org(s: Any) -> dict[str, Any]:
        budget = s.get(Org, 1).budget_usd_per_hour
        active = s.execute(select(Team.name, Team.entitlement).join(Study)
                           .where(Study.state.in_(("queued", "running"))).distinct().order_by(Team.name)).all()
        shares: dict[str, float] = {}
        if budget is not None and active:  # every active team asks for the whole budget: the entitled split
            alloc = max_min_fair([e for _, e in active], [budget] * len(active), budget)
            shares = {name: float(a) for (name, _), a in zip(active, alloc)}
        latest = select(OrgRound).order_by(OrgRound.id.desc()).limit(ORG_ROUNDS_SHOWN)
        rounds = [round_view(r) for r in s.scalars(latest)]
        learned: dict[str, list[float]] = {}
        plan = getattr(runner, "plan", None)
        for (name,) in s.execute(select(Team.name).order_by(Team.name)).all():
            interval = plan.demand_interval(name) if plan is not None else None
            if interval is not None:
                learned[name] = [interval[0], interval[1]]
        return {"budget_usd_per_hour": budget, "shares_usd_per_hour": shares, "rounds": rounds[::-1],
                "learned_unit_demands_usd_per_hour": learned}

    @app.get("/v1/org")
    def org(_: _Caller = Depends(caller)) -> dict[str, Any]:
        with store.session() as s:
            return _org(s)

    @app.put("/v1/org")
    def set_org(body: _OrgIn, _: _Caller = Depends(admin)) -> dict[str, Any]:
        if backend == "aws" and body.budget_usd_per_hour is None:
            raise _fail(422, "budget_usd_per_hour is None, but a server on the aws backend keeps an org budget: every "
                             "study runs under its share of it (decision SV16)")
        store.set_org_budget(body.budget_usd_per_hour)
        with store.session() as s:
            return _org(s)

    @app.post("/v1/studies", status_code=201)
    def submit(body: _StudyIn, who: _Caller = Depends(caller)) -> dict[str, Any]:
        from spottune.experiment import ExperimentSpec

        if not who.admin and body.team != who.team:
            raise _fail(403, f"the token of team {who.team} cannot submit for team {body.team}")
        for key in ("workload", "trainable"):  # before parsing: parsing would import a "module:Class"
            value = body.spec.get(key)
            if isinstance(value, str) and ":" in value:
                raise _fail(422, f"spec: {key} is {value!r}, but a study on the service must name a built-in workload: "
                                 "the server imports no code of its tenants")
        try:
            spec = ExperimentSpec.from_dict(body.spec)
        except SpottuneError as exc:
            raise _fail(422, f"spec: {str(exc).splitlines()[0]}") from None
        if spec.backend != backend:
            raise _fail(422, f"spec: backend is {spec.backend!r}, but this server runs studies on {backend!r}")
        refusal = tenant_refusal(spec) or (cloud.refusal(spec) if cloud is not None else None)
        if refusal is not None:
            raise _fail(422, f"spec: {refusal}")
        if body.trial_budget is not None and body.trial_budget < spec.n_trials:
            from spottune.service._budgeted import check_budgetable

            try:
                check_budgetable([t.config for t in spec.trials()])
            except SpottuneError as exc:
                raise _fail(422, str(exc)) from None
        try:
            with store.session.begin() as s:
                team = store.team_by_name(s, body.team)
                if team is None:
                    raise _fail(404, f"unknown team {body.team!r}")
                study = Study(team_id=team.id, name=body.name, spec_json=json.dumps(body.spec),
                              trial_budget=body.trial_budget, state="queued", cancel_requested=False)
                s.add(study)
                s.flush()
                view = study_view(study, team.name)
        except IntegrityError:
            raise _fail(409, f"team {body.team} has a study named {body.name!r} already") from None
        if runner is not None:
            runner.notify()
        return view

    def _visible(s: Any, who: _Caller):  # type: ignore[no-untyped-def]
        q = select(Study, Team.name).join(Team).order_by(Study.id)
        return q if who.admin else q.where(Study.team_id == who.team_id)

    def _find(s: Any, who: _Caller, ref: str) -> tuple[Study, str]:
        q = _visible(s, who)
        rows = s.execute(q.where(Study.id == int(ref)) if ref.isdigit() else q.where(Study.name == ref)).all()
        if not rows:
            raise _fail(404, f"no study {ref!r} visible to {'the admin' if who.admin else 'team ' + str(who.team)}")
        if len(rows) > 1:
            raise _fail(409, f"study name {ref!r} is used by several teams: give its id")
        return rows[0][0], rows[0][1]

    @app.get("/v1/studies")
    def studies(who: _Caller = Depends(caller)) -> list[dict[str, Any]]:
        with store.session() as s:
            return [study_view(st, name) for st, name in s.execute(_visible(s, who)).all()]

    @app.get("/v1/studies/{ref}")
    def study(ref: str, who: _Caller = Depends(caller)) -> dict[str, Any]:
        with store.session() as s:
            return study_view(*_find(s, who, ref))

    @app.post("/v1/studies/{ref}/cancel")
    def cancel(ref: str, who: _Caller = Depends(caller)) -> dict[str, Any]:
        with store.session.begin() as s:
            st, name = _find(s, who, ref)
            if st.state in TERMINAL_STATES:
                raise _fail(409, f"study {st.name} is {st.state} already")
            if st.state == "queued":
                st.state = "cancelled"
                st.error = "cancelled before it started"
            st.cancel_requested = True
            view = study_view(st, name)
        if runner is not None:
            runner.cancel(view["id"])
        return view

    from spottune.service._pages import add_pages  # the study dashboards and the org view (DS5, DS6)

    add_pages(app, store, caller, _find)
    return app
