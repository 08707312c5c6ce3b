#!/usr/bin/env bash
# `make compose-test`: the pipeline as containers, under load and faults, verified. On a
# Debian 12 machine that reaches no image registry, with podman and podman-compose:
#   1. setup what is missing: podman, podman-compose, runc, mmdebstrap (apt-get);
#      /etc/containers/containers.conf (runtime runc: crun fails on this kernel's cgroup
#      layout; ulimits); the base image localhost/debian:12 (mmdebstrap, kept once built);
#   2. images: the project's (docker/Dockerfile, with --format docker so that the
#      HEALTHCHECK stays) and the servers' (docker/local/Dockerfile: PostgreSQL 15, etcd 3.4,
#      s3rver), all on localhost/debian:12;
#   3. the image: every program answers --version and --help without configuration, with
#      the stamped version, which the OCI labels carry too;
#   4. up: docker/docker-compose.yml with docker/docker-compose.local.yml (the development
#      broker, s3rver) as project cdctest-<hash of the checkout's path> (COMPOSE_PROJECT),
#      with the project image localhost/cdc:<project>: PostgreSQL, etcd, the broker, S3, two
#      coordinators, capture and 3 workers; waits for a leader with 3 live workers and a
#      commit, and for every health check (they present the stack's certificates); checks
#      that the stack is encrypted: the leader record names a tls+tcp:// endpoint, the
#      published admin and etcd ports answer https with the certificates and refuse plain
#      http (the admin port also https without a client certificate);
#   5. chaos/run.sh against the containers (CHAOS_BACKEND=compose): per scenario, load from
#      the stack's loadgen service, the faults, the verifier; the fault / recovery / lost /
#      duplicated / mismatched table;
#   6. down, volumes and data removed (COMPOSE_KEEP=1 keeps the stack up).
# Exits non-zero when a step fails, a scenario did not recover, or the verifier found a
# record lost, duplicated or mismatched. Where containers cannot run, it fails: it never
# skips.
#   docker/compose-test.sh           the long form: the image compiled by docker/Dockerfile,
#                                    SCENARIOS (default: kill-workers pause-worker
#                                    partition-worker kill-leader kill-capture sigterm
#                                    double-fault etcd-restart), 30 s each
#   docker/compose-test.sh --short   CI's form (make test, tests/integration/pipeline/
#                                    compose_short.sh): the host's binaries copied into the
#                                    image, kill-workers and pause-worker, 20 s each
# Environment: COMPOSE_BINARIES=build|prebuilt (how the image gets its binaries), SCENARIOS,
# DURATION (seconds for all scenarios), LOAD_RATE (default 200/s), SEED, COMPOSE_KEEP=1,
# COMPOSE_PROJECT.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD

short=0
case "${1:-}" in
--short) short=1 ;;
"") ;;
*)
    echo "usage: docker/compose-test.sh [--short]" >&2
    exit 2
    ;;
esac

log() { printf '%s compose-test: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() {
    log "error: $*"
    exit 1
}

if [ "$(id -u)" -ne 0 ]; then
    # podman runs rootful here (pause, network disconnect, runc): root or sudo
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        exec sudo -E "$0" "$@"
    fi
    die "needs root (or password-less sudo) to install and run podman"
fi

# one project and project image per checkout: two checkouts on one machine (make test in
# two worktrees) run side by side; the base and server images are shared
PROJECT=${COMPOSE_PROJECT:-cdctest-$(printf '%s' "$ROOT" | sha1sum | cut -c1-8)}
RUN=$ROOT/.run/compose
BASE_IMAGE=localhost/debian:12
export CDC_IMAGE=localhost/cdc:$PROJECT
export CDC_LOCAL_POSTGRES_IMAGE=localhost/cdc-postgres:15
export CDC_LOCAL_ETCD_IMAGE=localhost/cdc-etcd:3.4
export CDC_LOCAL_S3_IMAGE=localhost/cdc-s3rver:3.7.1
COMPOSE=(podman-compose -p "$PROJECT" -f docker/docker-compose.yml -f docker/docker-compose.local.yml)
SERVICES=(postgres etcd kafka s3 capture coordinator-1 coordinator-2 worker-0 worker-1 worker-2)
if [ "$short" = 1 ]; then
    BINARIES=${COMPOSE_BINARIES:-prebuilt}
    SCENARIOS=${SCENARIOS:-kill-workers pause-worker}
    per_scenario=20
else
    BINARIES=${COMPOSE_BINARIES:-build}
    SCENARIOS=${SCENARIOS:-kill-workers pause-worker partition-worker kill-leader kill-capture sigterm double-fault etcd-restart}
    per_scenario=30
