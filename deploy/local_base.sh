#!/usr/bin/env bash
# Builds a local stand-in for python:3.11-slim from Debian's packages, for a machine whose Docker
# engine can pull no image: Debian bookworm (minbase, python3 3.11) with a venv at /opt/venv
# first on PATH, so `python` and `pip` behave as in the official image (bookworm's own python3
# refuses `pip install` into the system, PEP 668). Needs root and debootstrap.
#   deploy/local_base.sh [TAG]   # default rtplan-base:bookworm; then
#   docker build --build-arg BASE_IMAGE=rtplan-base:bookworm ...
set -euo pipefail

tag="${1:-rtplan-base:bookworm}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

if [ "$(id -u)" != 0 ]; then
    echo "local_base.sh: debootstrap needs root" >&2
    exit 1
fi
command -v debootstrap >/dev/null || {
    echo "local_base.sh: debootstrap is missing (apt-get install -y debootstrap)" >&2
    exit 1
}

root="$(mktemp -d /tmp/rtplan-base.XXXXXX)"
trap 'rm -rf "$root"' EXIT
start=$(date +%s)
echo "local_base.sh: debootstrap bookworm into $root (a few minutes)"
nice debootstrap --variant=minbase \
    --include=python3,python3-venv,python3-pip,ca-certificates \
    bookworm "$root" "$mirror" >"$root.log" 2>&1 || {
    tail -20 "$root.log" >&2
    echo "local_base.sh: debootstrap failed (log: $root.log)" >&2
    exit 1
}
rm -f "$root.log"
chroot "$root" python3 -m venv /opt/venv
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
# What python:3.11-slim's config sets that the Dockerfile relies on: PATH finds python and pip.
tar -C "$root" -c . | docker import \
    --change 'ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python3"]' \
    - "$tag" >/dev/null
echo "local_base.sh: $tag built in $(($(date +%s) - start)) s"
