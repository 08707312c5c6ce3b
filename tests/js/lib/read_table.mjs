// Prints a whole Iceberg table (deletes applied) as one JSON object, read with icebird,
// an Iceberg reader this project did not write; used by the worker's C integration
// tests (tests/integration/worker/test_worker.c):
//   node read_table.mjs <table location>
//   -> {"rows":[{...}], "snapshots":N, "summary":{...}}   or {"missing":true}
// BigInt values print as decimal strings, byte arrays as their length (bytes:<n>).
import './localfetch.mjs';
import { icebergMetadata, icebergRead } from 'icebird';

const [tableUrl] = process.argv.slice(2);
let metadata;
try {
  metadata = await icebergMetadata({ tableUrl });
} catch {
  console.log(JSON.stringify({ missing: true }));
  process.exit(0);
}
const snaps = metadata.snapshots ?? [];
const cur = snaps.find(s => s['snapshot-id'] === metadata['current-snapshot-id']);
const rows = cur ? await icebergRead({ tableUrl, metadata }) : [];
const replacer = (k, v) => {
  if (typeof v === 'bigint') return v.toString();
  if (v instanceof Uint8Array) return `bytes:${v.length}`;
  if (v instanceof Date) return v.toISOString();
  return v;
};
console.log(JSON.stringify({ rows, snapshots: snaps.length, summary: cur ? cur.summary : {} }, replacer));
