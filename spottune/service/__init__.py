"""``spottune serve``: many teams, one org budget, studies run through :func:`spottune.tune` (decisions SV1, SV7-SV16).

=======================  =================================================================================
module                   concept
=======================  =================================================================================
:mod:`._store`           the database: teams, studies, the org budget (SQLAlchemy 2), Alembic migrations
:mod:`._app`             the HTTP API (FastAPI) with bearer tokens: admin and one per team
:mod:`._runner`          the thread that runs queued studies, several at once, and continues killed ones
:mod:`._orgplan`         the fair split of the org budget per starting study and the team pick
:mod:`._cloud`           what the org sets for studies on aws and ray (store, region, image, cluster)
:mod:`._server`          :class:`Service`: the three above served by uvicorn
:mod:`.client`           :class:`ServiceClient`, the Python client (httpx)
=======================  =================================================================================

The schedulers it draws on are pure and live in :mod:`spottune.scheduling`.
"""

from spottune.service._cloud import AwsServing, RayServing
from spottune.service._server import BACKENDS, Service, default_db_url
from spottune.service.client import DEFAULT_URL, ServiceClient, ServiceError

__all__ = ["AwsServing", "BACKENDS", "DEFAULT_URL", "RayServing", "Service", "ServiceClient", "ServiceError",
           "default_db_url"]
