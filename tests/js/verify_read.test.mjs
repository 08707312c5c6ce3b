// chaos/verify.mjs readSnapshotRows on hand-made files: the sequence-number rules of
// position and equality deletes (Iceberg spec, "Scan Planning"), files of different
// columns in one read, and columns matched by field id. No server needed.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { readSnapshotRows } from '../../chaos/verify.mjs';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'verify-read-'));
const db = await DuckDBInstance.create(':memory:');
const conn = await db.connect();
const schema = { 'identifier-field-ids': [1], fields: [
  { id: 1, name: 'id', type: 'long', required: true }, { id: 2, name: 'v', type: 'string' }] };
const fields = schema.fields;

// a Parquet file of rows (SQL VALUES) with the given column names and field ids
async function file(name, sql, columns) {
  const p = path.join(dir, name);
  const ids = columns.map(([c, id]) => `${c}: {__duckdb_field_id: ${id}}`).join(', ');
  await conn.run(`COPY (SELECT * FROM (VALUES ${sql}) t(${columns.map(([c]) => c).join(', ')}))
    TO '${p}' (FORMAT parquet, FIELD_IDS {${ids}})`);
  return p;
}
const rec = (local, seq, extra = {}) => ({ local, orig: `file://${local}`, seq: BigInt(seq), ...extra });

// the rows of files read both ways (by field id, and by the footers), which must agree;
// `by` is the way the default read took
async function both(sch, files, select, by = 'id') {
  const out = [];
  for (const way of ['id', 'footers']) {
    assert.equal(await readSnapshotRows(conn, { schema: sch, fields: sch.fields, ...files }, { by: way }),
      way === 'id' ? by : 'footers');
    out.push((await (await conn.runAndReadAll(select)).getRowObjectsJson()).map((x) => Object.values(x).map((v) => `${v}`).join(':')));
  }
  assert.deepEqual(out[0], out[1], 'read by field id and by the footers');
  return out[0];
}
const rows = (files, by) => both(schema, files, 'SELECT id, v FROM __d ORDER BY id, v', by);

test('equality deletes apply to older data files only, by the highest sequence number per key', async () => {
  const d1 = await file('d1.parquet', "(1, 'a'), (2, 'b'), (3, 'c')", [['id', 1], ['v', 2]]);
  const d2 = await file('d2.parquet', "(2, 'b2'), (4, 'd')", [['id', 1], ['v', 2]]);
  const d3 = await file('d3.parquet', "(3, 'c3')", [['id', 1], ['v', 2]]);
  // seq 2 deletes 2 (older d1's 'b'); seq 3 deletes 3 from d1 but not from d3 (same seq)
  const e2 = await file('e2.parquet', '(2)', [['id', 1]]);
  const e3 = await file('e3.parquet', '(3), (4)', [['id', 1]]);
  assert.deepEqual(await rows({
    data: [rec(d1, 1), rec(d2, 2), rec(d3, 3)],
    eqDeletes: [rec(e2, 2, { ids: [1] }), rec(e3, 3, { ids: [1] })],
  }), ['1:a', '2:b2', '3:c3']);
});

test('deletes all newer than the files they reach (compaction\'s layout) delete their keys from every one', async () => {
  // base files at seq 1, deletes at 2 and 3, a re-insert at 3 that no delete reaches
  const b1 = await file('b1.parquet', "(1, 'a'), (2, 'b'), (3, 'c')", [['id', 1], ['v', 2]]);
  const b2 = await file('b2.parquet', "(4, 'd'), (5, 'e')", [['id', 1], ['v', 2]]);
  const n3 = await file('n3.parquet', "(3, 'c3')", [['id', 1], ['v', 2]]);
  const e2 = await file('f2.parquet', '(2), (4)', [['id', 1]]);
  const e3 = await file('f3.parquet', '(3), (2)', [['id', 1]]);
  assert.deepEqual(await rows({
    data: [rec(b1, 1), rec(b2, 1), rec(n3, 3)],
    eqDeletes: [rec(e2, 2, { ids: [1] }), rec(e3, 3, { ids: [1] })],
  }), ['1:a', '3:c3', '5:e']);
  // an optional key: a null key is deleted by a null in the delete file, like any value
  // (read by the footers: with an optional key, nulls cannot tell a file without field ids)
  const opt = { ...schema, fields: [{ ...fields[0], required: false }, fields[1]] };
  const nb = await file('nb.parquet', "(NULL, 'n'), (7, 'g')", [['id', 1], ['v', 2]]);
  const ne = await file('ne.parquet', '(NULL::BIGINT)', [['id', 1]]);
  assert.deepEqual(await both(opt, { data: [rec(nb, 1)], eqDeletes: [rec(ne, 2, { ids: [1] })] },
    'SELECT id, v FROM __d ORDER BY id, v', 'footers'), ['7:g']);
});

