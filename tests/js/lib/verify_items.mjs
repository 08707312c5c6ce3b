// Exactly-once check of the coordinator runtime tests (tests/integration/pipeline/test_runtime.c):
//   node verify_items.mjs <warehouse> <namespace> <table> <inserts> <update-every>
// The test produced inserts of ids 1..<inserts> (v = "i<id>") and, for every id divisible
// by <update-every>, one update (v = "u<id>"). Read with icebird (not our code):
//   - the changelog <ns>/<table>_changelog must hold every change exactly once;
//   - the mirror <ns>/<table> must hold every id exactly once with its final value.
// Last line: VERIFY ok rows=<n> lost=0 duplicated=0 mismatched=0 (exit 0) or VERIFY FAILED.
import './localfetch.mjs';
import { icebergMetadata, icebergRead } from 'icebird';

const [wh, ns, table, insertsArg, everyArg] = process.argv.slice(2);
const inserts = Number(insertsArg);
const every = Number(everyArg);

async function read(name) {
  const tableUrl = `${wh}/${ns}/${name}`;
  const metadata = await icebergMetadata({ tableUrl });
  return icebergRead({ tableUrl, metadata });
}

const cl = await read(`${table}_changelog`);
const mirror = await read(table);
let lost = 0, duplicated = 0, mismatched = 0;

// changelog: key = id + op
const seen = new Map();
for (const r of cl) {
  const k = `${Number(r.id)}/${r._op}`;
  seen.set(k, (seen.get(k) ?? 0) + 1);
}
let expectedChanges = 0;
for (let id = 1; id <= inserts; id++) {
  for (const op of every > 0 && id % every === 0 ? ['c', 'u'] : ['c']) {
    expectedChanges++;
    const c = seen.get(`${id}/${op}`) ?? 0;
    if (c === 0) lost++;
    if (c > 1) duplicated += c - 1;
  }
}
if (cl.length !== expectedChanges + duplicated) mismatched += Math.abs(cl.length - expectedChanges - duplicated);

// mirror: one row per id with the final value
const rows = new Map();
for (const r of mirror) {
  const id = Number(r.id);
  if (rows.has(id)) duplicated++;
  rows.set(id, r.v);
}
for (let id = 1; id <= inserts; id++) {
  const want = every > 0 && id % every === 0 ? `u${id}` : `i${id}`;
  if (!rows.has(id)) lost++;
  else if (rows.get(id) !== want) mismatched++;
}
for (const id of rows.keys()) if (id < 1 || id > inserts) mismatched++;

console.log(`changelog=${cl.length} (expected ${expectedChanges}) mirror=${mirror.length} ` +
  `(expected ${inserts})`);
const ok = lost === 0 && duplicated === 0 && mismatched === 0;
console.log(`VERIFY ${ok ? 'ok' : 'FAILED'} rows=${mirror.length} lost=${lost} ` +
  `duplicated=${duplicated} mismatched=${mismatched}`);
process.exit(ok ? 0 : 1);
