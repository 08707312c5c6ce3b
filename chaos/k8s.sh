#!/usr/bin/env bash
# The Kubernetes backend of the chaos suite (sourced by chaos/lib.sh; CHAOS_BACKEND=k8s):
# what chaos/run.sh needs besides the faults themselves, against the dev overlay
# (k8s/overlays/dev) in namespace CHAOS_K8S_NAMESPACE (default cdc) of the current
# kubectl context:
#   k8s_check          kubectl answers and the dev overlay's pieces are there
#   k8s_load_start     the load generator Deployment at LOAD_RATE (scaled to 1)
#   k8s_load_stop      scaled back to 0, its pod gone
#   k8s_verify <s>     the verifier after a scenario: PostgreSQL and MinIO reached through
#                      kubectl port-forward, the warehouse bucket mirrored into
#                      $CHAOS_DIR/k8s-warehouse (curl with AWS SigV4), retried until the
#                      tables caught up or <s> seconds passed; prints the verifier's output
#   k8s_kill_process   kill -9 of every process of a pod but its init (tini), which then
#                      exits: the container restarts in the same pod
#   k8s_partition, k8s_heal
#                      a deny-all NetworkPolicy on one pod, and the pod labelled out of the
#                      base policy (k8s/base/networkpolicy.yaml), whose rules would
#                      otherwise still let traffic in: policies add up
# There is no cluster on the development machines: this path is checked offline only
# (tests/integration/pipeline/chaos_k8s.sh runs chaos/run.sh against a stub kubectl, the
# warehouse copy against s3rver, and a stand-in verifier, CHAOS_VERIFY).

CHAOS_K8S_PARTITION_LABEL=chaos.cdc/partitioned

_k8s() { kubectl -n "$CHAOS_K8S_NAMESPACE" "$@"; }

# Prints the value of key in Secret cdc-secrets.
_k8s_secret() {
    _k8s get secret cdc-secrets -o "jsonpath={.data.$1}" | base64 -d
}

k8s_check() {
    command -v kubectl >/dev/null 2>&1 || chaos_die "kubectl not found"
    _k8s get deployment cdc-coordinator >/dev/null ||
        chaos_die "no cdc-coordinator in namespace $CHAOS_K8S_NAMESPACE (kubectl apply -k k8s/overlays/dev)"
    local o
    for o in deployment/cdc-loadgen statefulset/postgres statefulset/minio statefulset/etcd; do
        _k8s get "$o" >/dev/null ||
            chaos_die "$o not found: the k8s backend runs against k8s/overlays/dev"
    done
}

# k8s_load_start <rate> <seed>
k8s_load_start() {
    if ! _k8s set env deployment/cdc-loadgen "CDC_RATE=$1" "CDC_SEED=$2" >/dev/null ||
        ! _k8s scale deployment/cdc-loadgen --replicas=1 >/dev/null ||
        ! _k8s rollout status deployment/cdc-loadgen --timeout=120s >/dev/null; then
        chaos_log "the load generator did not start"
    fi
}

k8s_load_stop() {
    _k8s scale deployment/cdc-loadgen --replicas=0 >/dev/null
    _k8s wait --for=delete pod -l app.kubernetes.io/name=cdc-loadgen --timeout=60s >/dev/null 2>&1 ||
        true
}

k8s_kill_process() {
    chaos_log "kill -9 of the processes of $1 (the container restarts in the same pod)"
    # kill(-1) reaches every process but init (tini, PID 1, which then exits with its
    # child) and the caller; SIGKILL to PID 1 from inside its namespace would be ignored
    _k8s exec "$1" -- sh -c 'kill -KILL -1' || true
}

k8s_partition() {
    _k8s apply -f - >/dev/null <<EOF
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: chaos-partition-$1
spec:
  podSelector:
    matchLabels:
      statefulset.kubernetes.io/pod-name: $1
  policyTypes: [Ingress, Egress]
EOF
    _k8s label pod "$1" "$CHAOS_K8S_PARTITION_LABEL=true" --overwrite >/dev/null
}

k8s_heal() {
    _k8s label pod "$1" "$CHAOS_K8S_PARTITION_LABEL-" >/dev/null 2>&1 || true
    _k8s delete networkpolicy "chaos-partition-$1" --ignore-not-found >/dev/null
}

