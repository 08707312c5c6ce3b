// Reads Iceberg tables written by common/iceberg/table.c back with icebird (an
// independent Iceberg reader) and DuckDB. $CDC_BUILD_DIR/ice-testgen performs a
// seeded random sequence of appends, upserts (data + equality deletes), deletes
// and a schema change, and writes the rows an in-memory model of the same
// operations holds; icebird must return exactly those rows. Set CDC_ICE_SEED to
// replay a failing seed (the seed is printed on every run). Also: a partitioned
// table (identity, day, bucket and truncate; upserts with equality deletes in the
// unpartitioned spec 0) whose partition values icebird decodes from the manifests
// must equal the values recomputed here from each data file's rows, a table with a
// column of every type, DuckDB read_parquet over the live data files, and the S3
// backend against s3rver started here on 127.0.0.1 with a free port.
// Run by tests/run.sh integration (node --test).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { asyncBufferFromFile, parquetReadObjects } from 'hyparquet';
import { compressors } from 'hyparquet-compressors';
import { icebergManifests, icebergMetadata, icebergRead } from 'icebird';
import S3rver from 's3rver';

const here = path.dirname(new URL(import.meta.url).pathname);
const buildDir = process.env.CDC_BUILD_DIR || path.join(here, '..', '..', 'build');
const testgen = path.join(buildDir, 'ice-testgen');
let dir;
let s3 = null; // { server, port, dir }

// icebird fetches through globalThis.fetch: serve file:// (and s3:// of our s3rver)
// locations, honouring Range requests as an object store would.
const realFetch = globalThis.fetch;
globalThis.fetch = async (input, init = {}) => {
  let url = typeof input === 'string' ? input : input.url;
  if (s3 && url.startsWith(`https://`) && url.includes('.s3.amazonaws.com/')) {
    // icebird rewrites s3://bucket/key to https://bucket.s3.amazonaws.com/key
    const m = url.match(/^https:\/\/([^.]+)\.s3\.amazonaws\.com\/(.*)$/);
    url = `http://127.0.0.1:${s3.port}/${m[1]}/${m[2]}`;
    return realFetch(url, init);
  }
  if (s3 && url.startsWith('s3://')) {
    url = `http://127.0.0.1:${s3.port}/${url.slice(5)}`;
    return realFetch(url, init);
  }
  if (!url.startsWith('file://') && !url.startsWith('/')) return realFetch(input, init);
  const p = url.startsWith('file://') ? url.slice(7) : url;
  let data;
  try {
    data = fs.readFileSync(p);
  } catch {
    return new Response('not found', { status: 404 });
  }
  const headers = new Headers(init.headers);
  const range = headers.get('Range');
  if (range) {
    const m = range.match(/bytes=(\d+)-(\d*)/);
    const start = Number(m[1]);
    const end = m[2] === '' ? data.length : Number(m[2]) + 1;
    return new Response(data.subarray(start, end), { status: 206 });
  }
  return new Response(data, { status: 200, headers: { 'Content-Length': String(data.length) } });
};

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

function norm(v) {
  if (typeof v === 'bigint') return Number(v);
  if (v instanceof Date) return v.getTime(); // timestamptz: the model keeps milliseconds
  if (v === undefined) return null;
  return v;
}

// Iceberg's bucket hash (spec appendix B: 32-bit Murmur3 x86, seed 0), written here from
// the spec as a test oracle independent of common/iceberg/partition.c.
function murmur3(bytes) {
  const c1 = 0xcc9e2d51;
  const c2 = 0x1b873593;
  let h = 0;
  const n = bytes.length;
  const blocks = n & ~3;
  const mix = (k) => {
    k = Math.imul(k, c1);
    k = (k << 15) | (k >>> 17);
    return Math.imul(k, c2);
  };
  for (let i = 0; i < blocks; i += 4) {
    h ^= mix(bytes[i] | (bytes[i + 1] << 8) | (bytes[i + 2] << 16) | (bytes[i + 3] << 24));
    h = (h << 13) | (h >>> 19);
    h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  }
  let k = 0;
  switch (n & 3) {
    case 3: k ^= bytes[blocks + 2] << 16; // falls through
    case 2: k ^= bytes[blocks + 1] << 8; // falls through
    case 1: k ^= bytes[blocks]; h ^= mix(k);
  }
  h ^= n;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h | 0;
}

function bucketLong(v, n) {
  const b = Buffer.alloc(8);
  b.writeBigInt64LE(BigInt(v));
  return (murmur3(b) & 0x7fffffff) % n;
}

