"""Alembic environment: runs on the connection handed over by storage.db.migrate, or on the configured URL."""

import warnings

from alembic import context
from sqlalchemy import create_engine

from fptrack.storage.models import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def _run(connection) -> None:  # type: ignore[no-untyped-def]
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction(), warnings.catch_warnings():
        # SQLite's batch mode copies a table by reflecting it, and SQLAlchemy cannot reflect the expression
        # indexes of `fingerprints` (the migrations create them by hand): it warns on every `fptrack init`
        # though nothing is lost, since batch mode does not recreate the indexes of the tables it only reads
        warnings.filterwarnings("ignore", message="Skipped unsupported reflection of expression-based index")
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_engine(config.get_main_option("sqlalchemy.url") or "")
    with engine.begin() as connection:
        _run(connection)


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
