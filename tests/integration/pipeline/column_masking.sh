#!/usr/bin/env bash
# Column masking, end to end (docs/worker.md, "Column masking"): the local pipeline on
# real PostgreSQL (capture, coordinator, two workers) with a policy in allow-list mode
# over a table of personal data whose key is an e-mail address:
#   email hash (the key), name truncate 1, ssn drop, phone redact, notes null, city and
#   age keep.
# Snapshot rows, then inserts, updates, key changes and deletes of the hashed keys:
#   (1) DuckDB (through chaos/verify's reader) reads the mirror: every row as the policy
#       masks the source row (HMAC-SHA-256 computed by PostgreSQL's pgcrypto with the
#       same secret), no ssn column;
#   (3) the mirror has exactly the source's rows after updates and deletes of hashed keys.
# Allow-list: ALTER TABLE ... ADD COLUMN ssn2 text with values: held back (absent from
# the lake, counted in the workers' /status and metrics per table and column); then a
# policy of a new version names it (hash), the workers restart, the coordinator logs
# the change and records it in the table's cdc.mask-policy, later values arrive hashed
# and the earlier ones are not rewritten (null).
# A poison record of the table reaches the dead-letter topic masked too.
#   (2) Last, every byte of every file in the warehouse (data, equality deletes,
#       changelog, manifests and manifest lists inflated, metadata JSON, state
#       checkpoints; Parquet values as DuckDB decodes them, so data and dictionary pages
#       after decompression) holds none of the clear values, while the kept column's
#       values are found (the scan would see a leak).
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
tmp=$(mktemp -d)
export CHAOS_DIR=$tmp/mask CHAOS_BUILD=${CDC_BUILD_DIR:-$PWD/build}
export CHAOS_TABLES=public.people CHAOS_WORKERS=2 CHAOS_COORDINATORS=1 CHAOS_CAPTURES=1
secret="column-masking-test-secret-$$-$RANDOM"
printf '%s\n' "$secret" >"$tmp/secret"
export CDC_MASK_POLICY=$tmp/policy.json CDC_MASK_MODE=allowlist CDC_MASK_SECRET_FILE=$tmp/secret
# shellcheck source=chaos/lib.sh
. chaos/lib.sh
trap 'pipeline_down purge >/dev/null 2>&1; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT

fail() {
    echo "column_masking: $*" >&2
    tail -n 20 "$CHAOS_DIR"/procs/coordinator-0.log "$CHAOS_DIR"/procs/worker-*.log >&2 2>/dev/null
    exit 1
}
sql() { psql -X -q -v ON_ERROR_STOP=1 -d "$PIPELINE_PG_DSN" "$@"; }
check() { node tests/js/lib/masking_check.mjs "$@"; }

# policy <version> [extra rules]
policy() {
    cat >"$CDC_MASK_POLICY" <<JSON
{"version": $1, "tables": {"public.people": {
  "email": "hash", "name": {"action": "truncate", "length": 1}, "ssn": "drop",
  "phone": {"action": "redact", "value": "[redacted]"}, "notes": "null",
  "city": "keep", "age": "keep"${2:-}}}}
JSON
}
policy 1

# A bad policy stops the worker at start with status 2, naming the option and the rule.
out=$(CDC_MASK_POLICY='{"tables": {"public.people": {"ssn": "hsh"}}}' "$CHAOS_BUILD/cdc-worker" \
    --id bad --kafka 127.0.0.1:1 --tables public.people --warehouse "$tmp/none" \
    --state-dir "$tmp/none-state" 2>&1)
rc=$?
[ "$rc" = 2 ] || fail "a bad --mask-policy exited with $rc, expected 2: $out"
grep -q -- '--mask-policy.*"ssn": unknown action "hsh"' <<<"$out" || fail "the error does not name the rule: $out"

