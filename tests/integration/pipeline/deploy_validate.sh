#!/usr/bin/env bash
# Validates the deployment files without a cluster or a container engine:
#   - every kustomize overlay renders with `kubectl kustomize` (kustomize v4 or later:
#     the kubectl of this machine kind, 1.32 with kustomize 5; Debian 12's
#     kubernetes-client 1.20 embeds kustomize 2, which knows none of labels, patches,
#     replacements and components) with nothing on stderr, so no deprecated field, and
#     every object passes the Kubernetes OpenAPI schemas and the project's rules
#     (tests/js/deploy/validate-k8s.mjs); the coordinators' expected worker count follows
#     the StatefulSet when an overlay scales it;
#   - the alerting rules of the PrometheusRule pass `promtool check rules` and the alert
#     tests in tests/data/prometheus (`promtool test rules`; Debian's prometheus package,
#     installed here when missing);
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

kustomize_major=$(kubectl version --client 2>/dev/null | sed -n 's/^Kustomize Version: v\([0-9]*\).*/\1/p')
if [ "${kustomize_major:-0}" -lt 4 ]; then
    echo "deploy_validate: needs kubectl with kustomize v4 or later (found:" \
        "$(kubectl version --client 2>&1 | head -n2 | tr '\n' ' '))" >&2
    echo "hint: this machine kind ships kubectl 1.32 in /usr/bin; Debian 12's" \
        "kubernetes-client (kustomize 2) cannot render k8s/" >&2
    exit 1
fi
if ! command -v promtool >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ]; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            prometheus >/dev/null
    else
        echo "deploy_validate: promtool not found; install Debian's prometheus package" >&2
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
    if [ -s "$tmp/$overlay.err" ]; then # deprecation warnings
        cat "$tmp/$overlay.err" >&2
        bad "k8s/overlays/$overlay renders with warnings"
    fi
    node tests/js/deploy/validate-k8s.mjs "$tmp/$overlay.yaml" "$overlay" || bad "k8s/overlays/$overlay is invalid"
done
# prod (docs/security.md, "TLS"): no secret in an environment variable, the pipeline's own
# channels over TLS, and egress limited by a NetworkPolicy
if [ -s "$tmp/prod.yaml" ]; then
    ! grep -n "secretKeyRef" "$tmp/prod.yaml" >&2 ||
        bad "k8s/overlays/prod puts a secret in an environment variable (mount it as a file)"
    for want in "tls+tcp://0.0.0.0:7000" "CDC_HTTP_TLS" "CDC_TLS_CERT_FILE" "CDC_ETCD_CERT_FILE" \
        "CDC_KAFKA_PROPERTIES_FILE" "CDC_S3_SECRET_KEY_FILE" "scheme: HTTPS" "Egress"; do
        grep -qF -- "$want" "$tmp/prod.yaml" || bad "k8s/overlays/prod has no $want"
    done
    grep -q "CDC_ETCD: https://" "$tmp/prod.yaml" ||
        bad "k8s/overlays/prod's etcd endpoints are not https://"
fi
# the warning check bites: a copy of the tree with a deprecated field
cp -r k8s "$tmp/k8s"
sed -i '/^labels:$/,/includeSelectors: true$/c\commonLabels:\n  app.kubernetes.io/part-of: cdc' \
    "$tmp/k8s/base/kustomization.yaml"
kubectl kustomize "$tmp/k8s/overlays/dev" >/dev/null 2>"$tmp/deprecated.err" || true
grep -q "'commonLabels' is deprecated" "$tmp/deprecated.err" ||
    bad "a kustomization with commonLabels rendered without a deprecation warning"
# the expected worker count follows the StatefulSet: the prod overlay scaled by a patch
rm -rf "$tmp/k8s" && cp -r k8s "$tmp/k8s"
printf 'apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: cdc-worker\nspec:\n  replicas: 7\n' \
    >"$tmp/k8s/overlays/prod/scale.yaml"
sed -i 's|^  - path: secure.yaml$|&\n  - path: scale.yaml|; /^replicas:$/,/count: 3$/d' \
    "$tmp/k8s/overlays/prod/kustomization.yaml"