const DAY_MS = 86400000;
const tsMs = (v) => (v instanceof Date ? v.getTime() : Number(BigInt(v) / 1000n));

function canonRows(rows, cols) {
  return rows
    .map((r) => Object.fromEntries(cols.map((c) => [c, norm(r[c])])))
    .sort((a, b) => a.id - b.id);
}

// Asynchronous on purpose: s3rver runs in this process and must keep answering.
async function gen(args) {
  const out = path.join(dir, `expected-${Date.now()}-${Math.random().toString(16).slice(2)}.json`);
  try {
    await promisify(execFile)(testgen, [...args, `--out=${out}`], { timeout: 600000 });
  } catch (err) {
    throw new Error(`ice-testgen ${args.join(' ')} failed: ${err.stderr || err.message}`);
  }
  if (!fs.existsSync(out)) return null; // --mode=storage writes nothing
  return JSON.parse(fs.readFileSync(out, 'utf8'));
}

async function checkRandom(warehouse, seed, commits, extra = []) {
  const exp = await gen([`--warehouse=${warehouse}`, `--seed=${seed}`, `--commits=${commits}`, ...extra]);
  const got = await icebergRead({ tableUrl: exp.table });
  const cols = ['id', 'name', 'qty', 'price', 'ts', 'region', 'note'];
  const a = canonRows(got, cols);
  const b = canonRows(exp.rows, cols);
  assert.equal(a.length, b.length, `seed ${seed}: row count`);
  assert.deepEqual(a, b, `seed ${seed}: rows differ`);
  return exp;
}

before(() => {
  assert.ok(fs.existsSync(testgen), `${testgen} is missing: run make`);
  dir = fs.mkdtempSync(path.join(process.env.CDC_TEST_TMP || os.tmpdir(), 'ice-readback-'));
});

