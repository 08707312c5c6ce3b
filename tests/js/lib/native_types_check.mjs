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
// members by name, dates as day numbers, timestamps (the test has none at midnight) as
// milliseconds since the epoch, binary as lower-case hex. A date or timestamp infinity is
// "infinity" / "-infinity" (PostgreSQL, DuckDB); icebird gives an invalid Date for both
// (docs/worker.md, "Values no Iceberg type holds"): with `lossy` both read as "invalid".
const TS = /^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2}(\.\d+)?)(Z|[+-]\d{2}(:?\d{2})?)?$/;
function norm(v, lossy = false) {
  if (v === null || v === undefined) return null;
  if (typeof v === 'bigint') return Number(v);
  if (typeof v === 'number') return Number(v.toPrecision(15));
  if (v instanceof Date) {
    if (Number.isNaN(v.getTime())) return 'invalid';
    const ms = v.getTime();
    return ms % 86400000 === 0 ? Math.round(ms / 86400000) : ms; // a date: its day number
  }
  if (v instanceof Uint8Array) return `bytes:${Buffer.from(v).toString('hex')}`;
  if (Array.isArray(v)) return v.map((x) => norm(x, lossy));
  if (typeof v === 'object') // a struct: its non-null members (a reader may leave nulls out)
    return Object.fromEntries(Object.keys(v).sort().filter((k) => norm(v[k], lossy) !== null)
      .map((k) => [k, norm(v[k], lossy)]));
  if (lossy && (v === 'infinity' || v === '-infinity')) return 'invalid';
  if (typeof v === 'string' && /^\d{4}-\d{2}-\d{2}$/.test(v)) return Math.round(Date.parse(`${v}T00:00:00Z`) / 86400000);
  const ts = typeof v === 'string' ? TS.exec(v) : null;
  if (ts) {
    let zone = ts[4] ?? 'Z';
    if (/^[+-]\d{2}$/.test(zone)) zone += ':00';
    else if (/^[+-]\d{4}$/.test(zone)) zone = `${zone.slice(0, 3)}:${zone.slice(3)}`;
    return Date.parse(`${ts[1]}T${ts[2]}${zone}`);
  }
  if (typeof v === 'string' && /^-?\d+(\.\d+)?$/.test(v)) return Number(Number(v).toPrecision(15));
  return v;
}

const binaryList = (t) => typeof t === 'object' && t.type === 'list' && t.element === 'binary';

function compare(what, rows, lossy = false) {
  const byId = new Map(rows.map((r) => [Number(r.id), r]));
  if (rows.length !== source.length) fail(`${what}: ${rows.length} rows, the source has ${source.length}`);
  for (const want of source) {
    const have = byId.get(Number(want.id));
    if (!have) fail(`${what}: row ${want.id} is missing`);
    for (const col of Object.keys(types)) {
      // a list<binary> as bytes: the source's and DuckDB's elements are hex; icebird reads
      // them as text (the test's bytes are ASCII)
      const bytes = (v, enc) => (binaryList(types[col]) && Array.isArray(v)
        ? v.map((x) => (typeof x === 'string' ? Buffer.from(x, enc) : x)) : v);
      const a = JSON.stringify(norm(bytes(want[col], 'hex'), lossy));
      const b = JSON.stringify(norm(bytes(have[col], lossy ? 'latin1' : 'hex'), lossy));
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
compare('mirror (icebird)', mirror, true);

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
// binary as hex (DuckDB's JSON of a blob escapes its bytes)
const sel = Object.entries(types).map(([c, t]) => `to_json(${binaryList(t)
  ? `list_transform(${JSON.stringify(c)}, x -> lower(hex(x)))` : JSON.stringify(c)})::VARCHAR AS ${JSON.stringify(c)}`).join(', ');
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
