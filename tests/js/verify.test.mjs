// Tests chaos/verify, the exactly-once verifier, on Iceberg tables built here from a
// real PostgreSQL workload (the load generator against the harness's server): a correct
// warehouse must pass; a missing row, a duplicated change, a wrong value and a lost change
// must each fail with the right count. Tables are written independently of the project's
// Iceberg library: Parquet by DuckDB (with field ids), manifests by icebird's Avro writer,
// metadata JSON by hand; the mirror uses an equality delete so delete handling is tested.
// Needs CDC_TEST_PG_DSN and CDC_BUILD_DIR (tests/run.sh integration).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DuckDBInstance } from '@duckdb/node-api';
import { avroWrite } from 'icebird';
import { ByteWriter } from 'hyparquet-writer'; // icebird's own writer dependency

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const baseDsn = process.env.CDC_TEST_PG_DSN;
const buildDir = process.env.CDC_BUILD_DIR ?? path.join(root, 'build');
const dbName = `verify_test_${process.pid}`;
const dsn = `${baseDsn} dbname=${dbName}`;
let tmp;
let conn;

const psql = (d, sql) => execFileSync('psql', ['-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-d', d, '-c', sql],
  { encoding: 'utf8', env: { ...process.env, PGTZ: 'UTC' }, maxBuffer: 1 << 28 });
const q = (s) => `'${String(s).replaceAll("'", "''")}'`;
const ident = (s) => `"${String(s).replaceAll('"', '""')}"`;

function icebergType(pg) {
  if (pg === 'bigint') return 'long';
  if (pg === 'integer') return 'int';
  if (pg === 'boolean') return 'boolean';
  if (pg === 'double precision') return 'double';
  if (pg === 'date') return 'date';
  if (pg.startsWith('timestamp') && pg.includes('with time zone')) return 'timestamptz';
  const m = pg.match(/^numeric\((\d+),(\d+)\)$/);
  if (m) return `decimal(${m[1]}, ${m[2]})`;
  return 'string';
}
function duckType(t) {
  return { long: 'BIGINT', int: 'INTEGER', boolean: 'BOOLEAN', double: 'DOUBLE', date: 'DATE',
    timestamptz: 'TIMESTAMPTZ', string: 'VARCHAR' }[t] ?? t.replace('decimal', 'DECIMAL');
}

function sourceColumns(table) {
  return psql(dsn, `SELECT column_name || '|' || format_type(atttypid, atttypmod)
      FROM information_schema.columns c JOIN pg_attribute a
        ON a.attrelid = ('public.' || c.table_name)::regclass AND a.attname = c.column_name
      WHERE c.table_schema = 'public' AND c.table_name = ${q(table)} ORDER BY c.ordinal_position`)
    .trim().split('\n').map((l) => {
      const [name, pg] = l.split('|');
      return { name, type: icebergType(pg) };
    });
}