pipeline_servers_up
sql <<SQL || fail "could not create people"
CREATE EXTENSION IF NOT EXISTS pgcrypto;
CREATE TABLE public.people (email text PRIMARY KEY, name text, ssn text, phone text,
    notes text, city text, age int);
INSERT INTO public.people SELECT 'e' || g || '.clear@pii-test.example', 'Name' || g || ' Clearsurname',
    'SSN-' || g || '-7766', '+1-555-' || g || '-0199', 'Note ' || g || ': confidential',
    'City' || g, g FROM generate_series(1, 40) g;
SQL
pipeline_procs_up

# the mirror as the policy masks the source: [email hash, name, phone, notes, city, age(, ssn2)]
want_rows() {
    sql -At -v secret="$secret" <<'SQL' | jq -c 'sort'
SELECT coalesce(json_agg(json_build_array(encode(hmac(email, :'secret', 'sha256'), 'hex'),
    left(name, 1), CASE WHEN phone IS NULL THEN NULL ELSE '[redacted]' END, NULL, city, age::text
    ) ORDER BY email), '[]') FROM public.people
SQL
}
got_rows() {
    check read "$CHAOS_DIR/warehouse/public/people" |
        jq -c "[.rows[] | [.email, .name, .phone, .notes, .city, .age${1:+, .$1}]] | sort"
}
# mirror_equals <what> [jq filter appended to want]: waits until the mirror is the masked source
mirror_equals() {
    local what=$1 deadline=$((SECONDS + 150)) got want
    while :; do
        want=$(want_rows) || fail "$what: could not read the source"
        got=$(got_rows "${2:-}" 2>"$tmp/read.err")
        if [ -n "${2:-}" ]; then
            want=$(jq -c --argjson s "$(ssn2_want)" '[.[] | . + [$s[.[0]]]] | sort' <<<"$want")
        fi
        [ "$got" = "$want" ] && break
        [ "$SECONDS" -lt "$deadline" ] || fail "$what: the mirror is not the masked source:
$(diff <(jq -c '.[]' <<<"$got" 2>/dev/null) <(jq -c '.[]' <<<"$want") | head -20)
$(tail -n 5 "$tmp/read.err")"
        sleep 1
    done
    echo "$what: mirror = masked source ($(jq length <<<"$got") rows)"
}

mirror_equals snapshot
sql <<SQL || fail "changes failed"
INSERT INTO public.people SELECT 'e' || g || '.clear@pii-test.example', 'Name' || g || ' Clearsurname',
    'SSN-' || g || '-7766', CASE WHEN g % 5 = 0 THEN NULL ELSE '+1-555-' || g || '-0199' END,
    'Note ' || g || ': confidential', 'City' || g, g FROM generate_series(41, 60) g;
UPDATE public.people SET name = 'Renamed' || age || ' Clearsurname', phone = '+1-555-' || age || '-0299'
    WHERE age <= 10;
UPDATE public.people SET email = 'e' || age || '.moved@pii-test.example' WHERE age BETWEEN 11 AND 15;
DELETE FROM public.people WHERE age BETWEEN 16 AND 20;
UPDATE public.people SET age = age + 100 WHERE age BETWEEN 21 AND 25;
SQL
sql <<SQL || fail "second transaction failed"
BEGIN;
DELETE FROM public.people WHERE age = 41;
INSERT INTO public.people VALUES ('e41.clear@pii-test.example', 'Back Clearsurname', 'SSN-41b-7766',
    '+1-555-41-0399', 'Note 41b: confidential', 'City41b', 41);
UPDATE public.people SET city = 'City42x' WHERE age = 42;
DELETE FROM public.people WHERE age = 43;
COMMIT;
SQL
mirror_equals "inserts, updates, key changes and deletes"
n_src=$(sql -At -c "SELECT count(*) FROM public.people")
n_lake=$(check read "$CHAOS_DIR/warehouse/public/people" | jq '.rows | length')
[ "$n_src" = "$n_lake" ] || fail "the mirror has $n_lake rows, the source $n_src"
# (the metadata column _cdc_special aside: docs/worker.md, "Values no Iceberg type holds")
fields=$(check read "$CHAOS_DIR/warehouse/public/people" | jq -c '[.fields[] | select(startswith("_cdc_") | not)]')
[ "$fields" = '["email","name","phone","notes","city","age"]' ] ||
    fail "mirror columns: $fields (ssn must be absent)"
