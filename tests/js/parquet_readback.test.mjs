// Reads Parquet files written by common/iceberg/parquet.c back with DuckDB, an
// independent reader. $CDC_BUILD_DIR/pq-fixtures writes each file plus a JSON
// file with the values it wrote; this test checks values (read_parquet), field
// ids, physical and logical types (parquet_schema), statistics, codecs and
// encodings (parquet_metadata) and the `iceberg.schema` footer key
// (parquet_kv_metadata). hyparquet (the reader under icebird) must read them
// too. Run by tests/run.sh integration (node --test).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { parquetReadObjects, parquetMetadataAsync, asyncBufferFromFile } from 'hyparquet';
import { compressors } from 'hyparquet-compressors';

const buildDir = process.env.CDC_BUILD_DIR;
let dir;
let conn;
let fixtures = [];
let nested = null; // the nested-columns file (docs/parquet.md, "Nested columns")

async function rows(sql) {
  const r = await conn.runAndReadAll(sql);
  return r.getRowObjectsJson();
}

const q = (s) => `'${s.replaceAll("'", "''")}'`;
const ident = (s) => `"${s.replaceAll('"', '""')}"`;

// SQL expression giving the canonical text pq-fixtures wrote for a column.
function canon(col) {
  const c = ident(col.name);
  const t = col.type;
  if (t === 'float' || t === 'double') return c; // compared numerically
  if (t === 'binary') return `hex(${c})`;
  if (t === 'date') return `CAST((${c} - DATE '1970-01-01') AS VARCHAR)`;
  if (t === 'time')
    return `CAST(((extract(hour FROM ${c}) * 3600 + extract(minute FROM ${c}) * 60) * 1000000 + extract(microseconds FROM ${c})) AS VARCHAR)`;
  if (t === 'timestamp' || t === 'timestamptz') return `CAST(epoch_us(${c}) AS VARCHAR)`;
  return `CAST(${c} AS VARCHAR)`;
}

