#!/usr/bin/env bash
# `make compose-check`: docker-compose.yml's cpu profile run for real in Docker, checked end to
# end, then torn down. Steps (each timed; the first failure stops the run with its reason):
#   1. base    python:3.11-slim if present or pullable, else a local one (deploy/local_base.sh)
#   2. image   rtplan:cpu built with BuildKit from the Dockerfile (the compose file's cpu args)
#   3. up      the cpu profile up; waits until its three services are healthy
#   4. uid     the services' processes run as uid 1000
#   5. keys    the env server's and the arena's commands refuse to serve 0.0.0.0 with no key
#              (exit 2, one line)
#   6. play    creating a session with no key is 401, a wrong key 403; with the key (the
#              compose secret) a planner session is created, its websocket watched from the host
#   7. arena   its /healthz, leaderboard page and API answer on the published :8100; a version
#              registered enters a ranked run, whose first episode the arena creates on the env
#              server (with the secret's key) and the host plays through the published Env API
#              at the address the arena hands out, until the arena records it finished
#   8. restart the stack down and up again (volumes kept); the replay is still served, the
#              arena's run still recorded
#   9. deploy  one short rung of the cpu-deploy profile (its key from the same secret)
#  10. logs    no key and no token (the version's, the session's) appears in any container's
#              log (before the restart and after); no key in the probe's output or the deploy's
#  11. down    containers, network and volumes removed (also on failure; the images stay)
# The keys are a random file made for the run in its private work folder (mode 0644 there, so
# the containers' uid 1000 reads the bind-mounted secret), never committed; docker-compose.yml
# mounts it as the secret rtplan_api_keys (RTPLAN_HOST_API_KEY_FILE names it).
# Needs a Docker engine, a compose (`docker compose` or Debian's docker-compose), BuildKit
# (`docker buildx`, or a Docker client older than 23 with DOCKER_BUILDKIT=1) and the checkout's
# venv for the host side (deploy/compose_probe.py). Settings (environment):
#   RTPLAN_CHECK_GAMES  games the planner serves (default snake-rt-v0; "all": every game, as
#                       the compose file does; each compiles for minutes on a CPU)
#   BASE_IMAGE          skip step 1's choice and build on this image
#   PIP_CERT            a CA bundle pip in the build trusts (default: host pip's `cert` setting)
#   BUILD_NETWORK       the build's network (default host; bridge where it routes out)
#   KEEP=1              leave the stack up at the end (`docker compose -p rtplan-check down -v`)
#   RTPLAN_HOST_HTTP_PORT, RTPLAN_HOST_GRPC_PORT, RTPLAN_HOST_ARENA_PORT
#                       the host ports the env server and the arena are published on (default
#                       8000, 50052, 8100; docker-compose.yml reads the same variables)
set -euo pipefail
cd "$(dirname "$0")/.."

PROJECT=rtplan-check
GAMES="${RTPLAN_CHECK_GAMES:-snake-rt-v0}"
PY="${PYTHON:-.venv/bin/python}"
# The host ports, as docker-compose.yml publishes them (exported: compose reads the same).
export RTPLAN_HOST_HTTP_PORT="${RTPLAN_HOST_HTTP_PORT:-8000}"
export RTPLAN_HOST_GRPC_PORT="${RTPLAN_HOST_GRPC_PORT:-50052}"
export RTPLAN_HOST_ARENA_PORT="${RTPLAN_HOST_ARENA_PORT:-8100}"
# The arena hands out the Env API as the host reaches it: localhost, as the file's default.
unset RTPLAN_HOST_NAME
HTTP="http://127.0.0.1:$RTPLAN_HOST_HTTP_PORT"
ARENA="http://127.0.0.1:$RTPLAN_HOST_ARENA_PORT"
SERVICES=(planner-cpu env-server-cpu arena-cpu)
HEALTH_TIMEOUT_S="${HEALTH_TIMEOUT_S:-3600}"
work="$(mktemp -d /tmp/rtplan-compose-check.XXXXXX)"
t0=$(date +%s)
step_name=setup
step_t0=$t0
summary=()