# _k8s_forward <service> <port> <var>: kubectl port-forward in the background to a local
# port kubectl picks, written into <var>; its pid is added to K8S_FORWARDS.
K8S_FORWARDS=()
_k8s_forward() {
    local log=$CHAOS_DIR/port-forward-$1.log i port
    : >"$log"
    # kubectl itself in the background (not _k8s, whose subshell would be what $! names
    # and what a kill ends, leaving the port-forward running)
    kubectl -n "$CHAOS_K8S_NAMESPACE" port-forward "svc/$1" ":$2" >"$log" 2>&1 &
    K8S_FORWARDS+=($!)
    for ((i = 0; i < 100; i++)); do
        port=$(sed -n 's/^Forwarding from 127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$log" | head -n1)
        if [ -n "$port" ]; then
            printf -v "$3" '%s' "$port"
            return 0
        fi
        sleep 0.1
    done
    chaos_log "kubectl port-forward svc/$1 did not come up: $(tail -n1 "$log")"
    return 1
}

_k8s_forwards_stop() {
    local p
    for p in "${K8S_FORWARDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${K8S_FORWARDS[@]}"; do wait "$p" 2>/dev/null || true; done
    K8S_FORWARDS=()
}

# k8s_s3_mirror <endpoint> <bucket> <dir> <access key> <secret key>: copies every object
# of the bucket that dir lacks (or holds with another size) into dir, and every
# version-hint.text (rewritten in place by each commit). Objects are immutable otherwise.
k8s_s3_mirror() {
    local ep=$1 bucket=$2 dir=$3 auth=$4:$5 token="" list key size enc path seg
    local -a curl_s3=(curl -fsS --max-time 30 -H "x-amz-content-sha256: UNSIGNED-PAYLOAD"
        --aws-sigv4 "aws:amz:${CHAOS_S3_REGION:-us-east-1}:s3" --user "$auth")
    mkdir -p "$dir"
    while :; do
        list=$("${curl_s3[@]}" "$ep/$bucket?list-type=2&max-keys=1000${token:+&continuation-token=$(jq -rn --arg t "$token" '$t|@uri')}") ||
            return 1
        while read -r key && read -r size; do
            # XML entities (\& : bash 5.2 reads a bare & in a replacement as the match)
            key=${key//&amp;/\&}
            key=${key//&lt;/<}
            key=${key//&gt;/>}
            key=${key//&quot;/\"}
            key=${key//&apos;/\'}
            path=$dir/$key
            if [ -f "$path" ] && [ "$(stat -c %s "$path")" = "$size" ] &&
                [ "${key##*/}" != version-hint.text ]; then
                continue
            fi
            enc=""
            while IFS= read -r -d / seg; do
                enc+=$(jq -rn --arg s "$seg" '$s|@uri')/
            done <<<"$key/"
            mkdir -p "$(dirname "$path")"
            "${curl_s3[@]}" -o "$path.part" "$ep/$bucket/${enc%/}" && mv "$path.part" "$path" ||
                return 1
        done < <(grep -o '<Key>[^<]*</Key>\|<Size>[0-9]*</Size>' <<<"$list" | sed 's/<[^>]*>//g')
        token=$(grep -o '<NextContinuationToken>[^<]*</NextContinuationToken>' <<<"$list" |
            sed 's/<[^>]*>//g')
        [ -n "$token" ] || return 0
    done
}

# k8s_verify <catchup seconds>: mirrors the warehouse and runs the verifier until it
# passes or the seconds passed; prints the verifier's output (its last line the verdict).
k8s_verify() {
    local deadline=$((SECONDS + $1)) pg s3 out dir=$CHAOS_DIR/k8s-warehouse dsn ak sk
    if ! _k8s_forward postgres 5432 pg || ! _k8s_forward minio 9000 s3; then
        _k8s_forwards_stop
        echo "VERIFY FAILED lost=? duplicated=? mismatched=? (no port-forward)"
        return 1
    fi
    dsn="host=127.0.0.1 port=$pg dbname=cdc user=cdc password=$(_k8s_secret pg-password)"
    ak=$(_k8s_secret s3-access-key)
    sk=$(_k8s_secret s3-secret-key)
    while :; do
        if k8s_s3_mirror "http://127.0.0.1:$s3" warehouse "$dir" "$ak" "$sk"; then
            out=$("${CHAOS_VERIFY:-$CHAOS_ROOT/chaos/verify}" --pg "$dsn" --warehouse "$dir" \
                --namespace "$CHAOS_NAMESPACE" --path-map "s3://warehouse/=$dir/" 2>&1)
        else
            out="VERIFY FAILED lost=? duplicated=? mismatched=? (the warehouse could not be copied)"
        fi
        case "$(tail -n1 <<<"$out")" in "VERIFY ok"*) break ;; esac
        [ "$SECONDS" -lt "$deadline" ] || break
        sleep 5
    done
    _k8s_forwards_stop
    echo "$out"
    case "$(tail -n1 <<<"$out")" in "VERIFY ok"*) return 0 ;; *) return 1 ;; esac
}
