// The exactly-once verifier: compares the Iceberg tables the pipeline wrote with
// PostgreSQL, using readers this project did not write (icebird for Iceberg metadata
// and Avro manifests, DuckDB for Parquet data and for applying position and equality
// deletes). For each table it checks
//   (1) mirror == source table, every row and column;
//   (2) the changelog holds every committed change exactly once, compared with the
//       audit record (cdc_audit.changes, filled by a trigger in the same transaction as
//       each change; see tools/loadgen/schema.sql);
//   (3) per key, the changelog's order (by _commit_lsn, _lsn) follows the source order
//       (audit seq) and Kafka offsets grow along it;
//   (4) no key has two snapshot rows (op r) in the changelog.
// Prints a short report; the last line is
//   VERIFY ok rows=<n> lost=0 duplicated=0 mismatched=0
// or VERIFY FAILED with the counts, and the exit status matches (0 / 1; 2 = usage).
//
// Usage: chaos/verify --pg <conninfo> --warehouse <dir> [--namespace <ns>] [--schema public]
//          [--tables transactions,accounts] [--path-map <prefix>=<dir>]... [--wait <s>]
//          [--snapshotted <tables>] [--verbose]
//        chaos/verify --warehouse <dir> --show <table> [--limit n] [--reader duckdb|icebird]
//          (print a table's rows: by default as the verifier reads them, DuckDB for the
//          data, numeric NaN/Infinity restored from _cdc_special; icebird: as it reads them)
//        chaos/verify --warehouse <dir> --show <table> --sql <query>  (DuckDB, the table as t)
// --path-map maps a location prefix written in the metadata (s3://warehouse/) to a
// local directory, e.g. a warehouse copied out of MinIO. --schema is the PostgreSQL
// schema of the source tables; --namespace the warehouse namespace (default: public if
// the table is there, else the namespace directory that holds it). --wait retries until the check
// passes or the time is up (catch-up after the load stops). --snapshotted names tables an
// incremental snapshot read while the pipeline ran (added to it, or re-snapshotted): their
// changelogs hold snapshot rows and the latest part of each key's history (verifyTable).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { fileFetch } from './filefetch.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const readers = () => import(pathToFileURL(path.join(root, 'tests/js/deploy/readers.mjs')).href);

// ---- locations -------------------------------------------------------------------------

let pathMaps = []; // [prefix, localDir]

/** Maps a location from Iceberg metadata (path, file:// URL, s3:// URL) to a local path. */
export function localPath(loc) {
  let s = String(loc).replace(/^s3a:\/\//, 's3://');
  const m = s.match(/^https:\/\/([^./]+)\.s3\.amazonaws\.com\/(.*)$/); // icebird's s3 translation
  if (m) s = `s3://${m[1]}/${m[2]}`;
  for (const [prefix, dir] of pathMaps) {
    const p = prefix.replace(/^s3a:\/\//, 's3://');
    if (s.startsWith(p)) return path.join(dir, s.slice(p.length));
  }
  if (s.startsWith('file://')) return fileURLToPath(s);
  return s;
}

/** fetch() for icebird over local files only (chaos/filefetch.mjs). */
function installFileFetch() {
  globalThis.fetch = fileFetch(
    (url) => {
      const p = localPath(url);
      return p.startsWith('/') ? p : null;
    },
    // never reach out to the network: every location must map to a local file
    async (input) => new Response(null, {
      status: 404,
      statusText: `no local path for ${typeof input === 'string' ? input : input.url} (use --path-map)`,
    }));
}

// ---- canonical values ------------------------------------------------------------------

/** Microseconds since the epoch from an ISO-like timestamp string, as a string. */
function tsMicros(s) {
  const m = String(s).match(
    /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}(?::?\d{2})?)?$/);
  if (!m) return String(s);
  const ms = Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6]);
  let off = 0;
  if (m[8] && m[8] !== 'Z') {
    const digits = m[8].slice(1).replace(':', '');
    const sign = m[8][0] === '-' ? -1 : 1;
    off = sign * (Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2, 4) || 0)) * 60000;
  }
  const frac = (m[7] ?? '').padEnd(6, '0').slice(0, 6);
  return (BigInt(ms - off) * 1000n + BigInt(frac)).toString();
}