fi
read -r -a scenario_list <<<"$SCENARIOS"
DURATION=${DURATION:-$((per_scenario * ${#scenario_list[@]}))}

timings=()
step_start=$SECONDS
step() {
    timings+=("$1 $((SECONDS - step_start))s")
    step_start=$SECONDS
}
started=$SECONDS

# ---- 1. setup ---------------------------------------------------------------------------

setup_packages() {
    local p missing=()
    for p in podman podman-compose runc mmdebstrap; do
        grep -q "install ok installed" <<<"$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" ||
            missing+=("$p")
    done
    [ "${#missing[@]}" -eq 0 ] && return 0
    log "installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >"$RUN/apt.log" 2>&1 ||
        {
            tail -n 20 "$RUN/apt.log" >&2
            die "could not install ${missing[*]}"
        }
}

# crun (podman's default runtime) fails on this kernel's cgroup layout; runc works. The
# ulimits are the ones the pipeline's processes need (RocksDB files, threads).
setup_containers_conf() {
    local f=/etc/containers/containers.conf
    if [ -f "$f" ] && grep -Eq '^[[:space:]]*runtime[[:space:]]*=[[:space:]]*"runc"' "$f" &&
        grep -q 'nofile=20000:20000' "$f" && grep -q 'nproc=4096:4096' "$f"; then
        return 0
    fi
    if [ -f "$f" ]; then
        cp "$f" "$f.before-compose-test"
        log "$f lacks runtime runc or the ulimits: rewritten (the old one is $f.before-compose-test)"
    fi
    mkdir -p /etc/containers
    cat >"$f" <<'EOF'
# Written by the cdc project's docker/compose-test.sh (make compose-test): crun fails on
# this kernel's cgroup layout, runc works; ulimits for the pipeline's processes.
[engine]
runtime = "runc"

[containers]
default_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]
EOF
}

# No registry serves images here: the Debian 12 base comes from Debian's packages.
setup_base_image() {
    podman image exists "$BASE_IMAGE" && return 0
    log "building $BASE_IMAGE with mmdebstrap (minbase bookworm)"
    mmdebstrap --variant=minbase bookworm "$RUN/rootfs.tar" >"$RUN/mmdebstrap.log" 2>&1 || {
        tail -n 20 "$RUN/mmdebstrap.log" >&2
        die "mmdebstrap failed"
    }
    podman import "$RUN/rootfs.tar" "$BASE_IMAGE" >/dev/null || die "podman import failed"
    rm -f "$RUN/rootfs.tar"
}

# ---- 2. images --------------------------------------------------------------------------

build_image() {
    local tag=$1 logname=$2
    shift 2
    podman build --format docker --build-arg DEBIAN_IMAGE="$BASE_IMAGE" -t "$tag" "$@" \
        >"$RUN/build-$logname.log" 2>&1 || {
        tail -n 30 "$RUN/build-$logname.log" >&2
        die "could not build $tag (log: $RUN/build-$logname.log)"
    }
}

build_images() {
    local stamp want
    case "$BINARIES" in
    prebuilt)
        # the binaries of this machine's build (Debian 12 too), installed as the image does
        make --no-print-directory -j"$(nproc)" bins >"$RUN/make.log" 2>&1 || {
            tail -n 30 "$RUN/make.log" >&2
            die "make bins failed"
        }
        rm -rf build/image
        docker/build-steps.sh install build/image build 2>/dev/null || die "could not install the binaries into build/image"
        VERSION=$(build/cdc-worker --version | awk '{ print $2 }')
        ;;
    build) VERSION=$(git describe --always --dirty 2>/dev/null || echo dev) ;;
    *) die "COMPOSE_BINARIES must be build or prebuilt, not \"$BINARIES\"" ;;
    esac
    REVISION=$(git rev-parse HEAD 2>/dev/null || echo unknown)
    log "image $CDC_IMAGE: binaries $BINARIES, version $VERSION"
    build_image "$CDC_IMAGE" cdc --ignorefile docker/Dockerfile.dockerignore -f docker/Dockerfile \
        --build-arg BINARIES="$BINARIES" --build-arg CDC_VERSION="$VERSION" \
        --build-arg CDC_REVISION="$REVISION" .

    # s3rver's modules, pinned by its lock file, reinstalled when the lock changes
    stamp=docker/local/s3rver/node_modules/.lock-hash
    want=$(sha256sum docker/local/s3rver/package-lock.json | cut -d' ' -f1)
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        (cd docker/local/s3rver && npm ci --omit=dev --no-audit --no-fund --prefer-offline \
            --loglevel=error) >"$RUN/npm.log" 2>&1 || {
            cat "$RUN/npm.log" >&2
            die "npm ci of docker/local/s3rver failed"
        }
        echo "$want" >"$stamp"
    fi
    build_image "$CDC_LOCAL_POSTGRES_IMAGE" postgres -f docker/local/Dockerfile --target postgres docker/local
    build_image "$CDC_LOCAL_ETCD_IMAGE" etcd -f docker/local/Dockerfile --target etcd docker/local
    build_image "$CDC_LOCAL_S3_IMAGE" s3rver -f docker/local/Dockerfile --target s3rver docker/local
}

