# rtplan image: the installed wheel (the packages, with the shipped checkpoints and browser pages
# as package data, setup.py) and its dependencies; nothing else of the tree.
# EXTRAS=gpu installs the CUDA build of JAX (docker-compose.yml: its gpu profile; cpu: no extra).
# BASE_IMAGE: any image with Python 3.11 whose `python` and `pip` are on PATH; where none can be
# pulled, deploy/local_base.sh builds one from Debian's packages (`make compose-check` does;
# docker-compose.yml passes RTPLAN_BASE_IMAGE here).
# The optional build secret pip_cert is a CA bundle pip trusts (a network that inspects TLS):
#   docker build --secret id=pip_cert,src=/etc/ssl/certs/ca-certificates.crt .
# It is mounted for each pip run only and never stored in a layer. RUN --mount needs BuildKit,
# the builder of Docker Engine 23+ and of `docker compose` (v2).
ARG BASE_IMAGE=python:3.11-slim

# Stage 1: the wheel, built from the tree (.dockerignore keeps what it never needs out).
# No python:3.11-slim here (cannot pull)? `sudo deploy/local_base.sh` builds rtplan-base:bookworm:
# build on it with RTPLAN_BASE_IMAGE=rtplan-base:bookworm (compose) or --build-arg BASE_IMAGE=...
FROM ${BASE_IMAGE} AS wheel
WORKDIR /src
COPY . .
RUN --mount=type=secret,id=pip_cert \
    if [ -s /run/secrets/pip_cert ]; then export PIP_CERT=/run/secrets/pip_cert; fi \
    && pip wheel --no-cache-dir --no-deps --wheel-dir /wheel .

# Stage 2: the wheel installed; the tree stays behind in stage 1.
# No python:3.11-slim here (cannot pull)? `sudo deploy/local_base.sh` builds rtplan-base:bookworm:
# build on it with RTPLAN_BASE_IMAGE=rtplan-base:bookworm (compose) or --build-arg BASE_IMAGE=...
FROM ${BASE_IMAGE}
ARG EXTRAS=""
COPY --from=wheel /wheel /tmp/wheel
RUN --mount=type=secret,id=pip_cert \
    if [ -s /run/secrets/pip_cert ]; then export PIP_CERT=/run/secrets/pip_cert; fi \
    && pip install --no-cache-dir "$(ls /tmp/wheel/rtplan-*.whl)${EXTRAS:+[$EXTRAS]}" \
    && rm -rf /tmp/wheel
# The services run as an unprivileged user that owns the working directory, where relative
# folders (results/) land, the replays (an installed package's default, the per-user data
# directory, moved to /app/replays), the arena's SQLite database (/app/arena) and its home's
# cache (JAX's compile cache, ~/.cache). The compose file mounts named volumes there, which
# start as copies of these (owner included).
RUN useradd --create-home --uid 1000 --user-group rtplan \
    && mkdir -p /app/replays /app/results /app/arena /home/rtplan/.cache \
    && chown -R rtplan:rtplan /app /home/rtplan
USER rtplan
WORKDIR /app
ENV RTPLAN_SERVER_RECORD_DIR=/app/replays
CMD ["rtplan", "demo"]