/** The canonical text of a value of an Iceberg type, from PostgreSQL JSON or DuckDB. */
export function canon(type, v) {
  if (v === null || v === undefined) return null;
  if (type === 'timestamptz' || type === 'timestamp') {
    return /^-?\d+$/.test(String(v)) ? String(v) : tsMicros(v);
  }
  if (type === 'boolean') return String(v === true || v === 't' || v === 'true');
  if (type === 'double' || type === 'float' || type === 'int' || type === 'long' ||
      String(type).startsWith('decimal')) {
    const n = Number(v);
    return Number.isNaN(n) ? String(v) : String(n);
  }
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

/** DuckDB expression giving a column in a form canon() accepts. */
function duckExpr(field) {
  const c = `"${field.name.replaceAll('"', '""')}"`;
  // 'infinity' / '-infinity' (stored as DuckDB's own infinities, docs/worker.md "Values no
  // Iceberg type holds"): epoch_us() has no value for them, their text is PostgreSQL's
  if (field.type === 'timestamptz' || field.type === 'timestamp') {
    return `CASE WHEN isinf(${c}) THEN CAST(${c} AS VARCHAR) ELSE CAST(epoch_us(${c}) AS VARCHAR) END`;
  }
  if (field.type === 'double' || field.type === 'float') return `CAST(${c} AS DOUBLE)`;
  return `CAST(${c} AS VARCHAR)`;
}

// ---- Iceberg ----------------------------------------------------------------------------

const sqlStr = (s) => `'${String(s).replaceAll("'", "''")}'`;
const ident = (s) => `"${String(s).replaceAll('"', '""')}"`;
// a DuckDB list literal of the files' local paths
const list = (files) => `[${files.map((x) => sqlStr(x.local)).join(', ')}]`;

/**
 * The files the current snapshot of the table in dir lists (icebird: metadata and Avro
 * manifests): data, position deletes and equality deletes, each {orig, local, seq} (its
 * location as written, the local path, its data sequence number; equality deletes also
 * ids, the equality field ids), with the current schema, its fields of primitive type,
 * every schema, and the snapshot (null when the table has none yet). A table that does
 * not exist yet gives exists=false.
 */
export async function snapshotFiles(dir) {
  const { icebird } = await readers();
  if (!fs.existsSync(path.join(dir, 'metadata'))) return { exists: false, fields: [], schemas: [] };
  // a reader's error names the table and the file (a missing or cut file otherwise shows
  // as a bare RangeError of the Avro decoder)
  const metadata = await icebird.icebergMetadata({ tableUrl: dir }).catch((e) => {
    throw new Error(`${dir}: reading the table metadata: ${e.message}`);
  });
  const schema = metadata.schemas.find((s) => s['schema-id'] === metadata['current-schema-id']);
  const fields = schema.fields.filter((f) => typeof f.type === 'string');
  const schemas = metadata.schemas;
  const snapId = metadata['current-snapshot-id'];
  if (snapId === undefined || snapId === null || snapId < 0) {
    return { exists: true, fields, schemas, schema, snapshot: null, data: [], posDeletes: [], eqDeletes: [] };
  }
  const snapshot = metadata.snapshots.find((s) => s['snapshot-id'] === snapId);
  const manifestList = snapshot['manifest-list'];
  if (!fs.existsSync(localPath(manifestList))) {
    throw new Error(`${dir}: the manifest list of the current snapshot, ${manifestList}, is missing`);
  }
  const manifests = await icebird.icebergManifests(metadata).catch((e) => {
    throw new Error(`${dir}: reading the manifests of the current snapshot (list ${manifestList}): ${e.message}`);
  });
  const data = [];
  const posDeletes = [];
  const eqDeletes = [];
  for (const { entries } of manifests) {
    for (const e of entries) {
      if (e.status === 2) continue;
      const f = e.data_file;
      const rec = { orig: f.file_path, local: localPath(f.file_path), seq: BigInt(e.sequence_number ?? 0) };
      if (!f.content) data.push(rec);
      else if (f.content === 1) posDeletes.push(rec);
      else eqDeletes.push({ ...rec, ids: f.equality_ids ?? schema['identifier-field-ids'] ?? [] });
    }
  }
  return { exists: true, fields, schemas, schema, snapshot, data, posDeletes, eqDeletes };
}

/**
 * Reads the rows of files ({data, posDeletes, eqDeletes} as snapshotFiles gives them, with
 * its schema and fields) with DuckDB into the temporary table __d of conn: every data
 * file's rows, columns matched by field id, minus the rows a position delete of a later
 * or equal sequence number or an equality delete of a later sequence number removes.
 * Besides the fields __d has __seq (the row's data sequence number) and, when position
 * deletes are read or withFile is set, __file and __pos (the row's file and position in
 * it). Returns false (and leaves no __d) without data files, else how the columns were
 * matched: 'id' or 'footers' (by: 'footers' reads that way only, for tests).
 *
 * Columns are matched by Iceberg field id (Parquet field_id), as the spec says; names in
 * files may differ (renames, writers that sanitize names). Two ways:
 *  - by id (readById): DuckDB's read_parquet maps the columns itself (its `schema`
 *    parameter: field id -> name and type), every file in one read, each footer parsed
 *    once; a column a file lacks is null and a narrower type (int for long, a smaller
 *    decimal) is cast. A file without field ids would read as nulls, so the result is
 *    checked: a null in a required field (every key is one) sends the read the other way;
 *  - by footers (readByFooters): each file's columns from parquet_schema first (a second
 *    pass over every footer: ~1 ms a file), by id or else by name, files of the same
 *    shape read together.
 */
export async function readSnapshotRows(conn, files, { withFile = false, by = 'id' } = {}) {
  await conn.run('DROP TABLE IF EXISTS __d');
  if (!files.data.length) return false;
  if (by === 'id' && await readById(conn, files, withFile)) return 'id';
  await readByFooters(conn, files, withFile);
  return 'footers';
}

// The DuckDB type of an Iceberg primitive type, as DuckDB reads the Parquet type the
// writers use for it (null: not mapped, read by footers).
const DUCK_TYPES = { boolean: 'BOOLEAN', int: 'INTEGER', long: 'BIGINT', float: 'FLOAT',
  double: 'DOUBLE', date: 'DATE', time: 'TIME', timestamp: 'TIMESTAMP',
  timestamptz: 'TIMESTAMPTZ', string: 'VARCHAR', uuid: 'UUID', binary: 'BLOB' };
function duckType(t) {
  if (DUCK_TYPES[t]) return DUCK_TYPES[t];
  if (/^decimal\(\d+, *\d+\)$/.test(t)) return t.replace(/ /g, '').toUpperCase();
  if (/^fixed\[\d+\]$/.test(t)) return 'BLOB';
  return null;
}

/** The equality deletes grouped by their list of equality field ids, with those fields. */
function eqGroups(schema, eqDeletes) {
  const byIds = new Map();
  for (const e of eqDeletes) {
    const k = e.ids.join(',');
    if (!byIds.has(k)) {
      byIds.set(k, { keyFields: k.split(',').map((id) => schema.fields.find((f) => f.id === Number(id))),
        files: [] });
    }
    byIds.get(k).files.push(e);
  }
  return [...byIds.values()];
}

/**
 * The statement that reads the rows: the data rows (union(files, fields)), then each kind
 * of delete as a join against the highest sequence number that deletes the row's file
 * position or key (hash joins on equalities only, so the deletes cost about one pass over
 * the rows whatever their file count), keeping a row unless a delete of a high enough
 * sequence number matched. eqSet(i, group) is a relation of group i's keys with __eds, the
 * highest sequence number deleting each. Data files at or past the newest equality
 * delete's sequence number are beyond its reach (a delete applies to older files only) and
 * skip that join.
 */
function snapshotQuery({ data, posDeletes = [] }, groups, union, eqSet) {
  const maxEq = groups.flatMap((g) => g.files).reduce((m, e) => (e.seq > m ? e.seq : m), -1n);
  const reached = groups.length === 1 ? data.filter((f) => f.seq < maxEq) : data;
  const beyond = groups.length === 1 ? data.filter((f) => f.seq >= maxEq) : [];
  const posJoin = (q) => (posDeletes.length ? `SELECT d.* FROM (${q}) d LEFT JOIN (
        SELECT p.file_path AS __pf, p.pos AS __pp, max(f.__seqn) AS __pds
        FROM read_parquet(${list(posDeletes)}, filename = '__fname') p
        JOIN (VALUES ${posDeletes.map((x) => `(${sqlStr(x.local)}, ${x.seq})`).join(', ')}) f(__local, __seqn)
          ON p.__fname = f.__local
        GROUP BY ALL) x ON d.__file = x.__pf AND d.__pos = x.__pp
      WHERE x.__pds IS NULL OR d.__seq > x.__pds` : q);
  let q = reached.length ? posJoin(union(reached)) : '';
  groups.forEach((g, i) => {
    if (!q) return;
    // (a required field has no nulls: a plain equality, which hashes faster)
    const on = g.keyFields.map((f) => `d.${ident(f.name)} ${f.required ? '=' : 'IS NOT DISTINCT FROM'} x.${ident(f.name)}`)
      .join(' AND ');
    // Every delete newer than every file it reaches (what compaction leaves: its base
    // files are older than the deletes it keeps) deletes its key from all of them: a
    // plain anti-join on the keys, without the sequence numbers (measured ~5 % of a read).
    const minEq = g.files.reduce((m, e) => (m === null || e.seq < m ? e.seq : m), null);
    q = reached.every((f) => f.seq < minEq)
      ? `SELECT d.* FROM (${q}) d ANTI JOIN ${eqSet(i, g)} x ON ${on}`
      : `SELECT d.* FROM (${q}) d LEFT JOIN ${eqSet(i, g)} x ON ${on}
      WHERE x.__eds IS NULL OR d.__seq >= x.__eds`;
  });
  if (beyond.length) q = q ? `${q} UNION ALL BY NAME ${posJoin(union(beyond))}` : posJoin(union(beyond));
  return q;
}

// A row's sequence number (and file) by the reader's file_index in a list literal, no join.
function seqColumns(fs, withPos) {
  const seqs = new Set(fs.map((f) => f.seq));
  const seq = seqs.size === 1 ? `${fs[0].seq}::BIGINT`
    : `list_extract([${fs.map((f) => f.seq).join(', ')}], (__r.file_index + 1)::BIGINT)::BIGINT`;
  return `${seq} AS __seq${withPos
    ? `, list_extract([${fs.map((f) => sqlStr(f.orig)).join(', ')}], (__r.file_index + 1)::BIGINT) AS __file, file_row_number AS __pos` : ''}`;
}

/** readSnapshotRows by id (see there); false, leaving nothing behind, when it does not apply. */
async function readById(conn, { schema, fields, data, posDeletes = [], eqDeletes = [] }, withFile) {
  const groups = eqGroups(schema, eqDeletes);
  const required = fields.filter((f) => f.required);
  if (!required.length || fields.some((f) => !duckType(f.type))
    || groups.some((g) => g.keyFields.some((f) => !f || !f.required || !duckType(f.type)))) return false;
  const withPos = withFile || posDeletes.length > 0;
  const read = (fs, wanted, pos) => {
    const map = wanted.map((f) => `${f.id}: {name: ${sqlStr(f.name)}, type: ${sqlStr(duckType(f.type))}, default_value: NULL}`);
    return `SELECT ${wanted.map((f) => ident(f.name)).join(', ')}, ${seqColumns(fs, pos)}
       FROM read_parquet(${list(fs)}, schema = MAP {${map.join(', ')}}${pos ? ', file_row_number = true' : ''}) __r`;
  };
  const anyNull = async (table, fs) => Number((await (await conn.runAndReadAll(
    `SELECT count(*) AS n FROM ${table} WHERE ${fs.map((f) => `${ident(f.name)} IS NULL`).join(' OR ')}`))
    .getRowObjectsJson())[0].n) > 0;
  const drop = async () => {
    for (let i = 0; i < groups.length; i++) await conn.run(`DROP TABLE IF EXISTS __eq${i}`);
  };
  // the delete sets first, checked like the rows (a key is required)
  for (const [i, g] of groups.entries()) {
    await conn.run(`CREATE OR REPLACE TEMP TABLE __eq${i} AS SELECT ${g.keyFields.map((f) => ident(f.name)).join(', ')},
      max(__seq) AS __eds FROM (${read(g.files, g.keyFields, false)}) GROUP BY ALL`);
    if (await anyNull(`__eq${i}`, g.keyFields)) {
      await drop();
      return false;
    }
  }
  await conn.run(`CREATE TEMP TABLE __d AS ${snapshotQuery({ data, posDeletes }, groups,
    (fs) => read(fs, fields, withPos), (i) => `__eq${i}`)}`);
  await drop();
  if (await anyNull('__d', required)) {
    await conn.run('DROP TABLE __d');
    return false;
  }
  return true;
}

/** readSnapshotRows by the files' footers (see there). */
async function readByFooters(conn, { schema, fields, data, posDeletes = [], eqDeletes = [] }, withFile) {
  const fileColumns = new Map();
  // A column's Parquet type is part of a file's shape: after a type promotion (int to
  // long, float to double, a wider decimal) older files hold the narrower type, and one multi-file read
  // takes its types from its first file, so files of different types are read apart and
  // every promotable column is cast to the current schema's type.
  const fileTypes = new Map();
  const pq = await (await conn.runAndReadAll(`SELECT file_name, name, field_id,
        concat_ws('/', type, type_length, precision, scale, logical_type) AS type
      FROM parquet_schema(${list([...data, ...eqDeletes])})`)).getRowObjectsJson();
  for (const c of pq) {
    if (!fileColumns.has(c.file_name)) fileColumns.set(c.file_name, new Map());
    const m = fileColumns.get(c.file_name);
    if (c.field_id !== null && c.field_id !== undefined) m.set(`id:${c.field_id}`, c.name);
    m.set(`name:${c.name}`, c.name);
    fileTypes.set(c.file_name, `${fileTypes.get(c.file_name) ?? ''}\u0001${c.name}:${c.type}`);
  }
  const widened = (t) => ({ long: 'BIGINT', double: 'DOUBLE' })[t]
    ?? (/^decimal\(\d+, *\d+\)$/.test(t) ? t.replace(/ /g, '').toUpperCase() : null);
  const projection = (file, wanted) => {
    const m = fileColumns.get(file.local) ?? new Map();
    return wanted.map((f) => {
      const col = m.get(`id:${f.id}`) ?? m.get(`name:${f.name}`);
      const v = col ? ident(col) : 'NULL';
      return `${widened(f.type) ? `CAST(${v} AS ${widened(f.type)})` : v} AS ${ident(f.name)}`;
    }).join(', ');
  };
  // Files with the same columns and projection are read by one multi-file read_parquet
  // (a table between schema changes is one group, whatever its file count). Groups are
  // united by name.
  const withPos = withFile || posDeletes.length > 0;
  const union = (files, wanted) => {
    const groups = new Map();
    for (const f of files) {
      const proj = projection(f, wanted);
      const key = `${fileTypes.get(f.local) ?? ''}\u0002${proj}`;
      if (!groups.has(key)) groups.set(key, { proj, files: [] });
      groups.get(key).files.push(f);
    }
    return [...groups.values()].map(({ proj, files: fs }) => {
      const pos = withPos && wanted === fields;
      return `SELECT ${proj}, ${seqColumns(fs, pos)}
       FROM read_parquet(${list(fs)}${pos ? ', file_row_number = true' : ''}) __r`;
    }).join(' UNION ALL BY NAME ');
  };
  const keys = (g) => g.keyFields.map((f) => ident(f.name)).join(', ');
  await conn.run(`CREATE TEMP TABLE __d AS ${snapshotQuery({ data, posDeletes }, eqGroups(schema, eqDeletes),
    (fs) => union(fs, fields),
    (i, g) => `(SELECT ${keys(g)}, max(__seq) AS __eds FROM (${union(g.files, g.keyFields)}) GROUP BY ALL)`)}`);
}

/**
 * Reads the current snapshot of the table in dir: rows (objects of canonical values, by
 * column name) after position and equality deletes, the schema's fields, and the
 * snapshot summary. A table that does not exist yet reads as empty (exists=false).
 */
export async function readIcebergTable(dir, conn) {
  const files = await snapshotFiles(dir);
  const { exists, fields, schemas } = files;
  const summary = files.snapshot?.summary ?? {};
  if (!exists) return { exists, rows: [], fields, schemas };
  if (!(await readSnapshotRows(conn, files))) return { exists, rows: [], fields, schemas, summary };
  const present = new Set((await (await conn.runAndReadAll('DESCRIBE __d')).getRowObjectsJson())
    .map((r) => r.column_name));
  const sel = fields.map((f) => (present.has(f.name) ? duckExpr(f) : 'NULL') + ` AS ${ident(f.name)}`);
  const reader = await conn.runAndReadAll(`SELECT ${sel.join(', ')} FROM __d`);
  const raw = reader.getRowObjectsJson();
  const types = new Map(fields.map((f) => [f.name, f.type]));
  const rows = raw.map((r) => {
    const o = {};
    for (const f of fields) o[f.name] = canon(f.type, r[f.name]);
    // numeric NaN / Infinity / -Infinity: null in the decimal column, named by the row's
    // _cdc_special (docs/worker.md, "Values no Iceberg type holds"): read as the value
    if (o._cdc_special) {
      for (const [name, v] of Object.entries(JSON.parse(o._cdc_special))) {
        if (types.has(name) && o[name] === null) o[name] = canon(types.get(name), v);
      }
    }
    return o;
  });
  return { exists: true, rows, fields, schemas, summary };
}

/**
 * The source's columns as the table's current schema holds them (docs/worker.md,
 * "Schema changes"): columns are resolved by field id, so a field renamed since keeps
 * its earlier names (`alt`, looked up in row images recorded before the rename), and a
 * column whose type changed beyond an Iceberg promotion is the field under its source
 * name plus the retired fields of its earlier types `<name>__v<k>` (a source column of
 * that name wins: the retired one then ends in `__f<id>`) (`members`, newest first, by
 * field id: a changelog row holds its value in one of them, a mirror row in the first).
 * Tables versioned before the source name held the current values have `<name>__v<k>`
 * as the current field and the first type under `<name>`: the same grouping serves. A
 * field named like a source column (`sourceNames`) is that column, whatever its name.
 */
export function logicalColumns(fields, schemas = [], sourceNames = new Set()) {
  const names = new Map(); // field id -> names it had
  for (const s of schemas) {
    for (const f of s.fields ?? []) {
      if (!names.has(f.id)) names.set(f.id, new Set());
      names.get(f.id).add(f.name);
    }
  }
  const current = new Set(fields.map((f) => f.name));
  const groups = new Map();
  for (const f of fields) {
    const m = f.name.match(/^(.*)__v(\d+)(?:__f\d+)*$/);
    const base = m && current.has(m[1]) && !sourceNames.has(f.name) ? m[1] : f.name;
    if (!groups.has(base)) groups.set(base, []);
    groups.get(base).push({ f });
  }
  const out = [];
  for (const [name, list] of groups) {
    list.sort((a, b) => b.f.id - a.f.id); // a newer type has a newer field id
    const alt = new Set();
    for (const { f } of list) for (const n of names.get(f.id) ?? []) if (!current.has(n)) alt.add(n);
    out.push({ name, type: list[0].f.type, members: list.map(({ f }) => f.name), alt: [...alt] });
  }
  return out;
}

// ---- PostgreSQL -------------------------------------------------------------------------

/** Runs a query through psql and yields one text value per row (the first column). */
async function psqlLines(dsn, sql) {
  const child = spawn('psql', ['-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-d', dsn, '-c', sql], {
    env: { ...process.env, PGTZ: 'UTC', PGCLIENTENCODING: 'UTF8' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr.on('data', (d) => { err += d; });
  const lines = [];
  for await (const line of createInterface({ input: child.stdout, crlfDelay: Infinity })) {
    if (line !== '') lines.push(line);
  }
  const code = await new Promise((res) => child.on('close', res));
  if (code !== 0) throw new Error(`psql failed: ${err.trim()}`);
  return lines;
}

async function primaryKey(dsn, ns, table) {
  const cols = await psqlLines(dsn, `SELECT a.attname FROM pg_index i JOIN pg_attribute a
      ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
      WHERE i.indrelid = ${sqlStr(`${ns}.${table}`)}::regclass AND i.indisprimary ORDER BY a.attnum`);
  if (cols.length !== 1) throw new Error(`table "${ns}.${table}" needs a single-column primary key (has ${cols.length})`);
  return cols[0];
}

// ---- the checks -------------------------------------------------------------------------

/**
 * The source's column names over time (cdc_audit.columns, filled by an event trigger
 * after each CREATE/ALTER TABLE: tools/loadgen/schema.sql). Returns a function that
 * renames the columns of an audit image recorded at `seq` to the names the same columns
 * (by attnum) have now; a column dropped since goes. Without a history (no event
 * trigger), images are returned as they are.
 */
async function columnHistory(dsn, schema, table) {
  let rows = [];
  try {
    rows = (await psqlLines(dsn, `SELECT json_build_object('seq', seq, 'attnum', attnum, 'name', attname)::text
        FROM cdc_audit.columns WHERE tbl = ${sqlStr(table)} ORDER BY seq`)).map((l) => JSON.parse(l));
  } catch {
    return (img) => img; // a database set up before the history existed
  }
  if (!rows.length) return (img) => img;
  const now = new Map((await psqlLines(dsn, `SELECT json_build_object('attnum', attnum, 'name', attname)::text
      FROM pg_attribute WHERE attrelid = ${sqlStr(`${schema}.${table}`)}::regclass
      AND attnum > 0 AND NOT attisdropped`)).map((l) => JSON.parse(l)).map((c) => [c.attnum, c.name]));
  const eras = []; // [{seq, byName: Map(name -> attnum)}], ascending
  for (const r of rows) {
    if (!eras.length || eras[eras.length - 1].seq !== Number(r.seq)) eras.push({ seq: Number(r.seq), byName: new Map() });
    eras[eras.length - 1].byName.set(r.name, r.attnum);
  }
  return (img, seq) => {
    if (img === null || typeof img !== 'object') return img;
    let era = null;
    for (const e of eras) if (e.seq < Number(seq)) era = e;
    if (era === null) return img;
    const out = {};
    for (const [k, v] of Object.entries(img)) {
      const attnum = era.byName.get(k);
      if (attnum === undefined) {
        if (!(k in out)) out[k] = v;
        continue;
      }
      const name = now.get(attnum);
      if (name !== undefined) out[name] = v; // else: dropped since
    }
    return out;
  };
}

/** A source row or audit image by logical column; a name absent from it may be an earlier name. */
function imageOf(cols, obj, keyOnly, pk) {
  const out = {};
  for (const c of cols) {
    if (c.name.startsWith('_')) continue;
    if (keyOnly && c.name !== pk) continue;
    let v = obj[c.name];
    for (const a of c.alt ?? []) if (v === undefined) v = obj[a];
    out[c.name] = canon(c.type, v);
  }
  return out;
}

/**
 * A row read from Iceberg by logical column: the first member field that holds a value,
 * or with `current` the newest member only (a mirror row holds the current value under
 * the current field: the capture's backfill after a type change rewrites every row).
 */
function tableImage(cols, row, keyOnly, pk, current = false) {
  const out = {};
  for (const c of cols) {
    if (c.name.startsWith('_')) continue;
    if (keyOnly && c.name !== pk) continue;
    let v = null;
    const members = c.members ?? [c.name];
    for (const m of current ? members.slice(0, 1) : members) if (v === null || v === undefined) v = row[m];
    out[c.name] = v ?? null;
  }
  return out;
}

/** The columns a changelog row's _cdc_special names "unchanged-toast". */
function unknownToast(row) {
  if (!row._cdc_special) return [];
  return Object.entries(JSON.parse(row._cdc_special))
    .filter(([, v]) => v === 'unchanged-toast').map(([k]) => k);
}

function diffImage(a, b) {
  for (const k of Object.keys(a)) if (a[k] !== b[k]) return k;
  return null;
}

const short = (v) => {
  const s = JSON.stringify(v);
  return s && s.length > 80 ? `${s.slice(0, 77)}...` : s;
};

/** A table's current metadata version (its version-hint.text), or null. */
function metadataVersion(dir) {
  try {
    return fs.readFileSync(path.join(dir, 'metadata', 'version-hint.text'), 'utf8').trim();
  } catch {
    return null;
  }
}

/** The warehouse namespace holding table: the given one, else public, else any. */
function findNamespace(warehouse, ns, table) {
  if (ns) return ns;
  if (fs.existsSync(path.join(warehouse, 'public', table, 'metadata'))) return 'public';
  let dirs = [];
  try {
    dirs = fs.readdirSync(warehouse);
  } catch {
    return 'public';
  }
  return dirs.find((d) => fs.existsSync(path.join(warehouse, d, table, 'metadata'))) ?? 'public';
}

export async function verifyTable({ dsn, warehouse, schema = 'public', namespace, table, conn, log,
  snapshotted = false }) {
  const ns = findNamespace(warehouse, namespace, table);
  const r = { table, rows: 0, lost: 0, duplicated: 0, mismatched: 0, pending: 0, notes: [] };
  const note = (s) => { if (r.notes.length < 20) r.notes.push(s); };
  // A table read by an incremental snapshot while its changes were captured (added to a
  // running pipeline, or re-snapshotted: docs/capture.md): its changelog holds, per key,
  // snapshot rows (op r) that are no change of the source, and the changes captured since
  // the table joined, the latest part of the key's history. So the r rows are taken out:
  // each must show the key as some audit record left it, and every change after the
  // latest such state must be there. The remaining changes are compared with the end of
  // the audit history (a suffix of it), by the usual rules.
  const alignSnapshotted = (k, want, got) => {
    const snaps = got.filter((c) => c._op === 'r');
    const changes = got.filter((c) => c._op !== 'r');
    let need = 0; // audit changes at the end that must be in the changelog
    for (const c of snaps) {
      let at = -1;
      for (let i = want.length - 1; i >= 0 && at < 0; i--) {
        if (want[i].op !== 'd' && !diffImage(imageOf(cfields, want[i].img, false, pk), tableImage(cfields, c, false, pk))) at = i;
      }
      if (at < 0) {
        r.mismatched++;
        note(`changelog: key ${k} snapshot row at lsn ${c._lsn} matches no state of the key in the audit`);
      } else {
        need = Math.max(need, want.length - 1 - at);
      }
    }
    const n = Math.max(need, Math.min(changes.length, want.length));
    return [want.slice(want.length - n), changes];
  };
  const pk = await primaryKey(dsn, schema, table);
  const sourceNames = new Set(await psqlLines(dsn, `SELECT attname FROM pg_attribute
      WHERE attrelid = ${sqlStr(`${schema}.${table}`)}::regclass AND attnum > 0 AND NOT attisdropped`));

  // the tables' metadata versions before the read: a commit that lands while the two
  // tables are read changes one of them (checked at the end)
  const dirs = [path.join(warehouse, ns, table), path.join(warehouse, ns, `${table}_changelog`)];
  const versionsBefore = dirs.map(metadataVersion);

  // (1) mirror == source
  const mirror = await readIcebergTable(dirs[0], conn);
  const source = (await psqlLines(dsn, `SELECT to_jsonb(t)::text FROM ${ident(schema)}.${ident(table)} t`))
    .map((l) => JSON.parse(l));
  let fields = logicalColumns(mirror.fields, mirror.schemas, sourceNames);
  if (!mirror.exists) note(`mirror ${ns}.${table}: no table in the warehouse`);
  if (!fields.length && source.length) {
    fields = Object.keys(source[0]).map((name) => ({ name, type: 'string' }));
  }
  const types = Object.fromEntries(fields.map((f) => [f.name, f.type]));
  const srcByKey = new Map(source.map((s) => [canon(types[pk] ?? 'long', s[pk]), s]));
  const mirByKey = new Map();
  for (const m of mirror.rows) {
    const k = m[pk];
    if (mirByKey.has(k)) {
      r.duplicated++;
      note(`mirror: key ${k} appears more than once`);
    } else {
      mirByKey.set(k, m);
    }
  }
  for (const [k, s] of srcByKey) {
    r.rows++;
    const m = mirByKey.get(k);
    if (!m) {
      r.lost++;
      note(`mirror: key ${k} missing`);
      continue;
    }
    const want = imageOf(fields, s, false, pk);
    const got = tableImage(fields, m, false, pk, true);
    const col = diffImage(want, got);
    if (col) {
      r.mismatched++;
      note(`mirror: key ${k} column ${col}: source ${short(want[col])}, mirror ${short(got[col])}`);
    }
  }
  for (const k of mirByKey.keys()) {
    if (!srcByKey.has(k)) {
      r.duplicated++;
      note(`mirror: key ${k} is not in the source (deleted or never there)`);
    }
  }

  // (2) + (3) changelog vs audit
  const changelog = await readIcebergTable(dirs[1], conn);
  const audit = (await psqlLines(dsn, `SELECT json_build_object('seq', seq, 'op', op, 'pk', pk,
      'img', row_image, 'lsn', (wal_lsn - '0/0'::pg_lsn)::text)::text
      FROM cdc_audit.changes WHERE tbl = ${sqlStr(table)} ORDER BY seq`))
    .map((l) => JSON.parse(l));
  const rename = await columnHistory(dsn, schema, table);
  for (const a of audit) a.img = rename(a.img, a.seq);
  if (!changelog.exists && audit.length) note(`changelog ${ns}.${table}_changelog: no table in the warehouse`);
  const cfields = changelog.fields.length ? logicalColumns(changelog.fields, changelog.schemas, sourceNames) : fields;
  const ctypes = Object.fromEntries(cfields.map((f) => [f.name, f.type]));
  const keyType = ctypes[pk] ?? types[pk] ?? 'long';
  const auditByKey = new Map();
  for (const a of audit) {
    const k = canon(keyType, a.pk);
    if (!auditByKey.has(k)) auditByKey.set(k, []);
    auditByKey.get(k).push(a);
  }
  const clByKey = new Map();
  const seen = new Set();
  for (const c of changelog.rows) {
    const k = c[pk];
    const id = `${k}|${c._lsn}|${c._op}`;
    if (c._lsn !== null && seen.has(id)) {
      // the dedup identity (entity, lsn, op) twice: a duplicate
      r.duplicated++;
      note(`changelog: key ${k} change at lsn ${c._lsn} op ${c._op} appears more than once`);
      continue;
    }
    seen.add(id);
    if (!clByKey.has(k)) clByKey.set(k, []);
    clByKey.get(k).push(c);
  }
  // Snapshot reads exactly once (docs/worker.md, "Snapshot reads exactly once"): a key
  // with two snapshot rows (op r) was read twice, e.g. by a chunk the capture read again
  // after a crash.
  for (const [k, list] of clByKey) {
    const reads = list.filter((c) => c._op === 'r').length;
    if (reads > 1) {
      r.duplicated += reads - 1;
      note(`changelog: key ${k} has ${reads} snapshot rows (op r)`);
    }
  }
  const big = (v) => { try { return BigInt(v ?? 0); } catch { return 0n; } };
  for (const list of clByKey.values()) {
    // snapshot rows (r) come first; then commit order, then position inside the transaction
    list.sort((x, y) => {
      const rx = x._op === 'r' ? 0 : 1;
      const ry = y._op === 'r' ? 0 : 1;
      if (rx !== ry) return rx - ry;
      const c = big(x._commit_lsn) - big(y._commit_lsn);
      if (c !== 0n) return c < 0n ? -1 : 1;
      const l = big(x._lsn) - big(y._lsn);
      return l === 0n ? 0 : l < 0n ? -1 : 1;
    });
  }
  // the changelog's commit frontier: missing changes made after it may only be late
  let frontier = null;
  for (const c of changelog.rows) {
    const v = big(c._commit_lsn);
    if (frontier === null || v > frontier) frontier = v;
  }
  const keys = new Set([...auditByKey.keys(), ...clByKey.keys()]);
  for (const k of keys) {
    let want = auditByKey.get(k) ?? [];
    let got = clByKey.get(k) ?? [];
    if (snapshotted) [want, got] = alignSnapshotted(k, want, got);
    r.rows += want.length;
    const n = Math.min(want.length, got.length);
    let orderBad = false;
    for (let i = 0; i < n; i++) {
      const a = want[i];
      const c = got[i];
      const op = a.op === 'r' ? 'r' : a.op;
      if (c._op !== op) {
        r.mismatched++;
        orderBad = true;
        note(`changelog: key ${k} change ${i + 1}: expected op ${op} (audit seq ${a.seq}), found ${c._op} at lsn ${c._lsn}`);
        continue;
      }
      const keyOnly = op === 'd';
      const aimg = imageOf(cfields, a.img, keyOnly, pk);
      const cimg = tableImage(cfields, c, keyOnly, pk);
      // an unchanged TOASTed value of a row older than the capture, which the pipeline
      // never had (docs/worker.md, "Unchanged TOAST values"): unknown, not compared
      for (const col of unknownToast(c)) if (col in aimg) cimg[col] = aimg[col];
      const col = diffImage(aimg, cimg);
      if (col) {
        r.mismatched++;
        note(`changelog: key ${k} change ${i + 1} (${op}, audit seq ${a.seq}) column ${col}: ` +
          `source ${short(aimg[col])}, changelog ${short(cimg[col])}`);
      }
      if (i > 0 && c._kafka_partition === got[i - 1]._kafka_partition &&
          big(c._kafka_offset) <= big(got[i - 1]._kafka_offset) && !orderBad) {
        r.mismatched++;
        orderBad = true;
        note(`changelog: key ${k} Kafka offsets go backwards at change ${i + 1}`);
      }
    }
    if (want.length > got.length) {
      r.lost += want.length - got.length;
      for (const a of want.slice(got.length)) {
        if (a.lsn !== null && a.lsn !== undefined && frontier !== null && BigInt(a.lsn) > frontier) r.pending++;
      }
      note(`changelog: key ${k} has ${got.length} of ${want.length} changes`);
    } else if (got.length > want.length) {
      r.duplicated += got.length - want.length;
      note(`changelog: key ${k} has ${got.length} changes, the source made ${want.length}`);
    }
  }
  // A commit landed while the tables were read (still catching up): the changelog has a
  // newer checkpoint than the mirror read before it (every change that gives the
  // changelog a file gives the mirror one in the same epoch), or either table's metadata
  // version moved during the read. A mirror newer than its changelog alone is no sign:
  // a backfill after DDL and a schema marker commit to the mirror only (docs/capture.md),
  // so after them the two differ for good.
  const mc = mirror.summary?.['cdc.checkpoint-id'];
  const cc = changelog.summary?.['cdc.checkpoint-id'];
  r.unsettled = (mc !== undefined && cc !== undefined && big(cc) > big(mc)) ||
    dirs.map(metadataVersion).some((v, i) => v !== versionsBefore[i]);
  if (log) {
    log(`${ns}.${table}: mirror ${mirror.rows.length} rows vs source ${source.length}; ` +
      `changelog ${changelog.rows.length} changes vs audit ${audit.length}; ` +
      `lost=${r.lost} duplicated=${r.duplicated} mismatched=${r.mismatched}` +
      (r.pending ? ` (${r.pending} of the lost changes were made after the changelog's last commit LSN: not caught up yet?)` : '') +
      (mirror.summary?.['cdc.checkpoint-id'] ? ` (checkpoint ${mirror.summary['cdc.checkpoint-id']}` +
        `, changelog ${changelog.summary?.['cdc.checkpoint-id'] ?? '-'})` : ''));
  }
  return r;
}

let fetchInstalled = false;

/** Sets the location prefix maps and serves icebird's fetches from local files. */
export function configure(maps) {
  pathMaps = maps;
  if (!fetchInstalled) installFileFetch();
  fetchInstalled = true;
}

export async function verify({ dsn, warehouse, schema = 'public', namespace, tables, log = null, maps = [],
  snapshotted = [] }) {
  configure(maps);
  const { DuckDBInstance } = await readers();
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  const total = { rows: 0, lost: 0, duplicated: 0, mismatched: 0, pending: 0, notes: [] };
  try {
    for (const t of tables) {
      const r = await verifyTable({ dsn, warehouse, schema, namespace, table: t, conn, log,
        snapshotted: snapshotted.includes(t) });
      for (const k of ['rows', 'lost', 'duplicated', 'mismatched', 'pending']) total[k] += r[k];
      total.unsettled = total.unsettled || r.unsettled;
      total.notes.push(...r.notes.map((n) => `${t}: ${n}`));
    }
  } finally {
    conn.closeSync?.();
  }
  total.ok = total.lost === 0 && total.duplicated === 0 && total.mismatched === 0;
  return total;
}

/** --show <table>: prints the current rows of a warehouse table as JSON lines. */
async function show(opt) {
  configure(opt.maps);
  const { DuckDBInstance } = await readers();
  const conn = await (await DuckDBInstance.create(':memory:')).connect();
  const ns = findNamespace(opt.warehouse, opt.namespace, opt.show);
  const dir = path.join(opt.warehouse, ns, opt.show);
  if (opt.reader === 'icebird') {
    // the rows as icebird alone reads them (its own Parquet reader and deletes): values
    // as it gives them, BigInts and dates as text
    const { icebird } = await readers();
    const rows = await icebird.icebergRead({ tableUrl: dir });
    const text = (v) => (typeof v === 'bigint' ? v.toString()
      : v instanceof Date ? (Number.isNaN(v.getTime()) ? 'Invalid Date' : v.toISOString()) : v);
    for (const r of rows.slice(0, opt.limit)) {
      console.log(JSON.stringify(Object.fromEntries(Object.entries(r).map(([k, v]) => [k, text(v)]))));
    }
    console.error(`${ns}.${opt.show}: ${rows.length} rows (icebird)`);
    return;
  }
  const t = await readIcebergTable(dir, conn);
  if (!t.exists) {
    console.error(`verify: no table ${ns}.${opt.show} in ${opt.warehouse}`);
    process.exit(1);
  }
  if (opt.sql) {
    // --sql: a DuckDB query over the table's current rows, as the view t
    if (t.rows.length) await conn.run('CREATE OR REPLACE TEMP VIEW t AS SELECT * FROM __d');
    else await conn.run(`CREATE OR REPLACE TEMP VIEW t AS SELECT ${t.fields.map((f) => `NULL AS ${ident(f.name)}`).join(', ') || 'NULL AS none'} WHERE false`);
    const res = await conn.runAndReadAll(opt.sql);
    for (const row of res.getRowObjectsJson()) console.log(JSON.stringify(row));
    return;
  }
  const isoMicros = (v) => {
    const n = BigInt(v);
    const ms = n / 1000n;
    const us = ((n % 1000n) + 1000n) % 1000n;
    return new Date(Number(ms)).toISOString().replace('Z', `${String(us).padStart(3, '0')}Z`);
  };
  for (const r of t.rows.slice(0, opt.limit)) {
    for (const f of t.fields) {
      if ((f.type === 'timestamptz' || f.type === 'timestamp') && /^-?\d+$/.test(r[f.name] ?? '')) r[f.name] = isoMicros(r[f.name]);
    }
    console.log(JSON.stringify(r));
  }
  console.error(`${ns}.${opt.show}: ${t.rows.length} rows (snapshot summary ${JSON.stringify(t.summary)})`);
}

function usage(msg) {
  if (msg) console.error(`verify: ${msg}`);
  console.error('usage: chaos/verify --pg <conninfo> --warehouse <dir> [--namespace public] ' +
    '[--schema public] [--tables transactions,accounts] [--snapshotted t1,t2] [--path-map <prefix>=<dir>]... [--wait <seconds>] [--verbose]\n' +
    '       chaos/verify --warehouse <dir> --show <table> [--limit 20] [--namespace <ns>] [--reader duckdb|icebird]   (rows as JSON lines)\n' +
    '       chaos/verify --warehouse <dir> --show <table> --sql <query>   (a DuckDB query over the table as t, rows as JSON lines)');
  process.exit(2);
}

async function main() {
  const args = process.argv.slice(2);
  const opt = { show: null, limit: 20, schema: 'public', namespace: undefined, tables: ['transactions', 'accounts'], snapshotted: [], maps: [], wait: 0, verbose: false };
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    const val = () => (i + 1 < args.length ? args[++i] : usage(`${a} needs a value`));
    if (a === '--pg') opt.dsn = val();
    else if (a === '--warehouse') opt.warehouse = path.resolve(val());
    else if (a === '--namespace') opt.namespace = val();
    else if (a === '--schema') opt.schema = val();
    else if (a === '--tables') opt.tables = val().split(',').filter(Boolean);
    else if (a === '--snapshotted') opt.snapshotted = val().split(',').filter(Boolean);
    else if (a === '--wait') opt.wait = Number(val());
    else if (a === '--verbose') opt.verbose = true;
    else if (a === '--show') opt.show = val();
    else if (a === '--limit') opt.limit = Number(val());
    else if (a === '--sql') opt.sql = val();
    else if (a === '--reader') opt.reader = val();
    else if (a === '--path-map') {
      const v = val();
      const eq = v.indexOf('=');
      if (eq < 1) usage(`--path-map expects <prefix>=<dir>, got "${v}"`);
      opt.maps.push([v.slice(0, eq), path.resolve(v.slice(eq + 1))]);
    } else if (a === '--help' || a === '-h') usage();
    else usage(`unknown argument "${a}"`);
  }
  if (!opt.warehouse) usage('--warehouse is required');
  // locations written as plain paths or file:// URLs need no map; s3://<bucket>/ may
  opt.maps.push([`file://${opt.warehouse}/`, opt.warehouse]);
  if (opt.show) {
    await show(opt);
    return;
  }
  if (!opt.dsn) usage('--pg is required');
  const deadline = Date.now() + opt.wait * 1000;
  // With a wait, a failed check is always read twice (one attempt alone may outlast the
  // wait on a loaded machine), and again while a commit landed between reading the
  // tables of one source table (unsettled), up to twice the wait.
  const hardDeadline = Date.now() + 2 * opt.wait * 1000;
  let res;
  let attempt = 0;
  for (;;) {
    attempt++;
    const lines = [];
    try {
      res = await verify({ dsn: opt.dsn, warehouse: opt.warehouse, schema: opt.schema, namespace: opt.namespace, tables: opt.tables,
        snapshotted: opt.snapshotted, maps: opt.maps, log: (s) => lines.push(s) });
    } catch (e) {
      res = { ok: false, rows: 0, lost: 0, duplicated: 0, mismatched: 0, notes: [], error: e.message };
    }
    res.lines = lines;
    if (res.ok || opt.wait <= 0) break;
    if (Date.now() >= deadline && attempt >= 2 && !(res.unsettled && Date.now() < hardDeadline)) break;
    await new Promise((r) => setTimeout(r, 1000));
  }
  for (const l of res.lines) console.log(l);
  if (res.error) console.log(`error: ${res.error}`);
  const shown = opt.verbose ? res.notes : res.notes.slice(0, 10);
  for (const n of shown) console.log(`  ${n}`);
  if (res.notes.length > shown.length) console.log(`  ... ${res.notes.length - shown.length} more (--verbose)`);
  if (attempt > 1) console.log(`(${attempt} attempts)`);
  if (!res.ok && res.unsettled) console.log('(a table was still being committed while it was read)');
  const counts = `rows=${res.rows} lost=${res.lost} duplicated=${res.duplicated} mismatched=${res.mismatched}`;
  console.log(res.ok ? `VERIFY ok ${counts}` : `VERIFY FAILED ${counts}`);
  process.exit(res.ok ? 0 : 1);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await main();
}
