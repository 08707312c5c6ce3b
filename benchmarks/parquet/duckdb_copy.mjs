// DuckDB baseline for benchmarks/parquet: loads the benchmark CSV into a table
// (not timed), then times COPY ... TO (FORMAT parquet, COMPRESSION zstd) `runs`
// times. Prints "rows=<n> best_seconds=<s> bytes=<file size>".
// Usage: node duckdb_copy.mjs <csv> <out-dir> [runs]
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import fs from 'node:fs';
import path from 'node:path';

const [csv, outDir, runsArg] = process.argv.slice(2);
const runs = Number(runsArg || 3);
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const require = createRequire(path.join(root, 'tests/js/package.json'));
const { DuckDBInstance } = await import(pathToFileURL(require.resolve('@duckdb/node-api')).href);

const db = await DuckDBInstance.create(':memory:');
const conn = await db.connect();
const lit = (s) => `'${s.replaceAll("'", "''")}'`;
await conn.run(`CREATE TABLE t AS SELECT id, status, account, amount,
    make_timestamp(ts)::TIMESTAMPTZ AS ts, score, flag, note
  FROM read_csv(${lit(csv)}, header = true, columns = {
    'id': 'BIGINT', 'status': 'VARCHAR', 'account': 'VARCHAR', 'amount': 'DECIMAL(12,2)',
    'ts': 'BIGINT', 'score': 'DOUBLE', 'flag': 'BOOLEAN', 'note': 'VARCHAR'})`);
const rows = Number((await conn.runAndReadAll('SELECT count(*) FROM t')).getRows()[0][0]);
const out = path.join(outDir, 'duckdb.parquet');
let best = Infinity;
for (let i = 0; i < runs; i++) {
  fs.rmSync(out, { force: true });
  const start = performance.now();
  await conn.run(`COPY t TO ${lit(out)} (FORMAT parquet, COMPRESSION zstd)`);
  best = Math.min(best, (performance.now() - start) / 1000);
}
console.log(`rows=${rows} best_seconds=${best.toFixed(6)} bytes=${fs.statSync(out).size}`);