echo "row count after updates and deletes of hashed keys: $n_lake = source"
# the changelog is masked alike: every change once, keys hashed, no ssn
check read "$CHAOS_DIR/warehouse/public/people_changelog" >"$tmp/changelog.json" ||
    fail "could not read the changelog"
jq -e '(.fields | index("ssn") == null) and (.rows | length >= 40 + 20 + 10 + 10 + 5 + 5 + 4) and
       all(.rows[]; (.email | test("^[0-9a-f]{64}$")) and .notes == null)' "$tmp/changelog.json" >/dev/null ||
    fail "changelog not masked: $(jq -c '[.fields, (.rows | length), .rows[:2]]' "$tmp/changelog.json")"
echo "changelog: $(jq '.rows | length' "$tmp/changelog.json") changes, masked"

# ---- allow-list: a column added later is held back until the policy names it ---------------
sql <<SQL || fail "add column failed"
ALTER TABLE public.people ADD COLUMN ssn2 text;
UPDATE public.people SET ssn2 = 'SSN2-' || age || '-heldback', city = city || '-b' WHERE age <= 10;
SQL
mirror_equals "ADD COLUMN ssn2 (held back)"
# (the metadata column _cdc_special aside: docs/worker.md, "Values no Iceberg type holds")
fields=$(check read "$CHAOS_DIR/warehouse/public/people" | jq -c '[.fields[] | select(startswith("_cdc_") | not)]')
[ "$fields" = '["email","name","phone","notes","city","age"]' ] ||
    fail "an unclassified column reached the lake: $fields"
held=0
for f in "$CHAOS_DIR"/procs/worker-*.http; do
    # /metrics counts as the records pass; /status is rebuilt with the gauges, once every
    # 2 s: the two agree once it was rebuilt after the last held value
    deadline=$((SECONDS + 15))
    while :; do
        n=$(curl -fsS --max-time 5 "http://$(cat "$f")/status" |
            jq '[.masking.unclassified[] | select(.table == "public.people" and .column == "ssn2") | .values] | add // 0') ||
            fail "no /status from $(basename "$f" .http)"
        m=$(curl -fsS --max-time 5 "http://$(cat "$f")/metrics" |
            awk '/^cdc_worker_mask_unclassified_values_total\{table="public.people",column="ssn2"\}/ {print $2}')
        [ "${m:-0}" = "$n" ] && break
        [ "$SECONDS" -lt "$deadline" ] ||
            fail "$(basename "$f" .http): /metrics says ${m:-0} held values, /status $n (after 15 s)"
        sleep 0.5
    done
    held=$((held + n))
done
[ "$held" -ge 10 ] || fail "the workers count $held held-back values of ssn2, expected at least 10"
grep -q 'column \\"ssn2\\" of table \\"public.people\\" is not named by the masking policy' \
    "$CHAOS_DIR"/procs/worker-*.log || fail "no worker logged the unclassified column"
echo "ssn2 held back: absent from the lake, $held values counted in /status and /metrics"

# policy version 2 names it: a restart of the workers applies it, the committer logs it
policy 2 ', "ssn2": "hash"'
committed=$(pipeline_committed)
for ((i = 0; i < CHAOS_WORKERS; i++)); do
    proc_restart "worker-$i" || fail "could not restart worker-$i"
done
pipeline_wait_recovered "$committed" 90 || fail "the pipeline did not recover after the restart"
sql -c "UPDATE public.people SET ssn2 = 'SSN2-' || age || '-named', city = city || '-c' WHERE age <= 5" ||
    fail "update of ssn2 failed"
