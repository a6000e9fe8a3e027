"""The service's web pages: each study's dashboard and the org view (decisions DS5, DS6).

===============================================  ======  =========================================================
route                                            who     what
===============================================  ======  =========================================================
``GET /studies/{study}/dashboard/``              anyone  the dashboard's page (``dashboard/page.html``), no data
``GET /studies/{study}/dashboard/api/snapshot``  team    ``snapshot()`` of the study's results folder; 404 for
                                                         another team's study, as the API answers
``GET /org/``                                    anyone  the org view's page (``dashboard/org.html``), no data
``GET /org/api/snapshot``                        admin   :func:`org_snapshot`
===============================================  ======  =========================================================

A page load cannot carry a bearer header, so the pages hold no data: they take the token from the address's
fragment (``#token=...``, which the browser never sends to a server), keep it in the tab's ``sessionStorage`` and
send it as ``Authorization: Bearer`` on their ``api/snapshot`` fetches, which the API's own token check guards.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from spottune.dashboard import snapshot
from spottune.dashboard._app import asset_response, page_html
from spottune.scheduling import max_min_fair
from spottune.service._store import Org, OrgRound, Store, Study, Team, round_view

__all__ = ["ORG_ROUNDS_PAGE", "add_pages", "org_snapshot"]

#: Fair-share rounds the org view draws, the latest ones.
ORG_ROUNDS_PAGE = 500


def org_snapshot(s: Session, rounds_shown: int = ORG_ROUNDS_PAGE) -> dict[str, Any]:
    """What the org view shows: the teams, the studies, and each fair-share round with each team's entitled split.

    Parameters
    ----------
    s : sqlalchemy.orm.Session
        A session on the service's store.
    rounds_shown : int, default :data:`ORG_ROUNDS_PAGE`
        The latest rounds to include.

    Returns
    -------
    dict
        JSON-ready: ``budget_usd_per_hour`` (the org budget now, or None); ``teams`` (``name``, ``entitlement``,
        ``studies``, ``running``), by name; ``studies`` (``id``, ``team``, ``name``, ``state``, ``usd``: the
        summary's ``total_cost_usd`` once finished, else None), by id; ``rounds``, oldest first, each as
        ``GET /v1/org`` shows it (:func:`spottune.service._store.round_view`: allocations, demands, ``U``, ``O``,
        ``M``, ``loss``, USD/hour) plus ``entitled_usd_per_hour``: the round's budget split by max-min fairness
        among the round's teams, each asking for the whole budget (their entitled shares; decision SV11; with
        today's entitlements, which the store does not keep a history of).
    """
    budget = s.get(Org, 1).budget_usd_per_hour  # type: ignore[union-attr]
    counts = {name: (int(n), int(r or 0)) for name, n, r in s.execute(
        select(Team.name, func.count(Study.id), func.sum(case((Study.state == "running", 1), else_=0)))
        .join(Study, isouter=True).group_by(Team.name))}
    teams = [{"name": t.name, "entitlement": t.entitlement, "studies": counts.get(t.name, (0, 0))[0],
              "running": counts.get(t.name, (0, 0))[1]} for t in s.scalars(select(Team).order_by(Team.name))]
    entitlement = {t["name"]: t["entitlement"] for t in teams}
    rounds = [round_view(r) for r in s.scalars(select(OrgRound).order_by(OrgRound.id.desc()).limit(rounds_shown))]
    for r in rounds:
        names = sorted(n for n in {*r["allocations_usd_per_hour"], *r["demands_usd_per_hour"]} if n in entitlement)
        total = float(r["budget_usd_per_hour"])
        split = ([0.0] * len(names) if not names or total <= 0
                 else max_min_fair([entitlement[n] for n in names], [total] * len(names), total))
        r["entitled_usd_per_hour"] = {n: float(a) for n, a in zip(names, split)}
    studies = []
    for st, name in s.execute(select(Study, Team.name).join(Team).order_by(Study.id)).all():
        summary = json.loads(st.summary_json) if st.summary_json else None
        studies.append({"id": st.id, "team": name, "name": st.name, "state": st.state,
                        "usd": summary.get("total_cost_usd") if summary else None})
    return {"budget_usd_per_hour": budget, "teams": teams, "studies": studies, "rounds": rounds[::-1]}


def add_pages(app: FastAPI, store: Store, caller: Callable[..., Any],
              find: Callable[[Session, Any, str], tuple[Study, str]]) -> None:
    """Add the study dashboards and the org view to the service's app (the routes of this module's docstring).

    Parameters
    ----------
    app : fastapi.FastAPI
        The service's app (:func:`spottune.service._app.create_app`).
    store : Store
    caller : callable
        The app's dependency that turns the bearer token into the caller (401 without a known token).
    find : callable
        ``find(session, caller, ref) -> (study, team name)``: the study by id or name, 404 when the caller may not
        see it (the API's own rule).
    """
    study_page, org_page = page_html("page.html"), page_html("org.html")

    @app.get("/studies/{ref}/dashboard", include_in_schema=False)
    def study_slash(ref: str) -> RedirectResponse:
        return RedirectResponse(f"/studies/{ref}/dashboard/", status_code=307)

    @app.get("/studies/{ref}/dashboard/", response_class=HTMLResponse, include_in_schema=False)
    def study_dashboard(ref: str) -> HTMLResponse:
        return HTMLResponse(study_page)

    @app.get("/studies/{ref}/dashboard/api/snapshot")
    def study_snapshot(ref: str, who: Any = Depends(caller)) -> JSONResponse:
        with store.session() as s:
            study, team = find(s, who, ref)
        snap = snapshot(study.output, missing_ok=True)  # None (queued): no folder yet, "waiting"
        snap["folder"] = f"study {study.id}: {team}/{study.name} ({study.state})"
        if study.state in ("queued", "failed", "cancelled") and snap["status"] != "finished":
            snap["status"] = study.state
        return JSONResponse(snap, headers={"Cache-Control": "no-store"})

    @app.get("/studies/{ref}/dashboard/{name}", include_in_schema=False)
    def study_asset(ref: str, name: str) -> Response:
        return asset_response(name)

    @app.get("/org", include_in_schema=False)
    def org_slash() -> RedirectResponse:
        return RedirectResponse("/org/", status_code=307)

    @app.get("/org/", response_class=HTMLResponse, include_in_schema=False)
    def org_view() -> HTMLResponse:
        return HTMLResponse(org_page)

    @app.get("/org/api/snapshot")
    def org_api(who: Any = Depends(caller)) -> JSONResponse:
        if not who.admin:
            raise HTTPException(status_code=403, detail=f"team {who.team} may not do this: it needs the admin token")
        with store.session() as s:
            return JSONResponse(org_snapshot(s), headers={"Cache-Control": "no-store"})

    @app.get("/org/{name}", include_in_schema=False)
    def org_asset(name: str) -> Response:
        return asset_response(name)