if kubectl kustomize "$tmp/k8s/overlays/prod" >"$tmp/scaled.yaml" 2>/dev/null; then
    grep -q 'value: "7"' <<<"$(grep -A1 'name: CDC_EXPECTED_WORKERS' "$tmp/scaled.yaml")" ||
        bad "CDC_EXPECTED_WORKERS did not follow the StatefulSet scaled to 7"
else
    bad "the prod overlay scaled to 7 workers does not render"
fi

# -- alerting rules -----------------------------------------------------------------------
if [ -s "$tmp/prod.yaml" ]; then
    mkdir -p "$tmp/rules"
    if node tests/js/deploy/rules.mjs "$tmp/prod.yaml" >"$tmp/rules/cdc_rules.yaml"; then
        promtool check rules "$tmp/rules/cdc_rules.yaml" >"$tmp/rules.out" 2>&1 ||
            { cat "$tmp/rules.out" >&2; bad "promtool check rules failed"; }
        cp tests/data/prometheus/cdc_alerts_test.yaml "$tmp/rules/"
        (cd "$tmp/rules" && promtool test rules cdc_alerts_test.yaml) >"$tmp/rules.out" 2>&1 ||
            { cat "$tmp/rules.out" >&2; bad "promtool test rules failed"; }
        # every alert has a test that expects it to fire
        for a in $(sed -n 's/^ *- alert: *//p' "$tmp/rules/cdc_rules.yaml"); do
            grep -A3 "alertname: $a\$" tests/data/prometheus/cdc_alerts_test.yaml |
                grep -q 'exp_labels' || bad "alert $a has no promtool test in which it fires"
        done
    else
        bad "no alerting rules in k8s/overlays/prod"
    fi
fi
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
    sed 's|image: cdc:dev$|image: cdc:latest|' "$tmp/dev.yaml" >"$tmp/broken4.yaml"
    if node tests/js/deploy/validate-k8s.mjs "$tmp/broken4.yaml" dev >/dev/null; then
        bad "validate-k8s accepted an image tagged latest"
    fi
fi
if [ -s "$tmp/prod.yaml" ]; then
    printf -- '---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: leaked\nstringData:\n  k: v\n' |
        cat "$tmp/prod.yaml" - >"$tmp/broken3.yaml"
    if node tests/js/deploy/validate-k8s.mjs "$tmp/broken3.yaml" prod >/dev/null; then
        bad "validate-k8s accepted a Secret in prod"
    fi
    # a worker count the coordinators do not expect (scaled by hand in the output)
    sed 's/^  replicas: 3$/  replicas: 4/' "$tmp/prod.yaml" >"$tmp/broken5.yaml"
    if node tests/js/deploy/validate-k8s.mjs "$tmp/broken5.yaml" prod >/dev/null; then
        bad "validate-k8s accepted CDC_EXPECTED_WORKERS out of step with the workers"
    fi
    # verify-full without the CA mounted; a Kafka password in clear
    sed 's| sslrootcert=[^ ]*||' "$tmp/prod.yaml" >"$tmp/broken6.yaml"
    if node tests/js/deploy/validate-k8s.mjs "$tmp/broken6.yaml" prod >/dev/null; then
        bad "validate-k8s accepted sslmode=verify-full without sslrootcert"
    fi
    # (prod reads the properties from a mounted file: put them back in an env value)
    sed 's|value: /etc/cdc/secrets/kafka-properties|value: security.protocol=SASL_SSL;sasl.password=hunter2|' \
        "$tmp/prod.yaml" >"$tmp/broken7.yaml"
    if node tests/js/deploy/validate-k8s.mjs "$tmp/broken7.yaml" prod >/dev/null; then
        bad "validate-k8s accepted a Kafka password in clear"
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
if grep -E 'apt-get install' "$df" | grep -v -- '--no-install-recommends' >&2; then
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
echo "deploy_validate: ok (k8s dev+prod, alerting rules, compose, Dockerfile)"