/** Writes rows (objects of JSON values) as Parquet with Iceberg field ids; returns size. */
async function writeParquet(file, fields, rows) {
  const jsonl = `${file}.jsonl`;
  fs.writeFileSync(jsonl, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
  const cols = fields.map((f) => `${q(f.name)}: 'VARCHAR'`).join(', ');
  const sel = fields.map((f) => `CAST(${ident(f.name)} AS ${duckType(f.type)}) AS ${ident(f.name)}`).join(', ');
  const ids = fields.map((f) => `${ident(f.name)}: ${f.id}`).join(', ');
  const src = rows.length
    ? `read_json(${q(jsonl)}, format = 'newline_delimited', columns = {${cols}})`
    : `(SELECT ${fields.map((f) => `NULL::VARCHAR AS ${ident(f.name)}`).join(', ')} LIMIT 0)`;
  await conn.run(`COPY (SELECT ${sel} FROM ${src}) TO ${q(file)} (FORMAT parquet, FIELD_IDS {${ids}})`);
  fs.rmSync(jsonl);
  return fs.statSync(file).size;
}

function avroFile(file, schema, records) {
  const writer = new ByteWriter();
  avroWrite({ writer, schema, records });
  fs.writeFileSync(file, new Uint8Array(writer.getBuffer()));
  return fs.statSync(file).size;
}

const entrySchema = {
  type: 'record', name: 'manifest_entry', fields: [
    { name: 'status', type: 'int' },
    { name: 'snapshot_id', type: ['null', 'long'] },
    { name: 'sequence_number', type: ['null', 'long'] },
    { name: 'file_sequence_number', type: ['null', 'long'] },
    { name: 'data_file', type: { type: 'record', name: 'r2', fields: [
      { name: 'content', type: 'int' },
      { name: 'file_path', type: 'string' },
      { name: 'file_format', type: 'string' },
      { name: 'record_count', type: 'long' },
      { name: 'file_size_in_bytes', type: 'long' },
      { name: 'equality_ids', type: ['null', { type: 'array', items: 'int' }] },
    ] } },
  ],
};
const listSchema = {
  type: 'record', name: 'manifest_file', fields: [
    { name: 'manifest_path', type: 'string' },
    { name: 'manifest_length', type: 'long' },
    { name: 'partition_spec_id', type: 'int' },
    { name: 'content', type: 'int' },
    { name: 'sequence_number', type: 'long' },
    { name: 'min_sequence_number', type: 'long' },
    { name: 'added_snapshot_id', type: 'long' },
  ],
};

/**
 * Writes an Iceberg v2 table at dir from files = [{rows, seq, content (0 data | 2 eq
 * delete), eqIds}], one snapshot, one manifest.
 */
async function writeTable(dir, fields, files, identifierIds, checkpoint = '1') {
  fs.mkdirSync(path.join(dir, 'data'), { recursive: true });
  fs.mkdirSync(path.join(dir, 'metadata'), { recursive: true });
  const entries = [];
  let n = 0;
  for (const f of files) {
    const file = path.join(dir, 'data', `f${n++}.parquet`);
    const fl = f.content === 2 ? fields.filter((x) => f.eqIds.includes(x.id)) : fields;
    const size = await writeParquet(file, fl, f.rows);
    entries.push({ status: 1, snapshot_id: 1n, sequence_number: BigInt(f.seq), file_sequence_number: BigInt(f.seq),
      data_file: { content: f.content ?? 0, file_path: file, file_format: 'PARQUET',
        record_count: BigInt(f.rows.length), file_size_in_bytes: BigInt(size),
        equality_ids: f.content === 2 ? f.eqIds : null } });
  }
  const manifest = path.join(dir, 'metadata', 'm0.avro');
  const mlen = avroFile(manifest, entrySchema, entries);
  const maxSeq = Math.max(...files.map((f) => f.seq));
  const mlist = path.join(dir, 'metadata', 'snap-1.avro');
  avroFile(mlist, listSchema, [{ manifest_path: manifest, manifest_length: BigInt(mlen), partition_spec_id: 0,
    content: 0, sequence_number: BigInt(maxSeq), min_sequence_number: 1n, added_snapshot_id: 1n }]);
  const metadata = {
    'format-version': 2, 'table-uuid': '00000000-0000-4000-8000-000000000001', location: dir,
    'last-sequence-number': maxSeq, 'last-updated-ms': Date.now(), 'last-column-id': fields.length,
    'current-schema-id': 0,
    schemas: [{ type: 'struct', 'schema-id': 0, 'identifier-field-ids': identifierIds,
      fields: fields.map((f) => ({ id: f.id, name: f.name, required: false, type: f.type })) }],
    'default-spec-id': 0, 'partition-specs': [{ 'spec-id': 0, fields: [] }], 'last-partition-id': 999,
    'default-sort-order-id': 0, 'sort-orders': [{ 'order-id': 0, fields: [] }],
    'current-snapshot-id': 1,
    snapshots: [{ 'snapshot-id': 1, 'sequence-number': maxSeq, 'timestamp-ms': Date.now(),
      'manifest-list': mlist, summary: { operation: 'overwrite', 'cdc.checkpoint-id': checkpoint }, 'schema-id': 0 }],
  };
  fs.writeFileSync(path.join(dir, 'metadata', 'v1.metadata.json'), JSON.stringify(metadata));
  fs.writeFileSync(path.join(dir, 'metadata', 'version-hint.text'), '1');
}

const META = [
  { name: '_op', type: 'string' }, { name: '_lsn', type: 'long' }, { name: '_commit_lsn', type: 'long' },
  { name: '_tx_id', type: 'long' }, { name: '_source_ts', type: 'timestamptz' },
  { name: '_kafka_partition', type: 'int' }, { name: '_kafka_offset', type: 'long' },
];

/** Builds mirror + changelog for a table from PostgreSQL; mutate(kind, rows) breaks them. */
async function buildWarehouse(wh, table, pk, mutate = () => {}, changelogCheckpoint = '1', mirrorCheckpoint = '1') {
  const cols = sourceColumns(table).map((c, i) => ({ ...c, id: i + 1 }));
  const pkId = cols.find((c) => c.name === pk).id;
  const source = psql(dsn, `SELECT to_jsonb(t)::text FROM public.${table} t ORDER BY 1`).trim().split('\n')
    .filter(Boolean).map((l) => JSON.parse(l));
  const str = (r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, v === null ? null : String(v)]));
  // mirror: an older version of the first 5 rows, an equality delete, then the current rows
  const stale = source.slice(0, 5).map((r) => ({ ...r, [cols[1].name]: null }));
  const mirror = source.map(str);
  mutate('mirror', mirror);
  await writeTable(path.join(wh, 'public', table), cols, [
    { seq: 1, rows: [...stale.map(str), ...mirror.slice(5)] },
    { seq: 2, content: 2, eqIds: [pkId], rows: stale.map((r) => ({ [pk]: String(r[pk]) })) },
    { seq: 2, rows: mirror.slice(0, 5) },
  ], [pkId], mirrorCheckpoint);
  const audit = psql(dsn, `SELECT json_build_object('seq', seq, 'op', op, 'txid', txid, 'img', row_image)::text
      FROM cdc_audit.changes WHERE tbl = ${q(table)} ORDER BY seq`).trim().split('\n').filter(Boolean)
    .map((l) => JSON.parse(l));
  const ccols = [...META, ...cols.map((c) => ({ ...c }))].map((c, i) => ({ ...c, id: i + 1 }));
  const changelog = audit.map((a) => {
    const img = a.op === 'd' ? { [pk]: a.img[pk] } : a.img;
    return str({ _op: a.op, _lsn: a.seq, _commit_lsn: a.seq, _tx_id: a.txid, _source_ts: null,
      _kafka_partition: 0, _kafka_offset: a.seq, ...img });
  });
  mutate('changelog', changelog);
  await writeTable(path.join(wh, 'public', `${table}_changelog`), ccols, [{ seq: 1, rows: changelog }], [],
    changelogCheckpoint);
}