log() { printf '[compose-check %4ds] %s\n' "$(($(date +%s) - t0))" "$*"; }
step() {
    if [ "$step_name" != setup ]; then
        summary+=("$(printf '%-8s %5d s' "$step_name" "$(($(date +%s) - step_t0))")")
    fi
    step_name="$1"
    step_t0=$(date +%s)
    log "== $1: $2"
}
fail() {
    log "FAILED in step '$step_name': $*"
    exit 1
}

# --- compose and docker --------------------------------------------------------------------
docker info >/dev/null 2>&1 || fail "no Docker engine answers (start dockerd, or check DOCKER_HOST)"
if docker compose version >/dev/null 2>&1; then
    compose_cmd=(docker compose)
elif command -v docker-compose >/dev/null; then
    compose_cmd=(docker-compose)
else
    fail "neither 'docker compose' nor 'docker-compose' is installed"
fi
[ -x "$PY" ] || fail "$PY is missing: make the venv first (make test, or PYTHON=...)"

# Two random keys for this run (the env server accepts either; the probe and deploy present
# the first), in the work folder only this user can enter; docker-compose.yml's secret.
keys="$work/api_keys"
"$PY" -c 'import secrets; print(f"# compose-check keys\n{secrets.token_urlsafe(32)}\n{secrets.token_urlsafe(32)}")' >"$keys"
chmod 700 "$work"
chmod 644 "$keys"
export RTPLAN_HOST_API_KEY_FILE="$keys"

override="$work/games.override.yml"
if [ "$GAMES" = all ]; then
    printf 'services: {}\n' >"$override"
else
    # Only what this check needs compiles (the compose file's planner serves every game).
    printf 'services:\n  planner-cpu:\n    environment:\n      RTPLAN_PLANNER_GAMES: "%s"\n' \
        "$GAMES" >"$override"
fi
compose() {
    "${compose_cmd[@]}" -p "$PROJECT" -f docker-compose.yml -f "$override" \
        --profile cpu --profile cpu-deploy "$@"
}

teardown() {
    local rc=$?
    trap - EXIT
    if [ "$step_name" != setup ]; then
        summary+=("$(printf '%-8s %5d s' "$step_name" "$(($(date +%s) - step_t0))")")
    fi
    if [ $rc != 0 ]; then # what the services said, kept beside the other logs
        compose logs --no-color --timestamps >"$work/services.log" 2>&1 || true
        tail -25 "$work/services.log"
    fi
    if [ "${KEEP:-0}" = 1 ]; then
        log "KEEP=1: the stack stays up (${compose_cmd[*]} -p $PROJECT down -v removes it)"
    else
        log "== down: containers, network and volumes of project $PROJECT"
        compose down -v --remove-orphans >"$work/down.log" 2>&1 || {
            cat "$work/down.log"
            log "down failed"
            rc=1
        }
    fi
    printf '%s\n' "${summary[@]}" | sed 's/^/[compose-check] /'
    if [ $rc = 0 ]; then
        log "PASSED in $(($(date +%s) - t0)) s (logs: $work)"
    else
        log "FAILED (exit $rc; logs: $work)"
    fi
    exit $rc
}
trap teardown EXIT

# Ports the cpu profile publishes must be free on the host (another demo on :8000, ...).
for var in RTPLAN_HOST_HTTP_PORT RTPLAN_HOST_GRPC_PORT RTPLAN_HOST_ARENA_PORT; do
    port="${!var}"
    if "$PY" -c "import socket,sys; s=socket.socket(); sys.exit(s.connect_ex(('127.0.0.1',$port))!=0)"; then
        if ! compose ps -q 2>/dev/null | grep -q .; then
            fail "port $port is in use on the host: the cpu profile publishes it (stop what holds it, or set $var=N to publish another)"
        fi
    fi
