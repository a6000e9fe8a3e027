"""Alembic migrations of the service's store (:func:`spottune.service._store.upgrade` runs them)."""
