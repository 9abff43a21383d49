"""Alembic's entry point: runs the migrations on the connection `repository.migrate` hands it."""

from alembic import context

# Only ever run by `repository.migrate`, which passes its open connection (no alembic.ini, no
# URL here). Batch mode: a later ALTER on SQLite rebuilds the table, as Alembic does there.
context.configure(
    connection=context.config.attributes["connection"],
    render_as_batch=True,
    transaction_per_migration=False,
)
with context.begin_transaction():
    context.run_migrations()
