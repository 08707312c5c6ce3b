// Exactly-once check of a table written by the coordinator test's fake workers:
//   node verify_slots.mjs <table location> <job>
// Every row is (id, p, off): record `off` of partition slot `p`. The newest snapshot's
// cdc.offsets gives, per slot, the next offset b; the table must hold each of the
// records [0, b) of every slot exactly once and nothing else. Read with icebird, an
// Iceberg reader this project did not write. Last line:
//   VERIFY ok rows=<n> lost=0 duplicated=0 mismatched=0   (exit 0)  or  VERIFY FAILED ...
import './localfetch.mjs';
import { icebergMetadata, icebergRead } from 'icebird';

const [tableUrl, job] = process.argv.slice(2);
const metadata = await icebergMetadata({ tableUrl });
const snaps = metadata.snapshots ?? [];
const cur = snaps.find(s => s['snapshot-id'] === metadata['current-snapshot-id']);
if (!cur) {
  console.log('VERIFY FAILED no current snapshot');
  process.exit(1);
}
const ids = snaps.filter(s => s.summary['cdc.job'] === job)
  .map(s => Number(s.summary['cdc.checkpoint-id']));
const dupSnaps = ids.length - new Set(ids).size;
const increasing = ids.every((v, i) => i === 0 || v > ids[i - 1]);
const offsets = JSON.parse(cur.summary['cdc.offsets']);
const next = Object.values(offsets)[0];
const rows = await icebergRead({ tableUrl, metadata });
const seen = new Map();
let mismatched = 0;
for (const r of rows) {
  const p = Number(r.p), off = Number(r.off);
  if (Number(r.id) !== p * 1e9 + off || p < 0 || p > 11) mismatched++;
  const k = p * 1e9 + off;
  seen.set(k, (seen.get(k) ?? 0) + 1);
}
let lost = 0, duplicated = 0, extra = 0;
for (let p = 0; p < 12; p++) {
  for (let o = 0; o < next[p]; o++) {
    const c = seen.get(p * 1e9 + o) ?? 0;
    if (c === 0) lost++;
    if (c > 1) duplicated += c - 1;
  }
}
for (const k of seen.keys()) {
  const p = Math.floor(k / 1e9), o = k - p * 1e9;
  if (o >= next[p]) extra++;
}
mismatched += extra;
console.log(`snapshots=${ids.length} checkpoints=${ids[0]}..${ids[ids.length - 1]} ` +
  `next=${JSON.stringify(next)} duplicate_snapshots=${dupSnaps} increasing=${increasing}`);
const ok = lost === 0 && duplicated === 0 && mismatched === 0 && dupSnaps === 0 && increasing &&
  rows.length > 0;
console.log(`VERIFY ${ok ? 'ok' : 'FAILED'} rows=${rows.length} lost=${lost} ` +
  `duplicated=${duplicated} mismatched=${mismatched}`);
process.exit(ok ? 0 : 1);
