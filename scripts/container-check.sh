#!/bin/sh
# Builds the repository's Dockerfile and runs the image for real (docs/deploy.md, "Check the image"):
# a container with the simulated engine must answer /health, /ready and a chat completion on
# 127.0.0.1, run as uid 1000, and pass its own HEALTHCHECK; with CHECK_GGUF=<model.gguf>, a second
# container also answers from the embedded llama.cpp CPU build.
# Exit 0: the image works. 1: it does not (what failed is printed). 3: no container engine runs here.
#
#   npm run docker:check
#   CONTAINER_ENGINE=podman BASE_IMAGE=localhost/prefixmesh-base:node20-bookworm npm run docker:check
set -eu
cd "$(dirname "$0")/.."

LOCAL_BASE=localhost/prefixmesh-base:node20-bookworm
IMAGE=${CHECK_IMAGE:-localhost/prefixmesh:check}
NAME=prefixmesh-check-$$
fail() { echo "container-check: FAILED: $*" >&2; exit 1; }
step() { echo "container-check: $*"; }
since() { echo "$(( $(date +%s) - $1 )) s"; }

if [ -n "${CONTAINER_ENGINE:-}" ]; then ENGINE=$CONTAINER_ENGINE
elif docker info >/dev/null 2>&1; then ENGINE=docker
elif podman info >/dev/null 2>&1; then ENGINE=podman
else
  echo "container-check: no container engine runs here (docker info and podman info both failed):" \
    "install podman (apt-get install podman) or start dockerd" >&2
  exit 3
fi
command -v curl >/dev/null 2>&1 || fail "curl is missing"

# podman: crun refuses hybrid cgroup v1/v2 hosts, runc does not; the check's own limits are lowered
# so it also runs where the engine may not raise them (no CAP_SYS_RESOURCE).
ENGINE_ARGS=""
BUILD_ARGS=""
RUN_ARGS="--ulimit nofile=4096:4096 --ulimit nproc=4096:4096"
if [ "$ENGINE" = podman ]; then
  if [ -d /sys/fs/cgroup/unified ] && command -v runc >/dev/null 2>&1; then ENGINE_ARGS="--runtime runc"; fi
  # docker format: podman keeps the HEALTHCHECK only in it.
  BUILD_ARGS="--format docker --network host"
fi
E() { "$ENGINE" $ENGINE_ARGS "$@"; }

if [ -n "${BASE_IMAGE:-}" ]; then BASE=$BASE_IMAGE
elif E image inspect "$LOCAL_BASE" >/dev/null 2>&1; then BASE=$LOCAL_BASE
else BASE=node:20-bookworm-slim; fi

# One name per call: podman 4.3's `rm -f a b` removes nothing (and exits 0) when b does not exist.
cleanup() { for n in "$NAME" "$NAME-llama"; do E rm -f "$n" >/dev/null 2>&1 || true; done; }
trap cleanup EXIT

t0=$(date +%s)
step "containers: $NAME, $NAME-llama"
if ! E image inspect "$BASE" >/dev/null 2>&1; then
  E pull "$BASE" >/dev/null 2>&1 || fail "cannot pull BASE_IMAGE=$BASE (no registry access?): make a" \
    "local base with scripts/container-base.sh (docs/deploy.md, \"Check the image\")"
fi
step "building $IMAGE with $ENGINE from BASE_IMAGE=$BASE"
# shellcheck disable=SC2086
E build $BUILD_ARGS --build-arg "BASE_IMAGE=$BASE" -t "$IMAGE" . >"/tmp/$NAME-build.log" 2>&1 \
  || { tail -25 "/tmp/$NAME-build.log" >&2; fail "build (log: /tmp/$NAME-build.log)"; }
rm -f "/tmp/$NAME-build.log"
step "built in $(since "$t0")"

free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }

# Starts container $1 on a free loopback port with the node arguments that follow; prints the port.
start() {
  name=$1; shift
  port=$(free_port)
  # shellcheck disable=SC2086
  E run -d --name "$name" $RUN_ARGS -p "127.0.0.1:$port:8080" "$@" >/dev/null 2>"/tmp/$name.err" \
    || { cat "/tmp/$name.err" >&2; fail "$ENGINE run"; }
  rm -f "/tmp/$name.err"
  echo "$port"
}

# Waits up to $2 s for container $1's /ready on port $3.
wait_ready() {
  i=0
  until curl -sf -m 2 "http://127.0.0.1:$3/ready" >/dev/null 2>&1; do
    i=$((i + 1))
    if [ "$i" -gt "$2" ]; then E logs "$1" 2>&1 | tail -20 >&2; fail "$1 not ready after $2 s"; fi
    sleep 1
  done
}

# A chat completion on port $1 must be answered by node $2; prints the answer.
chat() {
  model=$(curl -sf -m 10 "http://127.0.0.1:$1/v1/models" | node -e \
    'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).data[0].id))') \
    || fail "GET /v1/models"
  body="{\"model\":\"$model\",\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a time\"}],\"max_tokens\":8}"
  answer=$(curl -sS -m 120 "http://127.0.0.1:$1/v1/chat/completions" -H 'content-type: application/json' -d "$body") \
    || fail "POST /v1/chat/completions"
  echo "$answer" | node -e '
    let s = "";
    process.stdin.on("data", (d) => (s += d)).on("end", () => {
      const a = JSON.parse(s);
      const ok = a.object === "chat.completion" && typeof a.choices?.[0]?.message?.content === "string" &&
        a.prefixmesh?.served_by === process.argv[1];
      if (!ok) { console.error(s); process.exit(1); }
      console.log(`model ${a.model}, served by ${a.prefixmesh.served_by}: ${JSON.stringify(a.choices[0].message.content)}`);
    });' "$2" || fail "unexpected chat completion"
}

t1=$(date +%s)
PORT=$(start "$NAME" "$IMAGE" node --id check --engine sim)
wait_ready "$NAME" 90 "$PORT"
step "sim node ready in $(since "$t1") on 127.0.0.1:$PORT"
health=$(curl -sf -m 5 "http://127.0.0.1:$PORT/health") || fail "GET /health"
step "/health: $health"
step "chat completion: $(chat "$PORT" check)"
uid=$(E exec "$NAME" id -u) || fail "$ENGINE exec"
[ "$uid" = 1000 ] || fail "the node runs as uid $uid, not 1000"
step "runs as uid $uid"
if [ "$ENGINE" = podman ]; then
  E healthcheck run "$NAME" >/dev/null || fail "the image's HEALTHCHECK"
  step "HEALTHCHECK passes"
else
  i=0
  until [ "$(E inspect -f '{{.State.Health.Status}}' "$NAME")" = healthy ]; do
    i=$((i + 1)); [ "$i" -le 60 ] || fail "the image's HEALTHCHECK not healthy after 60 s"; sleep 1
  done
  step "HEALTHCHECK healthy"
fi

if [ -n "${CHECK_GGUF:-}" ]; then
  [ -f "$CHECK_GGUF" ] || fail "CHECK_GGUF=$CHECK_GGUF is not a file"
  dir=$(cd "$(dirname "$CHECK_GGUF")" && pwd)
  file=$(basename "$CHECK_GGUF")
  t2=$(date +%s)
  LPORT=$(start "$NAME-llama" -v "$dir:/models:ro" "$IMAGE" node --id llama --engine llamacpp \
    --model "/models/$file" --slots 1 --slot-context 256 --threads 1)
  wait_ready "$NAME-llama" 180 "$LPORT"
  step "llama.cpp node ready in $(since "$t2")"
  step "chat completion (llama.cpp): $(chat "$LPORT" llama)"
fi
step "container check passed with $ENGINE in $(since "$t0")"