ssn2_want() {
    sql -At -v secret="$secret" <<'SQL'
SELECT coalesce(json_object_agg(encode(hmac(email, :'secret', 'sha256'), 'hex'),
    CASE WHEN ssn2 LIKE '%-named' THEN encode(hmac(ssn2, :'secret', 'sha256'), 'hex') END), '{}')
    FROM public.people
SQL
}
mirror_equals "policy version 2 names ssn2 (values before it stay absent)" ssn2
grep -q 'table \\"public.people\\": column masking policy 2:[0-9a-f]* replaces 1:' \
    "$CHAOS_DIR"/procs/coordinator-0.log || fail "the coordinator did not log the policy change"
hint=$(cat "$CHAOS_DIR/warehouse/public/people/metadata/version-hint.text")
jq -e '.properties["cdc.mask-policy"] | startswith("2:")' \
    "$CHAOS_DIR/warehouse/public/people/metadata/v$hint.metadata.json" >/dev/null ||
    fail "the table does not record policy version 2"
echo "policy version 2: logged by the coordinator, recorded in cdc.mask-policy"

# ---- a dead letter is masked too ----------------------------------------------------------
dlq_email=dlq.victim@pii-test.example
printf '%s\n' "{\"before\":null,\"after\":{\"email\":\"$dlq_email\",\"name\":\"Dlq Clearsurname\",\"ssn\":\"SSN-DLQ-7766\",\"phone\":\"+1-555-DLQ-0199\",\"notes\":\"Note DLQ: confidential\",\"city\":\"CityDlq\",\"age\":\"not-a-number\",\"ssn2\":\"SSN2-DLQ-clear\"},\"source\":{\"schema\":\"public\",\"table\":\"people\",\"lsn\":1},\"op\":\"c\"}" |
    kcat -P -b "$CDC_TEST_KAFKA" -t cdc.public.people -p 0 -k "{\"email\":\"$dlq_email\"}" ||
    fail "could not produce the poison record"
deadline=$((SECONDS + 60))
until kcat -C -b "$CDC_TEST_KAFKA" -t cdc.public.people.dlq -o beginning -e -q \
    -f 'KEY %k\nHEADERS %h\nVALUE %s\n' >"$tmp/dlq.txt" 2>/dev/null && grep -q '^VALUE' "$tmp/dlq.txt"; do
    [ "$SECONDS" -lt "$deadline" ] || fail "no dead letter within 60 s"
    sleep 1
done
dlq_hash=$(printf '%s' "$dlq_email" | openssl dgst -sha256 -hmac "$secret" | awk '{print $NF}')
grep -q "cdc.error.class=type_mismatch" "$tmp/dlq.txt" || fail "dead letter: $(cat "$tmp/dlq.txt")"
grep -q "withheld" "$tmp/dlq.txt" || fail "the dead letter's message quotes the value: $(cat "$tmp/dlq.txt")"
[ "$(grep -c "$dlq_hash" "$tmp/dlq.txt")" -ge 2 ] || fail "dead letter key and value not hashed: $(cat "$tmp/dlq.txt")"
grep -q '"city":"CityDlq"' "$tmp/dlq.txt" || fail "the dead letter lost its kept column: $(cat "$tmp/dlq.txt")"
for v in pii-test.example Clearsurname SSN-DLQ +1-555-DLQ confidential SSN2-DLQ; do
    ! grep -qF -- "$v" "$tmp/dlq.txt" || fail "the dead letter holds \"$v\": $(cat "$tmp/dlq.txt")"
done
echo "dead letter: masked (key and email hashed, dropped and nulled columns gone, message withheld)"

