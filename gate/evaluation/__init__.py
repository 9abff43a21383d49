"""Evaluations and reports of the gates of both kinds (`rtplan eval`, `rtplan report`)."""