function expectedLogical(t) {
  if (t === 'string') return /^StringType/;
  if (t.startsWith('decimal')) {
    const [, p, s] = t.match(/decimal\((\d+),(\d+)\)/);
    return new RegExp(`^DecimalType\\(scale=${s}, precision=${p}\\)`);
  }
  if (t === 'date') return /^DateType/;
  if (t === 'time') return /^TimeType\(isAdjustedToUTC=0, unit=TimeUnit\(MILLIS=<null>, MICROS=MicroSeconds/;
  if (t === 'timestamp') return /^TimestampType\(isAdjustedToUTC=0, unit=TimeUnit\(MILLIS=<null>, MICROS=MicroSeconds/;
  if (t === 'timestamptz') return /^TimestampType\(isAdjustedToUTC=1, unit=TimeUnit\(MILLIS=<null>, MICROS=MicroSeconds/;
  if (t === 'uuid') return /^UUIDType/;
  return null;
}

function expectedPhysical(t) {
  if (t === 'boolean') return 'BOOLEAN';
  if (t === 'int' || t === 'date') return 'INT32';
  if (t === 'long' || t === 'time' || t === 'timestamp' || t === 'timestamptz') return 'INT64';
  if (t === 'float') return 'FLOAT';
  if (t === 'double') return 'DOUBLE';
  if (t === 'string' || t === 'binary') return 'BYTE_ARRAY';
  if (t === 'uuid') return 'FIXED_LEN_BYTE_ARRAY';
  const p = Number(t.match(/decimal\((\d+),/)[1]);
  return p <= 9 ? 'INT32' : p <= 18 ? 'INT64' : 'FIXED_LEN_BYTE_ARRAY';
}

before(async () => {
  assert.ok(buildDir, 'CDC_BUILD_DIR must point at the build directory (set by tests/run.sh)');
  const tool = path.join(buildDir, 'pq-fixtures');
  assert.ok(fs.existsSync(tool), `${tool} does not exist: run make first`);
  dir = fs.mkdtempSync(path.join(process.env.CDC_TEST_TMP || os.tmpdir(), 'pq-readback-'));
  execFileSync(tool, [dir], { stdio: 'inherit' });
  fixtures = fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')));
  nested = fixtures.find((fx) => fx.nested);
  fixtures = fixtures.filter((fx) => !fx.nested);
  assert.ok(nested, 'pq-fixtures wrote no nested file');
  assert.ok(fixtures.length >= 8, 'pq-fixtures wrote too few files');
  const db = await DuckDBInstance.create(':memory:');
  conn = await db.connect();
  await conn.run("SET TimeZone = 'UTC'");
});

after(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test('values read back exactly as written', async () => {
  for (const fx of fixtures) {
    const sel = fx.columns.map((c) => `${canon(c)} AS ${ident(c.name)}`).join(', ');
    const got = await rows(
      `SELECT ${sel} FROM read_parquet(${q(fx.file)}, file_row_number = true) ORDER BY file_row_number`,
    );
    assert.equal(got.length, fx.rows.length, `${fx.file}: row count`);
    for (let i = 0; i < fx.rows.length; i++) {
      fx.columns.forEach((c, j) => {
        const want = fx.rows[i][j];
        const have = got[i][c.name];
        const where = `${path.basename(fx.file)} row ${i} column ${c.name}`;
        if (want === null) {
          assert.equal(have, null, where);
        } else if (c.type === 'float') {
          assert.equal(Math.fround(Number(have)), Math.fround(Number(want)), where);
        } else if (c.type === 'double') {
          assert.equal(Number(have), Number(want), where);
        } else {
          assert.equal(have, want, where);
        }
      });
    }
  }
});

test('schema: field ids, repetition, physical and logical types', async () => {
  for (const fx of fixtures) {
    const got = await rows(
      `SELECT name, field_id, type, type_length, repetition_type, logical_type FROM parquet_schema(${q(fx.file)})`,
    );
    const cols = got.filter((r) => r.type !== null);
    assert.equal(cols.length, fx.columns.length, `${fx.file}: column count`);
    fx.columns.forEach((c, j) => {
      const r = cols[j];
      const where = `${path.basename(fx.file)} column ${c.name}`;
      assert.equal(r.name, c.name, where);
      assert.equal(Number(r.field_id), c.field_id, `${where}: field_id`);
      assert.equal(r.repetition_type, c.required ? 'REQUIRED' : 'OPTIONAL', where);
      assert.equal(r.type, expectedPhysical(c.type), `${where}: physical type`);
      if (c.type === 'uuid') assert.equal(Number(r.type_length), 16, where);
      const lt = expectedLogical(c.type);
      if (lt) assert.match(r.logical_type ?? '', lt, `${where}: logical type`);
      else assert.equal(r.logical_type, null, `${where}: logical type`);
    });
  }
});

test('footer holds the iceberg.schema key', async () => {
  for (const fx of fixtures) {
    const got = await rows(
      `SELECT decode(key) AS k, decode(value) AS v FROM parquet_kv_metadata(${q(fx.file)})`,
    );
    const kv = got.find((r) => r.k === 'iceberg.schema');
    assert.ok(kv, `${fx.file}: no iceberg.schema key`);
    const schema = JSON.parse(kv.v);
    assert.equal(schema.type, 'struct');
    assert.equal(schema['schema-id'], 3);
    assert.deepEqual(schema['identifier-field-ids'], [1]);
    assert.deepEqual(
      schema.fields.map((f) => [f.id, f.name, f.required, f.type]),
      fx.columns.map((c) => [c.field_id, c.name, c.required, c.type]),
    );
  }
});

test('column statistics, codecs, encodings and row groups', async () => {
  for (const fx of fixtures) {
    const meta = await rows(
      `SELECT row_group_id, row_group_num_rows, path_in_schema, stats_min_value, stats_max_value,
              stats_null_count, compression, encodings
       FROM parquet_metadata(${q(fx.file)}) ORDER BY row_group_id, column_id`,
    );
    const groups = [...new Set(meta.map((m) => m.row_group_id))];
    assert.equal(groups.length, fx.row_groups, `${fx.file}: row groups`);
    if (path.basename(fx.file).startsWith('multi_rowgroup')) assert.ok(groups.length > 1);
    const codec = { zstd: 'ZSTD', snappy: 'SNAPPY', none: 'UNCOMPRESSED' }[fx.codec];
    let first = 0;
    for (const g of groups) {
      const chunks = meta.filter((m) => m.row_group_id === g);
      const n = Number(chunks[0].row_group_num_rows);
      // the true min/max/null count of the rows of this group, as DuckDB reads them
      // NaN is never part of Parquet min/max (DuckDB's max() ranks it highest)
      const aggs = fx.columns
        .map((c, j) => {
          const col = ident(c.name);
          const f = c.type === 'float' || c.type === 'double' ? ` FILTER (WHERE NOT isnan(${col}))` : '';
          return `min(${col})${f}::VARCHAR AS mn${j}, max(${col})${f}::VARCHAR AS mx${j}, count(*) - count(${col}) AS nn${j}`;
        })
        .join(', ');
      const [truth] = await rows(
        `SELECT ${aggs} FROM read_parquet(${q(fx.file)}, file_row_number = true)
         WHERE file_row_number >= ${first} AND file_row_number < ${first + n}`,
      );
      fx.columns.forEach((c, j) => {
        const m = chunks.find((x) => x.path_in_schema === c.name);
        const where = `${path.basename(fx.file)} row group ${g} column ${c.name}`;
        assert.ok(m, where);
        assert.equal(m.compression, codec, `${where}: codec`);
        assert.equal(Number(m.stats_null_count), Number(truth[`nn${j}`]), `${where}: null count`);
        if (c.type === 'float' || c.type === 'double') {
          assert.equal(Number(m.stats_min_value), Number(truth[`mn${j}`]), `${where}: min`);
          assert.equal(Number(m.stats_max_value), Number(truth[`mx${j}`]), `${where}: max`);
        } else {
          assert.equal(m.stats_min_value, truth[`mn${j}`], `${where}: min`);
          assert.equal(m.stats_max_value, truth[`mx${j}`], `${where}: max`);
        }
        if (c.type === 'string' || c.type === 'binary') {
          const dict = m.encodings.includes('RLE_DICTIONARY');
          const fallback = path.basename(fx.file).startsWith('dict_fallback');
          const anyValue = Number(truth[`nn${j}`]) < n; // an all-null chunk has no dictionary
          assert.equal(dict, fx.dictionary && !fallback && anyValue, `${where}: encodings ${m.encodings}`);
        }
      });
      first += n;
    }
    assert.equal(first, fx.rows.length, `${fx.file}: rows over all row groups`);
  }
});

test('hyparquet (the reader icebird uses) reads every file', async () => {
  // exact-text columns only: hyparquet turns decimals into JS numbers
  const exact = ['boolean', 'int', 'long', 'string', 'uuid'];
  for (const fx of fixtures) {
    const file = await asyncBufferFromFile(fx.file);
    const md = await parquetMetadataAsync(file);
    assert.deepEqual(
      md.schema.slice(1).map((s) => s.field_id),
      fx.columns.map((c) => c.field_id),
    );
    const got = await parquetReadObjects({ file, compressors });
    assert.equal(got.length, fx.rows.length, `${fx.file}: row count`);
    for (let i = 0; i < fx.rows.length; i++) {
      fx.columns.forEach((c, j) => {
        if (!exact.includes(c.type)) return;
        const want = fx.rows[i][j];
        const have = got[i][c.name];
        assert.equal(have === null || have === undefined ? null : String(have), want,
          `${path.basename(fx.file)} row ${i} column ${c.name}`);
      });
    }
  }
});

// The struct as DuckDB and hyparquet give it: every field, a missing one null.
const fullStruct = (s) => (s === null ? null : { a: s.a ?? null, b: s.b ?? null, c: s.c ?? null });
const decimals = (d) => (d === null ? null : d.map((x) => (x === null ? null : Number(x))));

test('nested columns: lists (null elements, empty, 2-D), a struct, decimals read back', async () => {
  const got = await rows(
    `SELECT id, to_json(tags)::VARCHAR AS tags, to_json(grid)::VARCHAR AS grid, to_json(s)::VARCHAR AS s,
            to_json(d)::VARCHAR AS d FROM read_parquet(${q(nested.file)}) ORDER BY id`,
  );
  assert.equal(got.length, nested.rows.length);
  const parse = (x) => (x === null ? null : JSON.parse(x));
  nested.rows.forEach((want, i) => {
    const have = got[i];
    assert.equal(Number(have.id), want.id);
    assert.deepEqual(parse(have.tags), want.tags, `row ${i} tags`);
    assert.deepEqual(parse(have.grid), want.grid, `row ${i} grid`);
    assert.deepEqual(parse(have.s), fullStruct(want.s), `row ${i} s`);
    assert.deepEqual(decimals(parse(have.d)), decimals(want.d), `row ${i} d`);
  });
  assert.ok(nested.rows.some((r) => r.tags && r.tags.includes(null)), 'a null element');
  assert.ok(nested.rows.some((r) => r.tags && r.tags.length === 0), 'an empty list');
  // several row groups, so pages and row groups end between rows of repeated values
  const [g] = await rows(`SELECT count(DISTINCT row_group_id) AS n FROM parquet_metadata(${q(nested.file)})`);
  assert.ok(Number(g.n) > 1, 'more than one row group');
});

test('nested columns: 3-level LIST layout and field ids on every level', async () => {
  const got = await rows(
    `SELECT name, field_id, repetition_type, converted_type FROM parquet_schema(${q(nested.file)})`,
  );
  const el = got.slice(1).map((r) => [r.name, r.field_id === null ? null : Number(r.field_id), r.repetition_type, r.converted_type]);
  assert.deepEqual(el.slice(0, 5), [
    ['id', 1, 'REQUIRED', null],
    ['tags', 2, 'OPTIONAL', 'LIST'],
    ['list', null, 'REPEATED', null],
    ['element', 6, 'OPTIONAL', 'UTF8'],
    ['grid', 3, 'OPTIONAL', 'LIST'],
  ]);
  assert.deepEqual(el.find((r) => r[1] === 12), ['element', 12, 'REQUIRED', null]);
  assert.deepEqual(el.filter((r) => r[0] === 's' || r[0] === 'a' || r[0] === 'b').map((r) => r[1]), [4, 9, 10]);
  const [kv] = await rows(
    `SELECT decode(value) AS v FROM parquet_kv_metadata(${q(nested.file)}) WHERE decode(key) = 'iceberg.schema'`,
  );
  const schema = JSON.parse(kv.v);
  assert.deepEqual(schema.fields[2].type.element, { type: 'list', 'element-id': 8, element: 'int', 'element-required': false });
});

test('nested columns: hyparquet reads them', async () => {
  const file = await asyncBufferFromFile(nested.file);
  const got = await parquetReadObjects({ file, compressors });
  assert.equal(got.length, nested.rows.length);
  const plain = (x) => JSON.parse(JSON.stringify(x ?? null, (k, v) => (typeof v === 'bigint' ? Number(v) : v)));
  nested.rows.forEach((want, i) => {
    assert.deepEqual(plain(got[i].tags), want.tags, `row ${i} tags`);
    assert.deepEqual(plain(got[i].grid), want.grid, `row ${i} grid`);
    assert.deepEqual(plain(got[i].s), fullStruct(want.s), `row ${i} s`);
  });
});