test('position deletes apply to their file at the same or a lower sequence number', async () => {
  const d1 = await file('p1.parquet', "(1, 'a'), (2, 'b'), (3, 'c')", [['id', 1], ['v', 2]]);
  const d2 = await file('p2.parquet', "(4, 'd'), (5, 'e')", [['id', 1], ['v', 2]]);
  const pd = path.join(dir, 'pd.parquet');
  // position 1 of p1 (row 2) at seq 2: deleted; position 0 of p2 (seq 3) at seq 2: not
  await conn.run(`COPY (SELECT * FROM (VALUES ('file://${d1}', 1::BIGINT), ('file://${d2}', 0::BIGINT))
    t(file_path, pos)) TO '${pd}' (FORMAT parquet)`);
  assert.deepEqual(await rows({
    data: [rec(d1, 1), rec(d2, 3)],
    posDeletes: [rec(pd, 2)],
  }), ['1:a', '3:c', '4:d', '5:e']);
});

test('both kinds of delete together, on files older and newer than every equality delete', async () => {
  const d1 = await file('m1.parquet', "(1, 'a'), (2, 'b')", [['id', 1], ['v', 2]]);
  const d2 = await file('m2.parquet', "(2, 'b2'), (3, 'c')", [['id', 1], ['v', 2]]);
  const d3 = await file('m3.parquet', "(1, 'a3'), (4, 'd')", [['id', 1], ['v', 2]]);
  // seq 2 deletes key 1 (d1's 'a'; d3 is newer) and key 3 (d2 has the same seq: kept);
  // position deletes at seq 4: d2's row 0 and d3's row 1 (d3, seq 4, is past every
  // equality delete and still takes its position delete)
  const e = await file('m-e.parquet', '(1), (3)', [['id', 1]]);
  const pd = path.join(dir, 'm-pd.parquet');
  await conn.run(`COPY (SELECT * FROM (VALUES ('file://${d2}', 0::BIGINT), ('file://${d3}', 1::BIGINT))
    t(file_path, pos)) TO '${pd}' (FORMAT parquet)`);
  const files = {
    data: [rec(d1, 1), rec(d2, 2), rec(d3, 4)],
    eqDeletes: [rec(e, 2, { ids: [1] })],
    posDeletes: [rec(pd, 4)],
  };
  assert.deepEqual(await rows(files), ['1:a3', '2:b', '3:c']);
  // withFile: every row names its file and position
  assert.equal(await readSnapshotRows(conn, { schema, fields, data: files.data }, { withFile: true }), 'id');
  const r = await (await conn.runAndReadAll('SELECT id, v, __file, __pos, __seq FROM __d ORDER BY id, v'))
    .getRowObjectsJson();
  assert.deepEqual(r.map((x) => `${x.id}:${x.v}@${x.__file.split('/').pop()}#${x.__pos}/${x.__seq}`),
    ['1:a@m1.parquet#0/1', '1:a3@m3.parquet#0/4', '2:b@m1.parquet#1/1', '2:b2@m2.parquet#0/2',
      '3:c@m2.parquet#1/2', '4:d@m3.parquet#1/4']);
});

