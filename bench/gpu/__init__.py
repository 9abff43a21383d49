"""The GPU run (issue 42 item 4): `bash bench/gpu/run.sh`, see bench/gpu/README.md."""
