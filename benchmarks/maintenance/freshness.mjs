// Freshness of every change in a changelog table whose snapshots expire and whose files
// compaction rewrites (benchmarks/maintenance, docs/benchmarks.md "Table maintenance"):
// from PostgreSQL's commit to the epoch snapshot that made the change visible.
//
// The method of benchmarks/e2e/latency.mjs (a file's sequence number names the snapshot
// that added it) does not hold here: a rewritten file carries the sequence number of the
// snapshot its rewrite read, and an expired snapshot's files are gone. Instead:
//  - the snapshot log: run.sh polls the table's current metadata every few seconds (well
//    within the snapshot retention) and appends each snapshot it lists, one JSON line
//    {seq, ts, op, offsets}: sequence number, timestamp-ms, operation and cdc.offsets
//    ({"<topic>": [next offset of Kafka partition 0..11]}, docs/protocol.md);
//  - a change: the changelog row's _kafka_partition, _kafka_offset and _source_ts (the
//    commit time in PostgreSQL), read from the current snapshot (a changelog keeps every
//    row through its rewrites);
//  - visible at the timestamp-ms of the first epoch snapshot (not "replace") whose offset of
//    the row's partition is past the row's offset. timestamp-ms is taken just before the
//    snapshot's metadata is written, so this is a few ms early, in both runs alike.
//  cdc.offsets names the table's own topic, cdc.<namespace>.<table> (the changelog's
//  directory without `_changelog`; older snapshots named every topic of the job), or --topic.
// usage: node freshness.mjs <changelog dir> <snapshot log> <out.json> [--from ms] [--to ms] [--topic T]
// Writes {changes, p50_ms, p99_ms, max_ms, unmapped, snapshots}; unmapped counts changes no
// logged snapshot covers (a gap in the log), which are left out.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
await import(pathToFileURL(path.join(root, 'tests/js/lib/localfetch.mjs')).href);
const { DuckDBInstance } = await import(pathToFileURL(path.join(root, 'tests/js/deploy/readers.mjs')).href);
const { snapshotFiles } = await import(pathToFileURL(path.join(root, 'chaos/verify.mjs')).href);

const args = process.argv.slice(2);
const [tableDir, logFile, outFile] = args;
const opt = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : def;
};
const from = opt('--from', 0);
const ti = args.indexOf('--topic');
const topicWanted = ti >= 0 ? args[ti + 1]
  : `cdc.${path.basename(path.dirname(path.resolve(tableDir)))}.${path.basename(tableDir).replace(/_changelog$/, '')}`;
const to = opt('--to', 8.64e15);
if (!tableDir || !logFile || !outFile) {
  console.error('usage: node freshness.mjs <changelog dir> <snapshot log> <out.json> [--from ms] [--to ms] [--topic T]');
  process.exit(2);
}

// the epoch snapshots, once each, in commit order; per Kafka partition, the offsets at
// which each made rows visible (non-decreasing along the snapshots)
const bySeq = new Map();
for (const line of fs.readFileSync(logFile, 'utf8').split('\n')) {
  if (!line.trim()) continue;
  const s = JSON.parse(line);
  if (s.op === 'replace' || !s.offsets) continue;
  bySeq.set(Number(s.seq), s);
}
const snaps = [...bySeq.values()].sort((a, b) => Number(a.seq) - Number(b.seq));
const parts = new Map(); // partition -> { ends: [next offset], ts: [ms] }
for (const s of snaps) {
  const offsets = JSON.parse(s.offsets);
  // a snapshot of a job of one topic names only that one
  const topics = Object.keys(offsets);
  const topic = topics.includes(topicWanted) ? topicWanted : topics.length === 1 ? topics[0] : null;
  (offsets[topic] ?? []).forEach((end, p) => {
    const q = parts.get(p) ?? { ends: [], ts: [] };
    if (!q.ends.length || end > q.ends[q.ends.length - 1]) {
      q.ends.push(Number(end));
      q.ts.push(Number(s.ts));
    }
    parts.set(p, q);
  });
}
// the first snapshot of partition p whose next offset is past offset, or null
function visibleAt(p, offset) {
  const q = parts.get(p);
  if (!q) return null;
  let lo = 0;
  let hi = q.ends.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (q.ends[mid] > offset) hi = mid;
    else lo = mid + 1;
  }
  return lo < q.ends.length ? q.ts[lo] : null;
}
// A change committed before the first logged snapshot may have been made visible by an
// earlier one the log does not hold: only changes committed after it are counted (no
// snapshot older than a change can hold it).
const firstTs = snaps.length ? Number(snaps[0].ts) : Infinity;

const files = await snapshotFiles(tableDir);
const lat = [];
let unmapped = 0;
if (files.data?.length) {
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  const list = files.data.map((f) => `'${f.local.replaceAll("'", "''")}'`).join(', ');
  const reader = await conn.runAndReadAll(`
    SELECT _kafka_partition AS p, _kafka_offset AS o, epoch_ms(_source_ts) AS src
    FROM read_parquet([${list}]) WHERE _op <> 'r' AND _op <> 't'`);
  for (const r of reader.getRowObjectsJson()) {
    const src = Number(r.src);
    if (src < from || src > to) continue;
    const v = src >= firstTs ? visibleAt(Number(r.p), Number(r.o)) : null;
    if (v === null) {
      unmapped++;
      continue;
    }
    lat.push(Math.max(0, v - src));
  }
}
lat.sort((a, b) => a - b);
const pct = (p) => (lat.length ? lat[Math.min(lat.length - 1, Math.max(0, Math.ceil((p / 100) * lat.length) - 1))] : null);
const result = { changes: lat.length, p50_ms: pct(50), p99_ms: pct(99), max_ms: lat.length ? lat[lat.length - 1] : null,
  unmapped, snapshots: snaps.length };
fs.writeFileSync(outFile, JSON.stringify(result) + '\n');
console.log(JSON.stringify(result));
