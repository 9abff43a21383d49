"""Generated protocol stubs of package rtplan.v1 (proto/generate.py; do not edit)."""
