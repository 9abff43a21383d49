"""Example programs that ship with rtplan: run each with `python -m rtplan.examples.NAME`."""
