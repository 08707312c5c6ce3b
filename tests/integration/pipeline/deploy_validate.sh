#!/usr/bin/env bash
# Validates the deployment files without a cluster or a container engine:
#   - every kustomize overlay renders (kubectl kustomize; Debian's kubernetes-client when
#     no kubectl is installed) and every object passes the Kubernetes OpenAPI schemas and
#     the project's rules (tests/js/deploy/validate-k8s.mjs);
#   - docker/docker-compose.yml passes the Compose Specification's JSON schema and the
#     stack's rules (tests/js/deploy/validate-compose.mjs), alone and with the local
#     stack's override (docker/docker-compose.local.yml) merged over it, which must set
#     no list the shipped file sets (podman-compose 1.0.3 would append it);
#   - the Dockerfile passes a small set of checks (hadolint is not packaged in Debian);
#   - broken copies of each are rejected, so the validators are known to bite.
set -euo pipefail
cd "$(dirname "$0")/../../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() {
    echo "deploy_validate: $*" >&2
    fail=1
}

if ! command -v kubectl >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ]; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            kubernetes-client >/dev/null
    else
        echo "deploy_validate: kubectl not found; install Debian's kubernetes-client" >&2
        exit 1
    fi
fi
[ -d tests/js/node_modules/kubernetes-models ] || {
    echo "deploy_validate: tests/js/node_modules missing; run tools/setup.sh" >&2
    exit 1
}

# -- Kubernetes ---------------------------------------------------------------------------
for overlay in dev prod; do
    if ! kubectl kustomize "k8s/overlays/$overlay" >"$tmp/$overlay.yaml" 2>"$tmp/$overlay.err"; then
        cat "$tmp/$overlay.err" >&2
        bad "k8s/overlays/$overlay does not render"
        continue
    fi
    node tests/js/deploy/validate-k8s.mjs "$tmp/$overlay.yaml" "$overlay" || bad "k8s/overlays/$overlay is invalid"
done
# the validators must reject broken objects
if [ -s "$tmp/dev.yaml" ]; then
    sed 's/^  replicas: 3$/  replicas: three/' "$tmp/dev.yaml" >"$tmp/broken1.yaml"
    if node tests/js/deploy/validate-k8s.mjs "$tmp/broken1.yaml" dev >/dev/null; then
        bad "validate-k8s accepted replicas: three"
    fi
    grep -v 'readOnlyRootFilesystem: true' "$tmp/dev.yaml" >"$tmp/broken2.yaml"
    if node tests/js/deploy/validate-k8s.mjs "$tmp/broken2.yaml" dev >/dev/null; then
        bad "validate-k8s accepted a writable root filesystem"
    fi
fi
if [ -s "$tmp/prod.yaml" ]; then
    printf -- '---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: leaked\nstringData:\n  k: v\n' |
        cat "$tmp/prod.yaml" - >"$tmp/broken3.yaml"
    if node tests/js/deploy/validate-k8s.mjs "$tmp/broken3.yaml" prod >/dev/null; then
        bad "validate-k8s accepted a Secret in prod"
    fi
fi

# -- docker compose -----------------------------------------------------------------------
node tests/js/deploy/validate-compose.mjs docker/docker-compose.yml || bad "docker-compose.yml is invalid"
node tests/js/deploy/validate-compose.mjs docker/docker-compose.yml \
    --override docker/docker-compose.local.yml || bad "docker-compose.local.yml over docker-compose.yml is invalid"
sed 's/condition: service_healthy/condition: service_sleepy/' docker/docker-compose.yml \
    >docker/.compose-broken.yml
if node tests/js/deploy/validate-compose.mjs docker/.compose-broken.yml >/dev/null; then
    bad "validate-compose accepted condition: service_sleepy"
fi
rm -f docker/.compose-broken.yml
for svc in worker-0 worker-1 worker-2 coordinator-1 coordinator-2 capture postgres etcd minio kafka-1 kafka-2 kafka-3; do
    grep -q "^  $svc:" docker/docker-compose.yml || bad "docker-compose.yml lacks service $svc"
done

# -- Dockerfile (hadolint is not in Debian: the rules that matter here) --------------------
df=docker/Dockerfile
grep -Eq '^FROM .* AS build' "$df" || bad "$df: no build stage"
[ "$(grep -c '^FROM ' "$df")" -ge 2 ] || bad "$df: not multi-stage"
grep -Eq '^ARG DEBIAN_IMAGE=debian:12' "$df" || bad "$df: base image is not Debian 12"
grep -Eq '^FROM [^ ]*:latest' "$df" && bad "$df: unpinned :latest base image"
last_user=$(grep -E '^USER ' "$df" | tail -n1 | awk '{print $2}')
case "$last_user" in '' | root | 0 | 0:*) bad "$df: final stage runs as root" ;; esac
grep -q '^HEALTHCHECK ' "$df" || bad "$df: no HEALTHCHECK"
grep -q '^ENTRYPOINT ' "$df" || bad "$df: no ENTRYPOINT"
if grep -E 'apt-get install' "$df" | grep -vq -- '--no-install-recommends'; then
    bad "$df: apt-get install without --no-install-recommends"
fi
# (build/image/ is what `docker/build-steps.sh install build/image` puts there for
# --build-arg BINARIES=prebuilt: made by the build, not in the repository)
while read -r src; do
    [ -e "$src" ] || bad "$df: COPY source $src does not exist"
done < <(awk '$1 == "COPY" && $2 !~ /^--/ && $2 != "." && $2 != "build/image/" { print $2 }' "$df")
grep -q '^ARG CDC_VERSION' "$df" || bad "$df: no CDC_VERSION build argument (the version to stamp)"
grep -q 'VERSION="$CDC_VERSION"' docker/build-steps.sh || bad "docker/build-steps.sh build does not stamp CDC_VERSION"
for label in title version revision; do
    grep -q "org.opencontainers.image.$label=" "$df" || bad "$df: no OCI label org.opencontainers.image.$label"
done
grep -q '^!build/image$' docker/Dockerfile.dockerignore ||
    bad "docker/Dockerfile.dockerignore does not let build/image (BINARIES=prebuilt) in"
# the local stack's server images build from Debian 12 packages
for target in postgres etcd s3rver; do
    grep -Eq "^FROM \\$\\{DEBIAN_IMAGE\\} AS $target\$" docker/local/Dockerfile ||
        bad "docker/local/Dockerfile: no $target stage on DEBIAN_IMAGE"
done

if [ "$fail" -ne 0 ]; then
    echo "deploy_validate: FAILED"
    exit 1
fi
echo "deploy_validate: ok (k8s dev+prod, compose, Dockerfile)"
