// Read time of a mirror table's current rows (benchmarks/maintenance, docs/benchmarks.md):
//   current    DuckDB reads the files the current snapshot lists and applies the
//              deletes by sequence number, exactly the verifier's read
//              (chaos/verify.mjs: snapshotFiles + readSnapshotRows);
//   compacted  the same rows, written once by DuckDB COPY into one Parquet file per Kafka
//              partition (a freshly compacted copy, the layout compaction leaves), read by
//              the same code as a snapshot of those files; compacted_onefile: into one file.
// Each read is done --reads times, the three in turn (after one warm-up read each, so
// all read from the page cache); the medians are reported. Planning (icebird reading the metadata and the
// manifests) is timed apart and is not part of either read time.
// usage: node readtime.mjs <table dir> <work dir> [--reads 5]
// Prints one JSON object: rows, data_files, delete_files, plan_ms, current_ms,
// compacted_ms, compacted_onefile_ms (medians), ratio, ratio_onefile, and every sample.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
await import(pathToFileURL(path.join(root, 'tests/js/lib/localfetch.mjs')).href);
const { DuckDBInstance } = await import(pathToFileURL(path.join(root, 'tests/js/deploy/readers.mjs')).href);
const { snapshotFiles, readSnapshotRows } = await import(pathToFileURL(path.join(root, 'chaos/verify.mjs')).href);

const args = process.argv.slice(2);
const [tableDir, workDir] = args;
const ri = args.indexOf('--reads');
const reads = ri >= 0 ? Number(args[ri + 1]) : 5;
if (!tableDir || !workDir || !(reads > 0)) {
  console.error('usage: node readtime.mjs <table dir> <work dir> [--reads 5]');
  process.exit(2);
}
fs.mkdirSync(workDir, { recursive: true });

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;

// Bounded memory (MAINT_READ_MEMORY, 4GB): the machine is shared, and applying thousands
// of equality-delete files can take more than it has; a read that runs out is reported as
// failed (error in the JSON), not retried.
const db = await DuckDBInstance.create(':memory:', { memory_limit: process.env.MAINT_READ_MEMORY ?? '4GB' });
const conn = await db.connect();
// one read: every row of the files, the deletes applied, then the rows counted
// (by: how readSnapshotRows matched the columns, 'id' or 'footers')
async function readOnce(files) {
  const t0 = process.hrtime.bigint();
  let n = 0;
  const by = await readSnapshotRows(conn, files);
  if (by) {
    n = Number((await (await conn.runAndReadAll('SELECT count(*) AS n FROM __d')).getRowObjectsJson())[0].n);
  }
  return { ms: ms(t0), rows: n, by };
}

const plan = [];
let files;
for (let i = 0; i < reads; i++) {
  const t0 = process.hrtime.bigint();
  files = await snapshotFiles(tableDir);
  plan.push(ms(t0));
}
if (!files.exists || !files.snapshot) {
  console.error(`readtime: ${tableDir} has no snapshot`);
  process.exit(1);
}

const current = [];
let rows;
let by;
try {
  ({ rows, by } = await readOnce(files)); // warm-up
} catch (e) {
  console.log(JSON.stringify({ table: tableDir, data_files: files.data.length,
    delete_files: files.posDeletes.length + files.eqDeletes.length, plan_ms: median(plan),
    error: String(e.message).split('\n')[0] }));
  process.exit(0);
}

// The compacted copies of the rows just read (the table's columns only; the copies'
// column names are the fields' names and their field ids the fields' ids):
//   compacted        one file per Kafka partition, as the product's compaction leaves the
//                    table (every file is written for one partition, docs/iceberg.md
//                    "Table maintenance"; `-p<P>-` in the file names says which);
//   compacted_onefile  every row in one file: the layout's own cost (12 files where a
//                    small table would fit in one) shows as the difference.
const cols = files.fields.map((f) => `"${f.name.replaceAll('"', '""')}"`).join(', ');
await readSnapshotRows(conn, files, { withFile: true });
const part = "regexp_extract(__file, '-p([0-9]+)-[a-z]+-[^/]*$', 1)";
const parts = (await (await conn.runAndReadAll(`SELECT DISTINCT ${part} AS p FROM __d ORDER BY 1`))
  .getRowObjectsJson()).map((r) => r.p);
const sq = (x) => `'${x.replaceAll("'", "''")}'`;
// with the fields' ids, as an Iceberg writer writes them, so the copies are read by field id
// like the table's files
const fieldIds = files.fields.map((f) => `${sq(f.name)}: ${f.id}`).join(', ');
const copyOf = async (name, where) => {
  const f = path.join(workDir, `${name}.parquet`);
  await conn.run(`COPY (SELECT ${cols} FROM __d WHERE ${where}) TO ${sq(f)}
    (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 122880, FIELD_IDS {${fieldIds}})`);
  return { orig: f, local: f, seq: 0n };
};
const perPartition = [];
for (const p of parts) perPartition.push(await copyOf(`compacted-p${p || 'x'}`, `${part} = ${sq(p)}`));
const oneFile = [await copyOf('compacted', 'true')];
// Warm-up reads of the copies, then the three reads in turn, `reads` times: whatever else
// the machine does at a moment weighs on all three alike.
const asSnapshot = (data) => ({ ...files, data, posDeletes: [], eqDeletes: [] });
for (const c of [perPartition, oneFile]) {
  const warm = await readOnce(asSnapshot(c));
  if (warm.rows !== rows) throw new Error(`a compacted copy has ${warm.rows} rows, the table ${rows}`);
  if (warm.by !== by) throw new Error(`a compacted copy was read by ${warm.by}, the table by ${by}`);
}
const compacted = [];
const compactedOne = [];
for (let i = 0; i < reads; i++) {
  const r = await readOnce(files);
  if (r.rows !== rows) throw new Error(`read ${i}: ${r.rows} rows, the first read had ${rows}`);
  current.push(r.ms);
  compacted.push((await readOnce(asSnapshot(perPartition))).ms);
  compactedOne.push((await readOnce(asSnapshot(oneFile))).ms);
}

const result = {
  table: tableDir,
  rows,
  read_by: by,
  data_files: files.data.length,
  delete_files: files.posDeletes.length + files.eqDeletes.length,
  plan_ms: median(plan),
  current_ms: median(current),
  compacted_ms: median(compacted),
  compacted_files: perPartition.length,
  compacted_onefile_ms: median(compactedOne),
  compacted_bytes: perPartition.reduce((n, f) => n + fs.statSync(f.local).size, 0),
  samples: { plan, current, compacted, compacted_onefile: compactedOne },
};
result.ratio = result.compacted_ms > 0 ? result.current_ms / result.compacted_ms : 0;
result.ratio_onefile = result.compacted_onefile_ms > 0 ? result.current_ms / result.compacted_onefile_ms : 0;
console.log(JSON.stringify(result));
conn.closeSync?.();
