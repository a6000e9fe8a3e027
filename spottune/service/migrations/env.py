"""Alembic environment: runs the migrations on the connection :func:`spottune.service._store.upgrade` passes in.

Imported outside a migration (by an import check, say) it does nothing.
"""

from alembic import context


def _run() -> None:
    connection = context.config.attributes["connection"]
    context.configure(connection=connection, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


try:
    _config = context.config
except (NameError, AttributeError):  # no migration context: an import, not a migration
    _config = None
if _config is not None:
    _run()