test('files with other columns (a column added, a column renamed) are read by field id', async () => {
  const old = await file('old.parquet', '(1), (2)', [['id', 1]]);
  const renamed = await file('renamed.parquet', "(3, 'x')", [['id', 1], ['value_old', 2]]);
  const cur = await file('cur.parquet', "(4, 'y')", [['id', 1], ['v', 2]]);
  assert.deepEqual(await rows({ data: [rec(old, 1), rec(renamed, 2), rec(cur, 3)] }),
    ['1:null', '2:null', '3:x', '4:y']);
});

test('a promoted column (int in older files, long in newer ones) reads every value, whichever file comes first', async () => {
  const wide = { 'identifier-field-ids': [1], fields: [
    { id: 1, name: 'id', type: 'long', required: true }, { id: 3, name: 'a', type: 'long' }] };
  const narrow = await file('int.parquet', '(1::BIGINT, 7::INTEGER), (2::BIGINT, 8::INTEGER)', [['id', 1], ['a', 3]]);
  const big = await file('long.parquet', '(3::BIGINT, 9000001034::BIGINT)', [['id', 1], ['a', 3]]);
  const e = await file('promo-e.parquet', '(2::BIGINT)', [['id', 1]]);
  for (const data of [[rec(narrow, 1), rec(big, 2)], [rec(big, 2), rec(narrow, 1)]]) {
    assert.deepEqual(await both(wide, { data, eqDeletes: [rec(e, 3, { ids: [1] })] },
      'SELECT id, a FROM __d ORDER BY id'), ['1:7', '3:9000001034']);
  }
});

test('a widened decimal (14,4 in older files, 16,4 in newer ones) reads every value', async () => {
  const wide = { 'identifier-field-ids': [1], fields: [
    { id: 1, name: 'id', type: 'long', required: true }, { id: 4, name: 'n', type: 'decimal(16, 4)' }] };
  const narrow = await file('dec14.parquet', '(1::BIGINT, 1.5::DECIMAL(14,4))', [['id', 1], ['n', 4]]);
  const big = await file('dec16.parquet', '(2::BIGINT, 123456790075.5678::DECIMAL(16,4))', [['id', 1], ['n', 4]]);
  const e = await file('dec-e.parquet', '(9::BIGINT)', [['id', 1]]);
  assert.deepEqual(await both(wide, { data: [rec(narrow, 1), rec(big, 2)], eqDeletes: [rec(e, 3, { ids: [1] })] },
    'SELECT id, n::VARCHAR AS n FROM __d ORDER BY id'), ['1:1.5000', '2:123456790075.5678']);
});

test.after(() => fs.rmSync(dir, { recursive: true, force: true }));

test('a file without field ids reads by name: the read by id sees nulls in a key and goes by the footers', async () => {
  const ids = await file('with-ids.parquet', "(1, 'a'), (2, 'b')", [['id', 1], ['v', 2]]);
  const plain = path.join(dir, 'no-ids.parquet');
  await conn.run(`COPY (SELECT * FROM (VALUES (3::BIGINT, 'c')) t(id, v)) TO '${plain}' (FORMAT parquet)`);
  assert.deepEqual(await rows({ data: [rec(ids, 1), rec(plain, 1)] }, 'footers'), ['1:a', '2:b', '3:c']);
  // a delete file without ids alike: it would delete nothing by id
  const e = path.join(dir, 'no-ids-e.parquet');
  await conn.run(`COPY (SELECT 2::BIGINT AS id) TO '${e}' (FORMAT parquet)`);
  assert.deepEqual(await rows({ data: [rec(ids, 1)], eqDeletes: [rec(e, 2, { ids: [1] })] }, 'footers'), ['1:a']);
});

test('a field of a type the read by id does not map is read by the footers', async () => {
  const odd = { 'identifier-field-ids': [1], fields: [
    { id: 1, name: 'id', type: 'long', required: true }, { id: 2, name: 'v', type: 'timestamp_ns' }] };
  const f = await file('odd.parquet', "(1, 'a')", [['id', 1], ['v', 2]]);
  assert.deepEqual(await both(odd, { data: [rec(f, 1)] }, 'SELECT id, v FROM __d', 'footers'), ['1:a']);
});
