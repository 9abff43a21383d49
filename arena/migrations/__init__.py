"""The arena's Alembic migrations (`env.py`, `versions/`), run by `repository.migrate`."""
