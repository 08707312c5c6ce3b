// Checks the native Iceberg types of one table end to end (docs/capture.md, "Types";
// tests/integration/pipeline/native_types.sh): the mirror read with icebird and the
// changelog's data files read with DuckDB's read_parquet (the newest change per key) must
// equal the source rows, and the tables' schemas must declare the expected types.
//   node native_types_check.mjs <warehouse> <namespace> <table> <source.jsonl> <types.json>
// source.jsonl: one JSON object per source row (numerics as text, dates as YYYY-MM-DD); types.json: the
// expected Iceberg type per column, as the table metadata writes it. Prints one summary
// line; exits 1 naming the first difference.
import './localfetch.mjs';
import fs from 'node:fs';
import path from 'node:path';
import { icebergMetadata, icebergRead } from 'icebird';
import { DuckDBInstance } from '@duckdb/node-api';

const [warehouse, ns, table, sourceFile, typesFile] = process.argv.slice(2);
const source = fs.readFileSync(sourceFile, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
const types = JSON.parse(fs.readFileSync(typesFile, 'utf8'));

function fail(msg) {
  console.error(`native_types_check: ${msg}`);
  process.exit(1);
}

// A value in a comparable form: numbers (decimals arrive as text from PostgreSQL and
// DuckDB, as doubles from icebird, which rounds large ones) by their value to 15
// significant digits, BigInts as numbers, nested values element by element, a struct's
// members by name.
function norm(v) {
  if (v === null || v === undefined) return null;
  if (typeof v === 'bigint') return Number(v);
  if (typeof v === 'number') return Number(v.toPrecision(15));
  if (v instanceof Date) return Math.round(v.getTime() / 86400000); // a date: its day number
  if (Array.isArray(v)) return v.map(norm);
  if (typeof v === 'object') // a struct: its non-null members (a reader may leave nulls out)
    return Object.fromEntries(Object.keys(v).sort().filter((k) => norm(v[k]) !== null).map((k) => [k, norm(v[k])]));
  if (typeof v === 'string' && /^\d{4}-\d{2}-\d{2}$/.test(v)) return Math.round(Date.parse(`${v}T00:00:00Z`) / 86400000);
  if (typeof v === 'string' && /^-?\d+(\.\d+)?$/.test(v)) return Number(Number(v).toPrecision(15));
  return v;
}

function compare(what, rows) {
  const byId = new Map(rows.map((r) => [Number(r.id), r]));
  if (rows.length !== source.length) fail(`${what}: ${rows.length} rows, the source has ${source.length}`);
  for (const want of source) {
    const have = byId.get(Number(want.id));
    if (!have) fail(`${what}: row ${want.id} is missing`);
    for (const col of Object.keys(types)) {
      const a = JSON.stringify(norm(want[col])), b = JSON.stringify(norm(have[col]));
      if (a !== b) fail(`${what}: row ${want.id} column ${col}: source ${a}, table ${b}`);
    }
  }
}

// the declared types, in both tables
const base = path.join(warehouse, ns, table);
for (const t of [table, `${table}_changelog`]) {
  const md = await icebergMetadata({ tableUrl: path.join(warehouse, ns, t) });
  const schema = md.schemas.find((s) => s['schema-id'] === md['current-schema-id']);
  for (const [col, want] of Object.entries(types)) {
    const f = schema.fields.find((x) => x.name === col);
    if (!f) fail(`${t}: no column ${col}`);
    const strip = (ty) => (typeof ty === 'string' ? ty : ty.type === 'list'
      ? { type: 'list', element: strip(ty.element), 'element-required': ty['element-required'] }
      : { type: 'struct', fields: ty.fields.map((x) => ({ name: x.name, type: strip(x.type) })) });
    if (JSON.stringify(strip(f.type)) !== JSON.stringify(want))
      fail(`${t}: column ${col} is ${JSON.stringify(f.type)}, expected ${JSON.stringify(want)}`);
  }
  // every nested field has an id, unique in the schema, at most last-column-id
  const ids = [];
  const walk = (ty) => {
    if (typeof ty === 'string') return;
    if (ty.type === 'list') { ids.push(ty['element-id']); walk(ty.element); }
    if (ty.type === 'struct') for (const x of ty.fields) { ids.push(x.id); walk(x.type); }
  };
  for (const f of schema.fields) { ids.push(f.id); walk(f.type); }
  if (new Set(ids).size !== ids.length || ids.some((i) => !(i > 0) || i > md['last-column-id']))
    fail(`${t}: field ids ${JSON.stringify(ids)} are not unique and within last-column-id ${md['last-column-id']}`);
}

// the mirror, with icebird (deletes applied)
const mirror = await icebergRead({ tableUrl: base });
compare('mirror (icebird)', mirror);

// the changelog's data files with DuckDB: the newest change of each key
const dataDir = path.join(warehouse, ns, `${table}_changelog`, 'data');
const files = [];
const list = (d) => {
  for (const e of fs.readdirSync(d, { withFileTypes: true })) {
    if (e.isDirectory()) list(path.join(d, e.name));
    else if (e.name.endsWith('.parquet')) files.push(path.join(d, e.name));
  }
};
list(dataDir);
const db = await DuckDBInstance.create(':memory:');
const conn = await db.connect();
const sel = Object.keys(types).map((c) => `to_json(${JSON.stringify(c)})::VARCHAR AS ${JSON.stringify(c)}`).join(', ');
const q = `SELECT id, _op, ${sel} FROM (
    SELECT *, row_number() OVER (PARTITION BY id ORDER BY _commit_lsn DESC, _lsn DESC, _op = 'd' DESC) AS rn
    FROM read_parquet([${files.map((f) => `'${f}'`).join(', ')}], union_by_name = true)) WHERE rn = 1 AND _op <> 'd'`;
const got = (await conn.runAndReadAll(q)).getRowObjectsJson().map((r) => {
  const o = { id: r.id };
  for (const c of Object.keys(types)) o[c] = r[c] === null ? null : JSON.parse(r[c]);
  return o;
});
compare(`changelog (DuckDB, ${files.length} files)`, got);
console.log(`native types: ${source.length} rows equal in the mirror (icebird) and the changelog (DuckDB, ${files.length} files); ${Object.keys(types).length} columns of the expected types`);