function runVerify(wh, extra = []) {
  const r = spawnSync(path.join(root, 'chaos/verify'), ['--pg', dsn, '--warehouse', wh, ...extra],
    { encoding: 'utf8' });
  const lines = r.stdout.trim().split('\n');
  return { status: r.status, last: lines[lines.length - 1], out: r.stdout + r.stderr };
}

before(async () => {
  assert.ok(baseDsn, 'CDC_TEST_PG_DSN is not set: run through tests/run.sh integration');
  tmp = fs.mkdtempSync(path.join(process.env.CDC_TEST_TMP ?? os.tmpdir(), 'verify-'));
  psql(baseDsn, `CREATE DATABASE ${dbName}`);
  const loadgen = path.join(buildDir, 'loadgen');
  execFileSync(loadgen, ['--pg-dsn', dsn, '--setup-only', '--drop'], { stdio: 'pipe' });
  execFileSync(loadgen, ['--pg-dsn', dsn, '--max-transactions', '150', '--rate', '0', '--seed', '7',
    '--toast-pct', '10', '--report-interval', '0'], { stdio: 'pipe' });
  const db = await DuckDBInstance.create(':memory:');
  conn = await db.connect();
});

after(() => {
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  if (baseDsn) {
    try { psql(baseDsn, `DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`); } catch { /* best effort */ }
  }
});

async function warehouse(name, mutateTx = () => {}) {
  const wh = path.join(tmp, name);
  await buildWarehouse(wh, 'transactions', 'entity_id', mutateTx);
  await buildWarehouse(wh, 'accounts', 'account_id');
  return wh;
}

test('a correct warehouse passes', async () => {
  const r = runVerify(await warehouse('good'));
  assert.equal(r.status, 0, r.out);
  assert.match(r.last, /^VERIFY ok rows=\d+ lost=0 duplicated=0 mismatched=0$/, r.out);
});

