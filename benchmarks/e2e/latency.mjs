// End-to-end latency of every change in a changelog table, from PostgreSQL's commit
// timestamp to the moment the first Iceberg snapshot holding it became visible.
//
// Method (docs/benchmarks.md):
//  - commit time: the changelog column _source_ts, the commit timestamp PostgreSQL wrote
//    in the transaction's commit record (pgoutput's BEGIN message carries it; ms);
//    checked against updated_at = clock_timestamp() set inside the transaction, which
//    must not be later than the commit;
//  - visible time: each vN.metadata.json is one commit; its ctime (set when the complete
//    file is linked under its final name, after which readers can find it) is when the
//    snapshot it adds became visible. The snapshot's own timestamp-ms (taken just before
//    writing) is reported too;
//  - file -> snapshot: the current snapshot's manifests (icebird) give each data file's
//    sequence number, which names the snapshot that added it; rows are read with DuckDB.
// Both clocks are this machine's CLOCK_REALTIME.
//
//  - --added-files (tables that compaction rewrites): a rewritten file carries the sequence
//    number of the snapshot its rewrite started from, not of the one that made its rows
//    visible, so the files are instead taken from every epoch snapshot (not "replace")
//    whose timestamp is at or after --from: the data files it added (manifests it added,
//    entries ADDED with its sequence number), which its retention keeps readable. A
//    snapshot whose vN.metadata.json is gone (--metadata-versions-max trims them) is
//    visible at its timestamp-ms (counted in visible_by_snapshot_ts).
//
// usage: node latency.mjs <table dir> <out prefix> [--from <unix ms>] [--to <unix ms>]
//          [--small-bytes <n>] [--tables-dir <ns dir>] [--added-files]
// Writes <out prefix>.json (figures) and <out prefix>.tsv (per second of commit time:
// t, changes committed, p50, p99 ms, changes made visible in that second).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
await import(pathToFileURL(path.join(root, 'tests/js/lib/localfetch.mjs')).href);
const { icebird, DuckDBInstance } = await import(
  pathToFileURL(path.join(root, 'tests/js/deploy/readers.mjs')).href);

const args = process.argv.slice(2);
const tableDir = args[0];
const out = args[1];
const opt = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : def;
};
const from = Number(opt('--from', 0));
const to = Number(opt('--to', 8.64e15));
const smallBytes = Number(opt('--small-bytes', 1 << 20));
const tablesDir = opt('--tables-dir', path.dirname(tableDir));
const addedMode = args.includes('--added-files');