# ---- 3. the image -----------------------------------------------------------------------

check_image() {
    local prog cmd flag out label bad=0
    while IFS= read -r prog; do
        cmd=${prog#cdc-}
        for flag in --version --help; do
            # no CDC_ID, no configuration; a host name without a pod ordinal
            if ! out=$(podman run --rm --no-healthcheck --hostname compose-check "$CDC_IMAGE" \
                "$cmd" "$flag" 2>&1); then
                log "$CDC_IMAGE $cmd $flag failed: $out"
                bad=1
            elif [ "$flag" = --version ] && [ "$out" != "$prog $VERSION" ]; then
                log "$CDC_IMAGE $cmd --version printed \"$out\", want \"$prog $VERSION\""
                bad=1
            fi
        done
    done < <(docker/build-steps.sh binaries)
    for label in version:"$VERSION" revision:"$REVISION"; do
        out=$(podman image inspect -f "{{index .Config.Labels \"org.opencontainers.image.${label%%:*}\"}}" "$CDC_IMAGE")
        if [ "$out" != "${label#*:}" ]; then
            log "label org.opencontainers.image.${label%%:*} is \"$out\", want \"${label#*:}\""
            bad=1
        fi
    done
    out=$(podman image inspect -f '{{json .HealthCheck}}' "$CDC_IMAGE")
    case "$out" in *healthz*) ;; *)
        log "$CDC_IMAGE has no HEALTHCHECK on /healthz (built without --format docker?): $out"
        bad=1
        ;;
    esac
    [ "$bad" -eq 0 ] || die "the image does not pass its checks"
    log "image ok: every program answers --version ($VERSION) and --help without configuration; OCI labels; HEALTHCHECK"
}

# ---- 4. up ------------------------------------------------------------------------------

down() {
    local ids vols=()
    # the anonymous volumes too (the images' VOLUMEs), which `down -v` leaves behind
    mapfile -t ids < <(podman ps -aq --filter "label=io.podman.compose.project=$PROJECT")
    if [ "${#ids[@]}" -gt 0 ]; then
        read -r -a vols <<<"$(podman inspect -f '{{range .Mounts}}{{if eq .Type "volume"}}{{.Name}} {{end}}{{end}}' "${ids[@]}" | tr '\n' ' ')"
    fi
    "${COMPOSE[@]}" down -v -t 5 >>"$RUN/compose.log" 2>&1
    # and the volumes of a stack that podman-compose no longer knows (an interrupted run)
    mapfile -t -O "${#vols[@]}" vols < <(podman volume ls -q --filter "label=io.podman.compose.project=$PROJECT")
    [ "${#vols[@]}" -eq 0 ] || podman volume rm -f "${vols[@]}" >/dev/null 2>&1
}

# Runs every service's health check once (podman runs them on systemd timers, absent
# here); UNHEALTHY names the ones that failed.
healthy() {
    local s id
    UNHEALTHY=
    for s in "${SERVICES[@]}"; do
        id=$(podman ps -q --filter "label=com.docker.compose.project=$PROJECT" \
            --filter "label=com.docker.compose.service=$s")
        if [ -z "$id" ] || ! podman healthcheck run "$id" >/dev/null 2>&1; then
            UNHEALTHY="$UNHEALTHY $s"
        fi
    done
    [ -z "$UNHEALTHY" ]
}

# The stack is encrypted by default (docs/security.md, "Encrypted by default").
encrypted() {
    local s=$COMPOSE_SECRETS_DIR admin=127.0.0.1:$COORDINATOR_1_PORT etcd=127.0.0.1:$ETCD_PORT leader
    local good=(--cacert "$s/ca.crt" --cert "$s/node.crt" --key "$s/node.key")
    curl -fsS --max-time 3 -o /dev/null "${good[@]}" "https://$admin/healthz" ||
        die "coordinator-1's admin port did not answer https with the stack's certificates"
    curl -fsS --max-time 3 -o /dev/null "http://$admin/healthz" 2>/dev/null &&
        die "coordinator-1's admin port answered plain http://"
    curl -fsS --max-time 3 -o /dev/null --cacert "$s/ca.crt" "https://$admin/healthz" 2>/dev/null &&
        die "coordinator-1's admin port answered https without a client certificate"
    curl -fsS --max-time 3 -o /dev/null "http://$etcd/health" 2>/dev/null && die "etcd answered plain http://"
    leader=$(curl -fsS --max-time 3 "${good[@]}" -X POST \
        -d "{\"key\":\"$(printf '/cdc/%s/leader' "${CDC_JOB:-demo}" | base64 -w0)\"}" \
        "https://$etcd/v3/kv/range" | jq -r '.kvs[0].value // empty' | base64 -d) ||
        die "could not read the leader record from etcd over https with the stack's certificates"
    case "$(jq -r '.endpoint // empty' <<<"$leader" 2>/dev/null)" in
    tls+tcp://*) ;;
    *) die "the leader's endpoint is not tls+tcp://: $leader" ;;
    esac
    log "encrypted: the leader on $(jq -r .endpoint <<<"$leader"); admin and etcd ports https only, client certificates required"
}