test('a missing mirror row is lost', async () => {
  const r = runVerify(await warehouse('missing', (kind, rows) => { if (kind === 'mirror') rows.splice(10, 1); }));
  assert.equal(r.status, 1, r.out);
  assert.match(r.last, /^VERIFY FAILED rows=\d+ lost=1 duplicated=0 mismatched=0$/, r.out);
});

test('a change twice in the changelog is duplicated', async () => {
  const r = runVerify(await warehouse('dup', (kind, rows) => { if (kind === 'changelog') rows.push({ ...rows[3] }); }));
  assert.equal(r.status, 1, r.out);
  assert.match(r.last, /^VERIFY FAILED rows=\d+ lost=0 duplicated=1 mismatched=0$/, r.out);
});

test('a lost change and a wrong value are counted', async () => {
  const r = runVerify(await warehouse('bad', (kind, rows) => {
    if (kind === 'changelog') rows.splice(rows.length - 1, 1);
    if (kind === 'mirror') rows[20] = { ...rows[20], status: 'tampered' };
  }));
  assert.equal(r.status, 1, r.out);
  assert.match(r.last, /^VERIFY FAILED rows=\d+ lost=1 duplicated=0 mismatched=1$/, r.out);
});

test('a mirror read before its changelog\'s last commit is retried, not trusted', async () => {
  // the mirror misses the newest epoch (checkpoint 1) that the changelog has (checkpoint 2):
  // a commit landed between the two reads; with --wait the verifier reads again
  const wh = path.join(tmp, 'unsettled');
  await buildWarehouse(wh, 'transactions', 'entity_id',
    (kind, rows) => { if (kind === 'mirror') rows.splice(10, 1); }, '2');
  await buildWarehouse(wh, 'accounts', 'account_id');
  const r = runVerify(wh, ['--wait', '1']);
  assert.equal(r.status, 1, r.out);
  assert.match(r.out, /\(a table was still being committed while it was read\)/, r.out);
  assert.match(r.out, /\([2-9] attempts\)/, r.out);
});

test('a mirror newer than its changelog is settled: the failure is reported as it is', async () => {
  // A backfill after DDL (or a schema marker) commits to the mirror alone, so at rest the
  // mirror's newest checkpoint (3) can be past the changelog's (1). schema_evolution.sh
  // once failed on a real mismatch with "(a table was still being committed while it was
  // read)" after retrying to twice the wait: the message sent the reader after a race
  // that was not there.
  const wh = path.join(tmp, 'mirror-ahead');
  await buildWarehouse(wh, 'transactions', 'entity_id', (kind, rows) => {
    if (kind !== 'changelog') return;
    const i = rows.findIndex((c) => c._op !== 'd' && c.amount !== null);
    rows[i] = { ...rows[i], amount: '-99999.99' };
  }, '1', '3');
  await buildWarehouse(wh, 'accounts', 'account_id', () => {}, '1', '3');
  const r = runVerify(wh, ['--wait', '1']);
  assert.equal(r.status, 1, r.out);
  assert.doesNotMatch(r.out, /still being committed/, r.out);
  // read twice (the wait's rule), not on to twice the wait
  assert.match(r.out, /\(2 attempts\)/, r.out);
});

test('changes of one key out of order are mismatched', async () => {
  const r = runVerify(await warehouse('order', (kind, rows) => {
    if (kind !== 'changelog') return;
    // swap the lsn of the first two changes of a key that has an insert then an update
    const byKey = new Map();
    for (const c of rows) {
      if (!byKey.has(c.entity_id)) byKey.set(c.entity_id, []);
      byKey.get(c.entity_id).push(c);
    }
    const list = [...byKey.values()].find((l) => l.length >= 2 && l[0]._op === 'c' && l[1]._op === 'u');
    [list[0]._lsn, list[1]._lsn] = [list[1]._lsn, list[0]._lsn];
    [list[0]._commit_lsn, list[1]._commit_lsn] = [list[1]._commit_lsn, list[0]._commit_lsn];
  }));
  assert.equal(r.status, 1, r.out);
  assert.match(r.last, /^VERIFY FAILED .* mismatched=[1-9]/, r.out);
});
