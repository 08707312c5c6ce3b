// Reads the epoch files of worker/stage_write.c back with DuckDB and hyparquet: files whose
// row groups were encoded ahead (while the epoch ran) must hold exactly the rows, in the
// same order, of the same epoch encoded whole at the barrier. The unit test binary
// $CDC_BUILD_DIR/tests/unit/worker/test_worker_stage writes the pairs of warehouses
// ("<case>-ahead" / "<case>-whole") into CDC_STAGE_KEEP_DIR: more rows than a row group,
// a change to an encoded entry, a truncate, a mid-epoch schema change.
// Run by tests/run.sh integration (node --test).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { parquetReadObjects, asyncBufferFromFile } from 'hyparquet';
import { compressors } from 'hyparquet-compressors';

const buildDir = process.env.CDC_BUILD_DIR;
const repo = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
let dir;
let conn;

async function rows(sql) {
  const r = await conn.runAndReadAll(sql);
  return r.getRowObjectsJson();
}
const q = (s) => `'${s.replaceAll("'", "''")}'`;

// Parquet files of a warehouse by kind tag (data, eqdel, cl), one per kind.
function files(wh) {
  const out = {};
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.parquet')) {
        const kind = e.name.match(/-e\d+-p\d+-(data|eqdel|cl)-/)[1];
        assert.equal(out[kind], undefined, `${wh}: two ${kind} files`);
        out[kind] = p;
      }
    }
  };
  walk(wh);
  return out;
}

before(async () => {
  assert.ok(buildDir, 'CDC_BUILD_DIR must point at the build directory (set by tests/run.sh)');
  const bin = path.join(buildDir, 'tests/unit/worker/test_worker_stage');
  assert.ok(fs.existsSync(bin), `${bin} does not exist: run make first`);
  dir = fs.mkdtempSync(path.join(process.env.CDC_TEST_TMP || os.tmpdir(), 'stage-readback-'));
  execFileSync(bin, [], {
    cwd: repo,
    env: { ...process.env, CDC_STAGE_KEEP_DIR: dir, CDC_SOURCE_DIR: repo },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const db = await DuckDBInstance.create(':memory:');
  conn = await db.connect();
  await conn.run("SET TimeZone = 'UTC'");
});

after(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test('files encoded ahead hold the same rows as files encoded whole', async () => {
  const cases = fs
    .readdirSync(dir)
    .filter((d) => d.endsWith('-ahead') && fs.existsSync(path.join(dir, d.replace(/-ahead$/, '-whole'))))
    .map((d) => d.replace(/-ahead$/, ''));
  assert.ok(cases.length >= 4, `too few cases: ${cases}`);
  let multiGroup = 0;
  for (const c of cases) {
    const ahead = files(path.join(dir, `${c}-ahead`));
    const whole = files(path.join(dir, `${c}-whole`));
    assert.deepEqual(Object.keys(ahead).sort(), Object.keys(whole).sort(), `${c}: file kinds`);
    for (const kind of Object.keys(ahead)) {
      const where = `${c} ${kind}`;
      const sql = (f) =>
        `SELECT * EXCLUDE (file_row_number) FROM read_parquet(${q(f)}, file_row_number = true) ORDER BY file_row_number`;
      const a = await rows(sql(ahead[kind]));
      const w = await rows(sql(whole[kind]));
      assert.ok(w.length > 0, `${where}: rows`);
      assert.deepEqual(a, w, `${where}: rows differ`);
      const groups = await rows(
        `SELECT count(DISTINCT row_group_id) AS n FROM parquet_metadata(${q(ahead[kind])})`,
      );
      if (Number(groups[0].n) > 1) multiGroup++;
      // hyparquet (icebird's reader) reads every row group of the file
      const file = await asyncBufferFromFile(ahead[kind]);
      const hy = await parquetReadObjects({ file, compressors });
      assert.equal(hy.length, w.length, `${where}: hyparquet row count`);
    }
  }
  assert.ok(multiGroup >= 4, `only ${multiGroup} files with several row groups`);
});