after(async () => {
  if (s3) await s3.server.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('random appends, upserts, deletes and a schema change read back exactly (icebird)', async () => {
  const base = process.env.CDC_ICE_SEED ? Number(process.env.CDC_ICE_SEED) : Date.now() % 1000000;
  const runs = process.env.CDC_ICE_SEED ? 1 : 4;
  for (let i = 0; i < runs; i++) {
    const seed = base + i;
    console.log(`iceberg property test seed=${seed} (replay: CDC_ICE_SEED=${seed})`);
    const wh = `file://${dir}/random-${seed}`;
    const exp = await checkRandom(wh, seed, 60);
    assert.equal(exp.snapshots > 0, true);
  }
});

test('many commits with manifest merging still read back exactly', async () => {
  const seed = (process.env.CDC_ICE_SEED ? Number(process.env.CDC_ICE_SEED) : Date.now() % 1000000) + 100;
  console.log(`iceberg long-run seed=${seed}`);
  await checkRandom(`file://${dir}/long-${seed}`, seed, 200);
});

test('compacted tables read back exactly (icebird) and their files read with DuckDB', async () => {
  // every 7 commits the whole table is rewritten with its equality deletes applied and
  // committed as a replace snapshot with the data sequence number of the snapshot read:
  // the deletes of later commits must still apply to the rewritten rows
  const seed = (process.env.CDC_ICE_SEED ? Number(process.env.CDC_ICE_SEED) : Date.now() % 1000000) + 700;
  console.log(`iceberg compaction seed=${seed}`);
  for (const extra of [[], ['--partition-by=region, bucket[4](id)']]) {
    const exp = await checkRandom(`file://${dir}/compact-${seed}-${extra.length}`, seed, 60,
      ['--compact-every=7', ...extra]);
    const metadata = await icebergMetadata({ tableUrl: exp.table });
    const snaps = metadata.snapshots.filter((s) => s.summary.operation === 'replace');
    assert.ok(snaps.length >= 8, `replace snapshots: ${snaps.length}`);
    // a whole-table rewrite leaves no delete file, and fewer data files than it read
    for (const sn of snaps) {
      assert.equal(sn.summary['total-delete-files'], '0');
      assert.ok(Number(sn.summary['added-data-files'] ?? 0) < Number(sn.summary['deleted-data-files']),
        `replace snapshot ${sn['snapshot-id']}: ${JSON.stringify(sn.summary)}`);
    }
    // DuckDB reads every live data file (the rewritten ones included)
    const list = exp.data_files.map((f) => `'${f.path.replace('file://', '')}'`).join(', ');
    const conn = await (await DuckDBInstance.create(':memory:')).connect();
    const n = (await (await conn.runAndReadAll(
      `SELECT count(*)::INTEGER AS n FROM read_parquet([${list}])`)).getRowObjectsJson())[0].n;
    assert.ok(n >= exp.rows.length, `DuckDB read ${n} rows of ${exp.rows.length} live ones`);
  }
});

test('partitioned table with upserts reads back exactly; partition values match the rows', async () => {
  assert.equal(murmur3(Buffer.from('iceberg')), 1210000089); // the oracle itself (appendix B)
  assert.equal(bucketLong(34, 0x7fffffff), 2017239379);
  const seed = (process.env.CDC_ICE_SEED ? Number(process.env.CDC_ICE_SEED) : Date.now() % 1000000) + 400;
  console.log(`iceberg partitioned seed=${seed}`);
  const decl = 'region, day(ts), bucket[4](id), truncate[2](name)';
  const exp = await checkRandom(`file://${dir}/part-${seed}`, seed, 40, [`--partition-by=${decl}`]);
  const metadata = await icebergMetadata({ tableUrl: exp.table });
  const spec = metadata['partition-specs'].find((s) => s['spec-id'] === metadata['default-spec-id']);
  assert.equal(spec['spec-id'], 1);
  assert.deepEqual(spec.fields.map((f) => [f.name, f.transform]), [
    ['region', 'identity'], ['ts_day', 'day'], ['id_bucket', 'bucket[4]'], ['name_trunc', 'truncate[2]'],
  ]);
  const manifests = await icebergManifests(metadata);
  const keys = new Set();
  let files = 0;
  let deletes = 0;
  for (const { entries } of manifests) {
    for (const { status, data_file: df } of entries) {
      if (status === 2) continue;
      if (df.content !== 0) {
        deletes++;
        assert.deepEqual(Object.keys(df.partition), [], 'equality deletes are global (spec 0)');
        continue;
      }
      const got = {
        region: df.partition.region ?? null,
        ts_day: df.partition.ts_day == null ? null : df.partition.ts_day.getTime() / DAY_MS,
        id_bucket: df.partition.id_bucket ?? null,
        name_trunc: df.partition.name_trunc ?? null,
      };
      // the file's rows, read independently of our manifests
      const rows = await parquetReadObjects({ file: await asyncBufferFromFile(df.file_path.slice(7)), compressors });
      assert.equal(rows.length, Number(df.record_count));
      for (const r of rows) {
        const want = {
          region: r.region ?? null,
          ts_day: r.ts == null ? null : Math.floor(tsMs(r.ts) / DAY_MS),
          id_bucket: bucketLong(r.id, 4),
          name_trunc: r.name == null ? null : Array.from(r.name).slice(0, 2).join(''),
        };
        assert.deepEqual(got, want, `partition of ${df.file_path}`);
      }
      keys.add(JSON.stringify(got));
      files++;
    }
  }
  console.log(`partitioned: ${files} data files in ${keys.size} partitions, ${deletes} delete files`);
  assert.equal(files, exp.data_files.length);
  assert.ok(keys.size > 10, `only ${keys.size} partitions`);
  assert.ok(deletes > 0);
  assert.ok([...keys].some((k) => JSON.parse(k).ts_day < 0), 'a partition before 1970');

  // DuckDB reads the partitioned data files too
  const inst = await DuckDBInstance.create(':memory:');
  const conn = await inst.connect();
  const list = exp.data_files.map((f) => `'${f.path.replace('file://', '')}'`).join(', ');
  const r = await conn.runAndReadAll(`SELECT count(*)::BIGINT AS n FROM read_parquet([${list}])`);
  assert.equal(Number(r.getRowObjectsJson()[0].n), exp.data_records);
  conn.closeSync?.();
});

test('every type reads back (icebird) and data files read with DuckDB read_parquet', async () => {
  const exp = await gen([`--warehouse=file://${dir}/alltypes`, '--mode=alltypes']);
  const got = (await icebergRead({ tableUrl: exp.table })).sort((x, y) => Number(x.id) - Number(y.id));
  assert.equal(got.length, exp.rows.length);
  for (let i = 0; i < got.length; i++) {
    const g = got[i];
    const e = exp.rows[i];
    assert.equal(Number(g.id), e.id);
    if (e.c_int === null) {
      for (const k of Object.keys(g)) if (k !== 'id') assert.ok(g[k] === null || g[k] === undefined, `${k} should be null`);
      continue;
    }
    assert.equal(g.c_boolean, e.c_boolean);
    assert.equal(Number(g.c_int), e.c_int);
    assert.equal(Number(g.c_long), e.c_long);
    assert.ok(Math.abs(Number(g.c_float) - e.c_float) < 1e-6);
    assert.equal(Number(g.c_double), e.c_double);
    assert.ok(Math.abs(Number(g.c_decimal) - e.c_decimal) < 1e-9, `decimal ${g.c_decimal} vs ${e.c_decimal}`);
    assert.equal(g.c_string, e.c_string);
    // hyparquet returns un-annotated BYTE_ARRAY as UTF-8 text; DuckDB checks the bytes below
    if (typeof g.c_binary !== 'string') assert.equal(Buffer.from(g.c_binary).toString('hex'), e.c_binary);
    const dateMs = g.c_date instanceof Date ? g.c_date.getTime() : Number(g.c_date) * 86400000;
    assert.equal(dateMs, e.c_date_days * 86400000);
    assert.equal(Number(g.c_time), e.c_time_us);
    const ts = (v) => (v instanceof Date ? v.getTime() : Number(v) / 1000);
    assert.equal(ts(g.c_timestamp), e.c_timestamp_ms);
    assert.equal(ts(g.c_timestamptz), e.c_timestamptz_ms);
    const u = typeof g.c_uuid === 'string' ? g.c_uuid : Buffer.from(g.c_uuid).toString('hex');
    assert.equal(u.replaceAll('-', ''), e.c_uuid.replaceAll('-', ''));
  }

  // DuckDB reads every live data file of a random table; counts add up
  const rnd = await gen([`--warehouse=file://${dir}/duck`, '--seed=7', '--commits=30']);
  const inst = await DuckDBInstance.create(':memory:');
  const conn = await inst.connect();
  const files = rnd.data_files.map((f) => `'${f.path.replace('file://', '')}'`).join(', ');
  const r = await conn.runAndReadAll(`SELECT count(*)::BIGINT AS n FROM read_parquet([${files}])`);
  assert.equal(Number(r.getRowObjectsJson()[0].n), rnd.data_records);
  const del = rnd.delete_files.map((f) => `'${f.path.replace('file://', '')}'`).join(', ');
  const fid = await conn.runAndReadAll(
    `SELECT DISTINCT name, field_id FROM parquet_schema([${del}]) WHERE name = 'id'`);
  assert.deepEqual(fid.getRowObjectsJson().map((x) => Number(x.field_id)), [1]);
  const bin = await conn.runAndReadAll(
    `SELECT id, hex(c_binary) AS h FROM read_parquet('${exp.data_files[0].path.replace('file://', '')}') ORDER BY id`);
  for (const row of bin.getRowObjectsJson()) {
    const e = exp.rows.find((x) => x.id === Number(row.id));
    assert.equal(row.h === null ? null : row.h.toLowerCase(), e.c_binary);
  }
  conn.closeSync?.();
});

test('two committer processes racing: each version won once, every commit present once', async () => {
  const wh = `file://${dir}/race`;
  const [a, b] = await Promise.all(
    ['a', 'b'].map((job) => gen(['--mode=race', `--job=${job}`, '--commits=30', `--warehouse=${wh}`])),
  );
  console.log(`race: ${a.conflicts} + ${b.conflicts} conflicts retried`);
  const table = a.table;
  const hint = fs.readFileSync(`${table.slice(7)}/metadata/version-hint.text`, 'utf8');
  assert.match(hint, /^\d+$/); // bare integer, no newline
  const md = JSON.parse(fs.readFileSync(`${table.slice(7)}/metadata/v${hint}.metadata.json`, 'utf8'));
  assert.equal(md.snapshots.length, 60);
  assert.equal(Number(hint), 61); // v1 = create, then exactly one version per commit
  const seen = new Set();
  for (let i = 0; i < md.snapshots.length; i++) {
    const s = md.snapshots[i];
    const key = `${s.summary['cdc.job']}/${s.summary['cdc.checkpoint-id']}`;
    assert.ok(!seen.has(key), `${key} committed twice`);
    seen.add(key);
    if (i > 0) assert.equal(s['parent-snapshot-id'], md.snapshots[i - 1]['snapshot-id']);
    assert.equal(s['sequence-number'], i + 1);
  }
  const got = await icebergRead({ tableUrl: table });
  const cols = ['id', 'name', 'qty', 'price', 'ts', 'region', 'note'];
  assert.deepEqual(canonRows(got, cols), canonRows([...a.rows, ...b.rows], cols));
});

test('local storage backend checks', async () => {
  await gen(['--mode=storage', `--warehouse=file://${dir}/storage`]);
});

test('S3 backend against s3rver: commit and read back', async () => {
  const port = await freePort();
  const sdir = path.join(dir, 's3rver');
  fs.mkdirSync(sdir);
  const server = new S3rver({
    address: '127.0.0.1',
    port,
    silent: true,
    directory: sdir,
    configureBuckets: [{ name: 'warehouse' }],
  });
  await server.run();
  s3 = { server, port };
  const seed = (process.env.CDC_ICE_SEED ? Number(process.env.CDC_ICE_SEED) : Date.now() % 1000000) + 200;
  console.log(`iceberg s3 seed=${seed}`);
  const exp = await checkRandom('s3://warehouse/wh', seed, 25, [
    `--s3-endpoint=http://127.0.0.1:${port}`,
    '--s3-access-key=S3RVER',
    '--s3-secret-key=S3RVER',
    '--s3-path-style=true',
  ]);
  assert.ok(exp.table.startsWith('s3://warehouse/wh/db/t'));
  // put / put-if-absent / multipart upload / get / size / list / delete
  await gen([
    '--mode=storage',
    '--warehouse=s3://warehouse/wh',
    `--s3-endpoint=http://127.0.0.1:${port}`,
    '--s3-access-key=S3RVER',
    '--s3-secret-key=S3RVER',
  ]);
  // the metadata files are really in the bucket, version hint without newline
  const hint = await realFetch(`http://127.0.0.1:${port}/warehouse/wh/db/t/metadata/version-hint.text`);
  assert.equal(await hint.text(), String(exp.version));
});

test('S3 backend retries 5xx answers (flaky proxy in front of s3rver)', async () => {
  assert.ok(s3, 'the s3rver test must run first');
  let n = 0;
  let injected = 0;
  let applied = 0;
  let preconditions = 0;
  const created = new Set(); // objects the proxy saw created: it enforces If-None-Match: *
  // Every third request fails with 503; for half of those PUTs the request reaches
  // s3rver first (the answer is lost, as with a timeout after the store applied it).
  const proxy = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      n++;
      const body = Buffer.concat(chunks);
      const key = req.url.split('?')[0];
      if (req.method === 'PUT' && req.headers['if-none-match'] === '*' && created.has(key)) {
        preconditions++;
        res.writeHead(412, { 'Content-Type': 'application/xml' });
        res.end('<Error><Code>PreconditionFailed</Code></Error>');
        return;
      }
      const fail = n % 3 === 0;
      if (fail && !(req.method === 'PUT' && n % 2 === 0)) {
        injected++;
        res.writeHead(503, { 'Content-Type': 'application/xml' });
        res.end('<Error><Code>SlowDown</Code></Error>');
        return;
      }
      const up = http.request(
        { host: '127.0.0.1', port: s3.port, method: req.method, path: req.url, headers: req.headers },
        (ur) => {
          const out = [];
          ur.on('data', (c) => out.push(c));
          ur.on('end', () => {
            if (req.method === 'PUT' && ur.statusCode < 300 && !req.url.includes('?')) created.add(key);
            if (fail) {
              applied++;
              res.writeHead(503, { 'Content-Type': 'application/xml' });
              res.end('<Error><Code>InternalError</Code></Error>');
              return;
            }
            res.writeHead(ur.statusCode, ur.headers);
            res.end(Buffer.concat(out));
          });
        },
      );
      up.on('error', () => {
        res.writeHead(502);
        res.end();
      });
      up.end(body);
    });
  });
  await new Promise((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const pport = proxy.address().port;
  try {
    const args = [
      `--s3-endpoint=http://127.0.0.1:${pport}`,
      '--s3-access-key=S3RVER',
      '--s3-secret-key=S3RVER',
    ];
    await gen(['--mode=storage', '--warehouse=s3://warehouse/flaky', ...args]);
    const seed = (process.env.CDC_ICE_SEED ? Number(process.env.CDC_ICE_SEED) : Date.now() % 1000000) + 300;
    console.log(`iceberg flaky-s3 seed=${seed}`);
    await checkRandom('s3://warehouse/flaky', seed, 15, args);
    console.log(
      `flaky proxy: ${n} requests, ${injected} answered 503, ${applied} applied then 503, ` +
        `${preconditions} answered 412`,
    );
    assert.ok(injected > 10, `only ${injected} failures injected`);
    assert.ok(applied > 3, `only ${applied} applied-then-failed requests`);
  } finally {
    await new Promise((resolve) => proxy.close(resolve));
  }
});
