#!/usr/bin/env bash
# The Kubernetes backend of the chaos suite (CHAOS_BACKEND=k8s chaos/run.sh, chaos/k8s.sh)
# without a cluster: kubectl is a stub that records its calls and answers like the dev
# overlay would (pods, Secrets, a leader's /status whose committed epoch advances,
# port-forwards to local servers), the warehouse bucket is served by s3rver and copied
# for real (curl with AWS SigV4), and the verifier is a stand-in that checks what it was
# handed (CHAOS_VERIFY). It checks that each scenario runs the load, injects its faults
# (a forced pod delete and a kill -9 of the pod's processes; a partition that cuts
# ingress as well as egress; etcd restarted on its volume) and gets a verdict, and that
# the run fails when a recovery does not come or the verifier fails.
set -euo pipefail
: "${CDC_TEST_TMP:?run through tests/run.sh integration}"
cd "$(dirname "$0")/../../.."
root=$PWD
dir=$(mktemp -d "$CDC_TEST_TMP/chaosk8s.XXXXXX")
s3pid=""
cleanup() {
    if [ -n "$s3pid" ]; then
        kill "$s3pid" 2>/dev/null || true
        wait "$s3pid" 2>/dev/null || true
    fi
}
trap cleanup EXIT
fail() {
    echo "FAIL: $*" >&2
    for f in "$dir"/run*.log; do
        [ -e "$f" ] || continue
        echo "--- $f" >&2
        tail -40 "$f" >&2
    done
    exit 1
}

# -- the warehouse bucket in s3rver, a table's files in it -------------------------------
(cd tests/js && exec node --input-type=module -e '
import S3rver from "s3rver";
import { writeFileSync } from "node:fs";
const dir = process.argv[1];
const s = new S3rver({ port: 0, address: "127.0.0.1", directory: dir + "/s3", silent: true,
                       configureBuckets: [{ name: "warehouse" }] });
const a = await s.run();
writeFileSync(dir + "/s3.port", String(a.port));' "$dir") &
s3pid=$!
for _ in $(seq 100); do [ -s "$dir/s3.port" ] && break; sleep 0.1; done
[ -s "$dir/s3.port" ] || fail "s3rver did not start"
s3port=$(cat "$dir/s3.port")
put() {
    printf '%s' "$2" >"$dir/object"
    curl -fsS -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" --aws-sigv4 "aws:amz:us-east-1:s3" \
        --user S3RVER:S3RVER -T "$dir/object" "http://127.0.0.1:$s3port/warehouse/$1"
}
put public/transactions/metadata/version-hint.text 3
put public/transactions/metadata/v3.metadata.json '{"format-version":2}'
put 'public/transactions/data/day%3D2026-12-03/a%20%26%20b.parquet' PAR1

# -- the stub kubectl ----------------------------------------------------------------------
mkdir -p "$dir/bin"
cat >"$dir/bin/kubectl" <<'EOF'
#!/usr/bin/env bash
# records every call; answers as the dev overlay in namespace cdc would
echo "$*" >>"$STUB_DIR/calls"
[ "${1:-}" = -n ] && shift 2
case "$1" in
get)
    case "$2" in
    pods)
        case "$4" in
        *=cdc-worker) printf 'pod/cdc-worker-%s\n' 0 1 2 ;;
        *=cdc-coordinator) printf 'pod/cdc-coordinator-%s\n' a b ;;
        *=cdc-capture) echo pod/cdc-capture-x ;;
        esac
        ;;
    secret)
        key=${5#jsonpath=\{.data.}
        key=${key%\}}
        case "$key" in
        s3-*) printf S3RVER | base64 ;; # s3rver's own credentials
        *) printf 'secret-%s' "$key" | base64 ;;
        esac
        ;;
    esac
    ;;
exec)
    if [[ "$*" == */status* ]]; then
        # the leader's /status: the committed epoch advances by STUB_STEP per call
        e=$(($(cat "$STUB_DIR/epoch" 2>/dev/null || echo 1) + $(cat "$STUB_DIR/step" 2>/dev/null || echo 1)))
        echo "$e" >"$STUB_DIR/epoch"
        printf '{"id":"cdc-coordinator-a","is_leader":true,"epochs":{"last_committed":%d},"workers":[%s]}\n' \
            "$e" '{"id":"0","alive":true},{"id":"1","alive":true},{"id":"2","alive":true}'
    fi
    ;;
port-forward)
    case "$2" in svc/postgres) p=$STUB_PG_PORT ;; svc/minio) p=$STUB_S3_PORT ;; *) exit 1 ;; esac
    echo "Forwarding from 127.0.0.1:$p -> ${3#:}"
    exec sleep 600
    ;;
apply) cat >>"$STUB_DIR/applied" ;;
esac
exit 0
EOF
chmod +x "$dir/bin/kubectl"
# the stand-in verifier: ok when it got the copied warehouse and the Secret's password
cat >"$dir/verify" <<'EOF'
#!/usr/bin/env bash
echo "verify $*" >>"$STUB_DIR/calls"
[ -f "$STUB_DIR/verify-fails" ] && { echo "VERIFY FAILED rows=10 lost=1 duplicated=0 mismatched=0"; exit 1; }
while [ $# -gt 0 ]; do
    case "$1" in --pg) pg=$2 ;; --warehouse) wh=$2 ;; esac
    shift