# ---- no clear value anywhere in the warehouse ----------------------------------------------
committed=$(pipeline_committed)
newer_commit() { [ "$(pipeline_committed)" -gt "$committed" ]; }
chaos_wait 60 "a commit after the last checks" newer_commit || fail "no commit after the last checks"
printf '%s\n' pii-test.example Clearsurname SSN- +1-555- confidential SSN2- >"$tmp/clear.txt"
check scan "$CHAOS_DIR/warehouse" "$tmp/clear.txt" >"$tmp/scan.json" || fail "the scan failed"
jq -e '.hits | length == 0' "$tmp/scan.json" >/dev/null ||
    fail "clear values in the warehouse: $(jq -c '.hits[:10]' "$tmp/scan.json")"
for k in 'parquet data' 'parquet equality deletes' 'parquet changelog' 'avro manifest' \
    'avro manifest list' 'metadata json' 'state checkpoint'; do
    jq -e --arg k "$k" '.files[$k] > 0' "$tmp/scan.json" >/dev/null ||
        fail "the scan saw no $k file: $(jq -c .files "$tmp/scan.json")"
done
# the kept column's values are found where masked ones would be: in decoded Parquet
# values, raw footer statistics and inflated manifest bounds (the scan sees what is there)
printf '%s\n' City >"$tmp/kept.txt"
check scan "$CHAOS_DIR/warehouse" "$tmp/kept.txt" >"$tmp/kept.json" || fail "the scan failed"
for where in parquet raw avro; do
    jq -e --arg w "$where" '[.hits[].where] | index($w) != null' "$tmp/kept.json" >/dev/null ||
        fail "the scan does not find a kept value in $where: $(jq -c '[.hits[] | .where] | unique' "$tmp/kept.json")"
done
echo "warehouse: no clear value in $(jq '[.files[]] | add' "$tmp/scan.json") files ($(jq -c .files "$tmp/scan.json"))"

# ---- a policy that does not fit a schema stops the worker that meets it -------------------
# (age is an int: it cannot be hashed); nothing of the record is written
printf '%s\n' '{"version": 3, "tables": {"public.people": {"email": "hash", "age": "hash"}}}' >"$tmp/unfit.json"
CDC_MASK_POLICY=$tmp/unfit.json CDC_MASK_MODE=denylist "$CHAOS_BUILD/cdc-worker" --id unfit \
    --job "$CDC_JOB" --etcd "$CDC_TEST_ETCD" --kafka "$CDC_TEST_KAFKA" --tables public.people \
    --warehouse "$CHAOS_DIR/warehouse" --state-dir "$tmp/unfit-state" --http 127.0.0.1:0 \
    >"$tmp/unfit.log" 2>&1 &
unfit=$!
unfit_owns() { chaos_status | jq -e '[.assignment[] | select(.owner == "unfit")] | length > 0' >/dev/null; }
chaos_wait 60 "partitions for the worker with the unfit policy" unfit_owns ||
    fail "the worker with the unfit policy got no partitions: $(tail -n 5 "$tmp/unfit.log")"
sql -c "INSERT INTO public.people (email, city, age) SELECT 'u' || g || '.clear@pii-test.example', 'CityU', g
    FROM generate_series(1, 48) g" || fail "insert failed"
deadline=$((SECONDS + 60))
while kill -0 "$unfit" 2>/dev/null; do
    [ "$SECONDS" -lt "$deadline" ] || fail "the worker with the unfit policy did not stop: $(tail -n 5 "$tmp/unfit.log")"
    sleep 0.5
done
wait "$unfit"
rc=$?
[ "$rc" = 2 ] || fail "the worker with the unfit policy exited with $rc, expected 2: $(tail -n 5 "$tmp/unfit.log")"
grep -q 'column \\"age\\" of table \\"public.people\\" (schema version [0-9]*): \\"hash\\" applies to string columns only' \
    "$tmp/unfit.log" || fail "the unfit policy's error does not name the column: $(tail -n 5 "$tmp/unfit.log")"
echo "a policy that does not fit the table's schema: the worker stopped with status 2, naming the column"
echo "column_masking: ok"