done
compose down -v --remove-orphans >/dev/null 2>&1 || true # a previous run's leftovers

# --- 1. base image --------------------------------------------------------------------------
step base "the image both Dockerfile stages start from"
if [ -z "${BASE_IMAGE:-}" ]; then
    if docker image inspect python:3.11-slim >/dev/null 2>&1 ||
        timeout 120 docker pull -q python:3.11-slim >/dev/null 2>&1; then
        BASE_IMAGE=python:3.11-slim
    else
        BASE_IMAGE=rtplan-base:bookworm
        log "python:3.11-slim cannot be pulled here: using the local $BASE_IMAGE"
        if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
            deploy/local_base.sh "$BASE_IMAGE" || fail "could not build the local base image"
        fi
    fi
fi
docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 || fail "base image $BASE_IMAGE is missing"
log "base: $BASE_IMAGE"

# --- 2. the image ---------------------------------------------------------------------------
step image "rtplan:cpu from the Dockerfile (BuildKit; the pip_cert secret where one is set)"
cert="${PIP_CERT:-$("$PY" -m pip config get global.cert 2>/dev/null || true)}"
build_args=(--build-arg "BASE_IMAGE=$BASE_IMAGE" --build-arg "EXTRAS=" -t rtplan:cpu)
# pip in the build reaches the package registry over the host's network: a Docker engine run
# without its iptables rules (dockerd --iptables=false) gives the default bridge no route out.
build_args+=(--network "${BUILD_NETWORK:-host}")
if [ -n "$cert" ] && [ -s "$cert" ]; then
    build_args+=(--secret "id=pip_cert,src=$cert")
    log "pip in the build trusts $cert (a build secret: in no layer)"
fi
# BuildKit: `docker buildx`, else a client older than 23 (its builder is BuildKit with
# DOCKER_BUILDKIT=1; 23+ without buildx has only the legacy builder, which has no RUN --mount).
builder=()
if docker buildx version >/dev/null 2>&1; then
    builder=(docker buildx build --load)
else
    for client in docker /usr/bin/docker; do
        v="$("$client" version -f '{{.Client.Version}}' 2>/dev/null || true)"
        if [ -n "$v" ] && [ "${v%%.*}" -lt 23 ]; then
            builder=(env DOCKER_BUILDKIT=1 "$client" build)
            break
        fi
    done
