// Prints one line per row of a warehouse table, `<id>\t<op>\t<md5 of each listed column>`
// (op "-" for a mirror), sorted, with the readers chaos/verify uses (icebird for the
// metadata, DuckDB for the Parquet files and the deletes): large values are compared by
// digest, never held by this script (tests/integration/pipeline/large_rows.sh).
// Usage: node large_rows_digest.mjs <table dir> <column>...
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const verify = await import(pathToFileURL(path.join(root, 'chaos/verify.mjs')).href);
const { DuckDBInstance } = await import(pathToFileURL(path.join(root, 'tests/js/deploy/readers.mjs')).href);

const [dir, ...cols] = process.argv.slice(2);
verify.configure([]);
const conn = await (await DuckDBInstance.create(':memory:')).connect();
const files = await verify.snapshotFiles(dir);
if (!files.exists || !(await verify.readSnapshotRows(conn, files))) process.exit(0);
const present = new Set((await (await conn.runAndReadAll('DESCRIBE __d')).getRowObjectsJson())
  .map((r) => r.column_name));
const q = (c) => `"${c.replaceAll('"', '""')}"`;
// md5 of the bytes: text as UTF-8, a blob as it is; NULL as "null"
const digest = (c) => (present.has(c) ? `coalesce(md5(${q(c)}), 'null')` : `'absent'`);
const op = present.has('_op') ? '"_op"' : `'-'`;
const rows = await (await conn.runAndReadAll(
  `SELECT CAST(id AS VARCHAR) AS id, ${op} AS op, ${cols.map(digest).join(" || ' ' || ")} AS d
     FROM __d ORDER BY id, op, d`)).getRowObjectsJson();
for (const r of rows) console.log(`${r.id}\t${r.op}\t${r.d}`);
conn.closeSync?.();