const pct = (sorted, p) => (sorted.length ? sorted[Math.min(sorted.length - 1,
  Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] : 0);

// ---- visible time of each snapshot (by sequence number) ---------------------------------
function snapshotTimes(dir) {
  const md = path.join(dir, 'metadata');
  const seen = new Map(); // sequence number -> { visible, ts }
  let floor = -Infinity; // snapshots below the oldest kept file's own one
  const files = fs.readdirSync(md).filter((f) => /^v\d+\.metadata\.json$/.test(f))
    .sort((a, b) => Number(a.slice(1).split('.')[0]) - Number(b.slice(1).split('.')[0]));
  for (const f of files) {
    const p = path.join(md, f);
    const m = JSON.parse(fs.readFileSync(p, 'utf8'));
    // the status-change time: the file is written under a temporary name, then linked
    // under its final name (and the temporary name unlinked), which sets ctime; from
    // then on readers can find it. mtime (end of writing) is a little earlier.
    const visible = fs.statSync(p).ctimeMs;
    // the oldest file kept (--metadata-versions-max trims older ones) also lists the
    // snapshots of the versions before it: only its own (the newest) is visible from it
    const own = seen.size === 0 && Number(f.slice(1).split('.')[0]) > 1
      ? Math.max(...(m.snapshots ?? []).map((s) => Number(s['sequence-number']))) : null;
    if (own !== null) floor = own;
    for (const s of m.snapshots ?? []) {
      // older snapshots are listed by the later files too: their visible time is unknown
      // here (left to the caller: their timestamp-ms), not the ctime of a later file
      if (Number(s['sequence-number']) < floor) continue;
      if (own !== null && Number(s['sequence-number']) !== own) continue;
      const seq = Number(s['sequence-number']);
      if (!seen.has(seq)) seen.set(seq, { visible, ts: Number(s['timestamp-ms']) });
    }
  }
  return { seen, versions: files.length };
}

// ---- files of a table -----------------------------------------------------------------
async function tableFiles(dir) {
  const metadata = await icebird.icebergMetadata({ tableUrl: dir });
  const sid = metadata['current-snapshot-id'];
  if (sid === undefined || sid === null || sid < 0) return [];
  const manifests = await icebird.icebergManifests(metadata);
  const files = [];
  for (const { entries } of manifests) {
    for (const e of entries) {
      if (e.status === 2) continue;
      const f = e.data_file;
      const p = String(f.file_path).replace(/^file:\/\//, '');
      files.push({ path: p, seq: Number(e.sequence_number ?? 0), content: Number(f.content ?? 0),
        bytes: Number(f.file_size_in_bytes ?? 0), records: Number(f.record_count ?? 0) });
    }
  }
  return files;
}

// ---- data files as added by the epoch snapshots (--added-files) -------------------------
async function avroRecords(url) {
  const buffer = await fetch(url).then((r) => r.arrayBuffer());
  const reader = { view: new DataView(buffer), offset: 0 };
  const { metadata, syncMarker } = await icebird.avroMetadata(reader);
  return await icebird.avroRead({ reader, metadata, syncMarker });
}

async function addedFiles(dir, since) {
  const metadata = await icebird.icebergMetadata({ tableUrl: dir });
  const files = [];
  for (const s of metadata.snapshots ?? []) {
    if (s.summary?.operation === 'replace' || Number(s['timestamp-ms']) < since) continue;
    const seq = BigInt(s['sequence-number']);
    // by sequence number: snapshot ids above 2^53 lose their low bits in JSON.parse
    const mine = (await avroRecords(s['manifest-list'])).filter((m) => BigInt(m.sequence_number) === seq);
    const manifests = await icebird.icebergManifests({ ...metadata, 'current-snapshot-id': s['snapshot-id'],
      snapshots: [{ ...s, 'manifest-list': undefined, manifests: mine }] });
    for (const { entries } of manifests) {
      for (const e of entries) {
        const f = e.data_file;
        if (e.status !== 1 || Number(f.content ?? 0) !== 0 || BigInt(e.sequence_number) !== seq) continue;
        files.push({ path: String(f.file_path).replace(/^file:\/\//, ''), seq: Number(seq), content: 0,
          bytes: Number(f.file_size_in_bytes ?? 0), records: Number(f.record_count ?? 0), ts: Number(s['timestamp-ms']) });
      }
    }
  }
  return files;
}

const { seen } = snapshotTimes(tableDir);
let visibleByTs = 0;
const files = addedMode ? await addedFiles(tableDir, from)
  : (await tableFiles(tableDir)).filter((f) => f.content === 0);
if (addedMode) {
  for (const f of files) {
    if (!seen.has(f.seq)) {
      seen.set(f.seq, { visible: f.ts, ts: f.ts });
      visibleByTs++;
    }
  }
}
const db = await DuckDBInstance.create(':memory:');
const conn = await db.connect();
const sql = (s) => `'${String(s).replaceAll("'", "''")}'`;

let lat = [];
let tsLat = [];
const perSec = new Map(); // second of commit -> { n, lats }
const visSec = new Map(); // second of visibility -> n
let unmapped = 0;
let lastVisible = 0;
let checked = 0;
let violations = 0;
if (files.length) {
  await conn.run(`CREATE TABLE fs AS SELECT * FROM (VALUES ${files.map((f) => `(${sql(f.path)}, ${f.seq})`).join(',')}) t(path, seq)`);
  const cols = (await (await conn.runAndReadAll(
    `SELECT DISTINCT name FROM parquet_schema(${sql(files[0].path)})`)).getRowObjectsJson()).map((r) => r.name);
  const upd = cols.includes('updated_at') ? 'epoch_ms(updated_at)' : 'NULL';
  const reader = await conn.runAndReadAll(`
    SELECT fs.seq AS seq, epoch_ms(_source_ts) AS src, ${upd} AS upd, _op AS op
    FROM read_parquet([${files.map((f) => sql(f.path)).join(',')}], filename = true) r
    JOIN fs ON fs.path = r.filename`);
  for (const r of reader.getRowObjectsJson()) {
    if (r.op === 'r') continue; // snapshot rows have no commit of their own
    const src = Number(r.src);
    if (src < from || src > to) continue;
    const s = seen.get(Number(r.seq));
    if (!s) {
      unmapped++;
      continue;
    }
    const l = s.visible - src;
    if (s.visible > lastVisible) lastVisible = s.visible;
    lat.push(l);
    tsLat.push(s.ts - src);
    if (r.upd !== null && r.upd !== undefined) {
      checked++;
      if (Number(r.upd) > src + 1) violations++; // ms truncation of the commit time
    }
    const sec = Math.floor(src / 1000);
    const b = perSec.get(sec) ?? { n: 0, lats: [] };
    b.n++;
    b.lats.push(l);
    perSec.set(sec, b);
    const vs = Math.floor(s.visible / 1000);
    visSec.set(vs, (visSec.get(vs) ?? 0) + 1);
  }
}
lat.sort((a, b) => a - b);
tsLat.sort((a, b) => a - b);

// Files of every table in the namespace directory (data and delete files).
let dataFiles = 0;
let deleteFiles = 0;
let small = 0;
let totalBytes = 0;
for (const t of fs.readdirSync(tablesDir)) {
  const d = path.join(tablesDir, t);
  if (!fs.existsSync(path.join(d, 'metadata', 'version-hint.text'))) continue;
  for (const f of await tableFiles(d)) {
    if (f.content === 0) dataFiles++;
    else deleteFiles++;
    if (f.bytes < smallBytes) small++;
    totalBytes += f.bytes;
  }
}

const secs = [...new Set([...perSec.keys(), ...visSec.keys()])].sort((a, b) => a - b);
const t0 = secs.length ? secs[0] : 0;
// visible changes per second averaged over the 5 s around each second: commits arrive
// once per interval, so the raw per-second count is all spikes
const visAvg = (s) => {
  let n = 0;
  for (let d = -2; d <= 2; d++) n += visSec.get(s + d) ?? 0;
  return (n / 5).toFixed(0);
};
const tsv = secs.map((s) => {
  const b = perSec.get(s);
  const l = b ? b.lats.sort((x, y) => x - y) : [];
  return [s - t0, b ? b.n : 0, b ? pct(l, 50).toFixed(0) : '', b ? pct(l, 99).toFixed(0) : '',
    visSec.get(s) ?? 0, visAvg(s)].join('\t');
});
fs.writeFileSync(`${out}.tsv`, '# t_s\tchanges_committed_in_pg\tp50_ms\tp99_ms\tchanges_visible_in_iceberg' +
  '\tvisible_5s_avg\n' + tsv.join('\n') + '\n');
const srcMin = secs.length ? secs[0] * 1000 : 0;
const result = {
  changes: lat.length,
  p50_ms: pct(lat, 50),
  p95_ms: pct(lat, 95),
  p99_ms: pct(lat, 99),
  max_ms: lat.length ? lat[lat.length - 1] : 0,
  p99_by_snapshot_timestamp_ms: pct(tsLat, 99),
  unmapped,
  visible_by_snapshot_ts: visibleByTs,
  clock_check: { rows: checked, updated_at_after_commit: violations },
  data_files: dataFiles,
  delete_files: deleteFiles,
  small_files: small,
  small_file_bytes: smallBytes,
  total_bytes: totalBytes,
  first_commit_ms: srcMin,
  last_visible_ms: lastVisible,
};
fs.writeFileSync(`${out}.json`, JSON.stringify(result, null, 2) + '\n');
console.log(JSON.stringify(result));
conn.closeSync?.();