fi
[ ${#builder[@]} -gt 0 ] || fail "no BuildKit builder: install docker buildx (RUN --mount needs it)"
log "${builder[*]} ${build_args[*]} ."
nice "${builder[@]}" --progress=plain "${build_args[@]}" . >"$work/build.log" 2>&1 || {
    tail -30 "$work/build.log"
    fail "docker build failed (log: $work/build.log)"
}
docker image inspect rtplan:cpu -f 'rtplan:cpu {{.Id}} {{.Size}} bytes' | cut -c1-120

# --- 3. up and healthy ----------------------------------------------------------------------
health_said() { # the last line a container's health check printed
    docker inspect -f '{{if .State.Health}}{{json .State.Health.Log}}{{end}}' "$1" 2>/dev/null |
        "$PY" -c 'import json,sys; t=sys.stdin.read().strip(); l=json.loads(t) if t else []; print(l[-1]["Output"].strip().splitlines()[-1] if l and l[-1]["Output"].strip() else "-")' 2>/dev/null || echo -
}
wait_healthy() { # waits until the cpu services report healthy; fails on unhealthy or exit
    local until=$(($(date +%s) + HEALTH_TIMEOUT_S)) last=0 svc cid status states
    while :; do
        states=""
        for svc in "${SERVICES[@]}"; do
            cid="$(compose ps -q "$svc" 2>/dev/null || true)"
            status="${cid:+$(docker inspect -f '{{.State.Status}}/{{if .State.Health}}{{.State.Health.Status}}{{end}}' "$cid")}"
            states+="$svc=${status:-not-created} "
            case "$status" in
            */unhealthy | exited/* | dead/*)
                compose logs --tail=40 "$svc" || true
                fail "$svc is $status"
                ;;
            esac
        done
        case "$states" in
        "planner-cpu=running/healthy env-server-cpu=running/healthy arena-cpu=running/healthy ")
            break
            ;;
        esac
        [ "$(date +%s)" -lt "$until" ] || fail "not healthy after ${HEALTH_TIMEOUT_S} s: $states"
        if [ $(($(date +%s) - last)) -ge 60 ]; then
            cid="$(compose ps -q planner-cpu 2>/dev/null || true)"
            log "waiting: $states${cid:+| planner: $(health_said "$cid")}"
            last=$(date +%s)
        fi
        sleep 5
    done
    log "healthy: $states"
}
bring_up() { # `up -d` blocks (compose v1) until the planner is healthy: run it beside the wait
    compose up -d --no-build "${SERVICES[@]}" >>"$work/up.log" 2>&1 &
    local up_pid=$!
    wait_healthy
    wait "$up_pid" || {
        cat "$work/up.log"
        fail "compose up failed"
    }
}
step up "cpu profile up (planner serves: $GAMES); healthy: planner SERVING, env and arena /healthz"
bring_up
compose ps

# --- 4. uid ---------------------------------------------------------------------------------
step uid "the services' processes run as uid 1000"
for svc in "${SERVICES[@]}"; do
    # PID 1 is the service itself (the command runs without a shell).
    ids="$(compose exec -T "$svc" sh -c 'stat -c %u /proc/1; id -u; id -un')" ||
        fail "cannot exec into $svc"
    read -r -d '' pid1_uid exec_uid user <<<"$ids" || true
    log "$svc: PID 1 uid $pid1_uid, exec uid $exec_uid ($user)"
    if [ "$pid1_uid" != 1000 ] || [ "$exec_uid" != 1000 ]; then
        fail "$svc does not run as uid 1000"
    fi
done

# --- 5. keys --------------------------------------------------------------------------------
step keys "the env server's and the arena's commands with no key refuse to serve 0.0.0.0"
# The service's own command line without its --api-key-file: one line on stderr, exit 2.
set +e
compose run --rm --no-deps -T env-server-cpu rtplan env-server --host=0.0.0.0 --http-port=0 \
    --grpc-port=0 >"$work/no-key.log" 2>&1
rc=$?
set -e
cat "$work/no-key.log"
[ "$rc" = 2 ] || fail "the env server with no key on 0.0.0.0 exited $rc, not 2"
grep -q "refusing to serve 0.0.0.0, which is not loopback, with no key" "$work/no-key.log" ||
    fail "the env server with no key did not say why it refused"
set +e
compose run --rm --no-deps -T arena-cpu rtplan arena serve --host=0.0.0.0 --port=0 \
    --database=sqlite:////tmp/no-key.db >"$work/arena-no-key.log" 2>&1
rc=$?
set -e
cat "$work/arena-no-key.log"
[ "$rc" = 2 ] || fail "the arena with no key on 0.0.0.0 exited $rc, not 2"
grep -q "arena: refusing to serve 0.0.0.0, which is not loopback" "$work/arena-no-key.log" ||
    fail "the arena with no key did not say why it refused"

# --- 6. play --------------------------------------------------------------------------------
step play "no key 401, a wrong key 403; a recorded planner session with the key, watched"
game="${GAMES%%,*}"
[ "$game" != all ] || game=snake-rt-v0
"$PY" deploy/compose_probe.py play --http "$HTTP" --api-key-file "$keys" --game "$game" --k 2 \
    --frames 60 --out "$work/play.json" | tee "$work/play.log" || fail "the session check failed"

# --- 7. arena -------------------------------------------------------------------------------
step arena "the arena's page and API; one ranked episode made by it, played from the host"
# The probe writes the tokens it was given to a private file: step 10 searches the logs for them.
"$PY" deploy/compose_probe.py arena --arena "$ARENA" --grpc "localhost:$RTPLAN_HOST_GRPC_PORT" \
    --out "$work/arena.json" --secrets-out "$work/arena-tokens" |
    tee "$work/arena.log" || fail "the arena check failed"

# --- 8. restart -----------------------------------------------------------------------------
step restart "down (volumes kept) and up again; the replay and the arena's run are kept"
# What the containers said so far goes with them: kept for step 9's search.
compose logs --no-color --timestamps >"$work/services-first.log" 2>&1 || fail "compose logs failed"
compose down >"$work/down-restart.log" 2>&1 || fail "compose down failed"
bring_up
replay="$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['replay'])" "$work/play.json")"
compose exec -T env-server-cpu ls -ln /app/replays | grep -F "$replay" ||
    fail "$replay is not in the replays volume after the restart"
"$PY" deploy/compose_probe.py replay --http "$HTTP" --expect "$work/play.json" ||
    fail "the env server does not serve the replay after the restart"
"$PY" deploy/compose_probe.py arena-kept --arena "$ARENA" --expect "$work/arena.json" ||
    fail "the arena lost its run in the restart"

# --- 9. one rung of cpu-deploy --------------------------------------------------------------
step deploy "one short rung of the cpu-deploy profile (8 FPS, 1 episode, 60 frames)"
out=/app/results/$game/deploy-check
if ! compose run --rm -T deploy-cpu rtplan deploy --remote=http://env-server:8000 \
    --planner=planner:50051 --game="$game" --fps 8 --episodes=1 --max-frames=60 \
    --api-key-file=/run/secrets/rtplan/api_keys --out="$out" >"$work/deploy.log" 2>&1; then
    tail -30 "$work/deploy.log"
    fail "the deploy rung failed (log: $work/deploy.log)"
fi
tail -15 "$work/deploy.log"
listing="$(compose exec -T env-server-cpu sh -c "find $out -type f -exec stat -c '%u %s %n' {} +")" ||
    fail "no deploy output in the results volume at $out"
echo "$listing"
[ -n "$listing" ] || fail "the deploy rung wrote nothing under $out"
if echo "$listing" | awk '$1 != 1000 {bad=1} END {exit !bad}'; then
    fail "a deploy output file is not owned by uid 1000"
fi

# --- 10. no key or token in any log ---------------------------------------------------------
step logs "no key or token in the containers' logs; no key in the probe's output or the deploy's"
compose logs --no-color --timestamps >"$work/services.log" 2>&1 || fail "compose logs failed"
for f in services-first.log services.log; do
    for said in "rtplan env server: http on" "rtplan arena: http on"; do
        grep -q "$said" "$work/$f" || fail "'$said' is not in $f (nothing to search)"
    done
done
n=0
while read -r key; do
    case "$key" in "" | "#"*) continue ;; esac
    n=$((n + 1))
    for f in services-first.log services.log no-key.log arena-no-key.log play.log play.json \
        arena.log arena.json deploy.log; do
        if grep -qF -- "$key" "$work/$f"; then
            fail "key $n of the key file appears in $f"
        fi
    done
done <"$keys"
[ "$n" = 2 ] || fail "read $n keys from $keys, not 2"
t=0
while read -r token; do
    [ -n "$token" ] || continue
    t=$((t + 1))
    for f in services-first.log services.log; do
        if grep -qF -- "$token" "$work/$f"; then
            fail "token $t the arena's run was given (its version's, its session's) appears in $f"
        fi
    done
done <"$work/arena-tokens"
[ "$t" = 2 ] || fail "read $t tokens from the arena probe, not 2"
lines=$(cat "$work/services-first.log" "$work/services.log" | wc -l)
log "no key or token in $lines lines of container logs; no key in the probe's or deploy's files"
step down "all checks passed"