done
if [[ "$pg" == *"password=secret-pg-password"* ]] &&
    [ "$(cat "$wh/public/transactions/metadata/version-hint.text")" = 3 ] &&
    [ -f "$wh/public/transactions/data/day=2026-12-03/a & b.parquet" ]; then
    echo "VERIFY ok rows=10 lost=0 duplicated=0 mismatched=0"
else
    echo "VERIFY FAILED rows=0 lost=? duplicated=? mismatched=? (got $pg, $wh)"
    exit 1
fi
EOF
chmod +x "$dir/verify"

run() { # <name> <scenarios> [VAR=value...]: chaos/run.sh against the stub; its status
    local name=$1 scenarios=$2
    shift 2
    env PATH="$dir/bin:$PATH" STUB_DIR="$dir" STUB_PG_PORT=5 STUB_S3_PORT="$s3port" \
        CHAOS_BACKEND=k8s CHAOS_DIR="$dir/chaos-$name" CHAOS_VERIFY="$dir/verify" \
        CHAOS_HEARTBEAT_TIMEOUT=1 CHAOS_ETCD_DOWN=1 SEED=4242 SCENARIOS="$scenarios" "$@" \
        "$root/chaos/run.sh" >"$dir/run-$name.log" 2>&1
}

# -- every scenario recovers and verifies ----------------------------------------------------
run ok "kill-workers partition-worker pause-worker etcd-restart" DURATION=40 CATCHUP=10 ||
    fail "the run against the stub failed"
for s in kill-workers partition-worker pause-worker etcd-restart; do
    grep -Eq "^$s +[1-9][0-9]* +[1-9][0-9]* +0 +0 +0  ok$" "$dir/run-ok.log" ||
        fail "no recovered, verified row for $s"
done
grep -q '^chaos: ok$' "$dir/run-ok.log" || fail "no chaos: ok"
calls=$dir/calls
grep -Eq 'set env deployment/cdc-loadgen CDC_RATE=300 CDC_SEED=[0-9]+' "$calls" || fail "no load rate set"
[ "$(grep -c 'scale deployment/cdc-loadgen --replicas=1' "$calls")" -eq 4 ] || fail "load not started per scenario"
[ "$(grep -c 'scale deployment/cdc-loadgen --replicas=0' "$calls")" -ge 4 ] || fail "load not stopped per scenario"
[ "$(grep -c '^verify --pg' "$calls")" -eq 4 ] || fail "not one verifier run per scenario"
grep -Eq 'delete pod cdc-worker-[0-2] --grace-period=0 --force' "$calls" || fail "no forced pod delete"
grep -Eq 'exec cdc-worker-[0-2] -- sh -c kill -KILL -1' "$calls" || fail "no kill -9 of a worker pod's processes"
grep -Eq 'exec cdc-worker-[0-2] -- sh -c kill -STOP -1' "$calls" || fail "no pause"
grep -Eq 'exec cdc-worker-[0-2] -- sh -c kill -CONT -1' "$calls" || fail "no resume"
# the partition: a deny-all policy for both directions, and the pod out of the base policy
grep -q 'policyTypes: \[Ingress, Egress\]' "$dir/applied" || fail "the partition policy does not cut both ways"
p=$(sed -n 's/.*label pod \(cdc-worker-[0-2]\) chaos.cdc\/partitioned=true.*/\1/p' "$calls")
[ -n "$p" ] || fail "the partitioned pod was not labelled out of the base policy"
grep -q "label pod $p chaos.cdc/partitioned-" "$calls" || fail "the partition label was not removed"
grep -q "delete networkpolicy chaos-partition-$p" "$calls" || fail "the partition policy was not deleted"
grep -q 'chaos.cdc/partitioned' k8s/base/networkpolicy.yaml || fail "the base policy does not leave partitioned pods out"
grep -q 'delete pod -l app.kubernetes.io/name=etcd' "$calls" || fail "etcd not restarted"
grep -q 'rollout status statefulset/etcd' "$calls" || fail "no wait for etcd to come back"

# -- a verifier failure fails the run ----------------------------------------------------------
touch "$dir/verify-fails"
if run verify etcd-restart DURATION=10 CATCHUP=0; then fail "a failed verification passed"; fi
grep -Eq '^etcd-restart .* FAILED$' "$dir/run-verify.log" || fail "no FAILED verdict for the scenario"
rm -f "$dir/verify-fails"

# -- a recovery that never comes fails the run -------------------------------------------------
echo 0 >"$dir/step" # the committed epoch stands still
if run stuck partition-worker DURATION=10 CATCHUP=0 CHAOS_RECOVERY_TIMEOUT=2; then
    fail "a scenario without recovery passed"
fi
grep -Eq '^partition-worker +1 +0 ' "$dir/run-stuck.log" || fail "the missing recovery is not in the table"
grep -q 'chaos: FAILED' "$dir/run-stuck.log" || fail "no chaos: FAILED"
# every port-forward was ended (the stub's execs its sleep in kubectl's place)
for p in $(pgrep -f "^sleep 600$" || true); do
    if grep -qx "STUB_DIR=$dir" <<<"$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null)"; then
        kill "$p"
        echo "left running: a port-forward" >"$dir/leftover"
    fi
done
[ ! -e "$dir/leftover" ] || fail "a kubectl port-forward was left running"
echo "chaos_k8s: ok"