up() {
    local p
    # shellcheck source=tests/harness/harness.sh
    . tests/harness/harness.sh
    for p in POSTGRES_PORT ETCD_PORT COORDINATOR_1_PORT COORDINATOR_2_PORT; do
        export "$p=$(harness_free_port)"
    done
    down
    rm -rf "$RUN/chaos"
    # authentication and TLS on: the compose secrets' files (docker/docker-compose.yml,
    # tools/auth-files.sh's cdc_compose_secrets), readable by the containers' user;
    # exported for cdcctl and curl on this host too
    export COMPOSE_SECRETS_DIR=$RUN/secrets
    cdc_compose_secrets "$COMPOSE_SECRETS_DIR" ||
        die "could not write the secrets and certificates into $COMPOSE_SECRETS_DIR"
    log "up: ${SERVICES[*]} (project $PROJECT; PostgreSQL on 127.0.0.1:$POSTGRES_PORT)"
    "${COMPOSE[@]}" up -d --no-build "${SERVICES[@]}" >>"$RUN/compose.log" 2>&1 || {
        tail -n 30 "$RUN/compose.log" >&2
        die "podman-compose up failed"
    }
    chaos_wait 180 "a leader with 3 live workers and a commit" pipeline_ready || {
        podman ps -a --filter "label=io.podman.compose.project=$PROJECT" >&2
        die "the stack did not come up (logs: podman logs ${PROJECT}_<service>_1)"
    }
    chaos_wait 120 "every health check" healthy || die "health check failing:$UNHEALTHY"
    encrypted
    # s3rver's objects, for the verifier (chaos/s3export.mjs)
    CHAOS_S3_DIR=$(podman volume inspect -f '{{.Mountpoint}}' "${PROJECT}_s3data") ||
        die "no volume ${PROJECT}_s3data"
    export CHAOS_S3_DIR
    log "stack up: a leader with 3 live workers, every health check passes"
}

# ---- run --------------------------------------------------------------------------------

mkdir -p "$RUN"
export CHAOS_BACKEND=compose CHAOS_ENGINE=podman CHAOS_COMPOSE_PROJECT=$PROJECT \
    CHAOS_COMPOSE="${COMPOSE[*]}" CHAOS_DIR=$RUN/chaos
# shellcheck source=chaos/lib.sh
. chaos/lib.sh

cleanup() {
    if [ "${COMPOSE_KEEP:-0}" = 1 ]; then
        log "COMPOSE_KEEP=1: the stack stays up (${COMPOSE[*]} down -v)"
    elif [ "${stack_up:-0}" = 1 ]; then
        down
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "$([ "$short" = 1 ] && echo short || echo long) form: binaries $BINARIES, scenarios: $SCENARIOS (${DURATION}s)"
setup_packages
command -v podman >/dev/null && command -v podman-compose >/dev/null || die "podman is not installed"
setup_containers_conf
setup_base_image
podman run --rm "$BASE_IMAGE" true >"$RUN/podman-run.log" 2>&1 || {
    cat "$RUN/podman-run.log" >&2
    die "a container does not run here (podman run $BASE_IMAGE true failed)"
}
step setup
build_images
step images
check_image
step check
stack_up=1
up
step up
rc=0
# chaos/run.sh not under a build/launch of its own (LAUNCH_PID set): a container it starts
# again (podman start) has its conmon adopted by the nearest subreaper, and a launch that
# waits for everything under it to end would wait for the stack, which outlives the
# scenarios until `down` below
DURATION=$DURATION LOAD_RATE=${LOAD_RATE:-200} SCENARIOS=$SCENARIOS CATCHUP=${CATCHUP:-120} \
    LAUNCH_PID=${LAUNCH_PID:-$$} chaos/run.sh || rc=1
step chaos
if [ "${COMPOSE_KEEP:-0}" != 1 ]; then
    down
    stack_up=0
fi
step down
log "timings: ${timings[*]}, total $((SECONDS - started))s"
if [ "$rc" -ne 0 ]; then
    log "FAILED"
    exit 1
fi
log "ok"
