// Reads an Iceberg table the way Spark and Trino apply deletes in a partitioned table,
// which icebird does not (it applies every equality delete to every older data file):
// an equality delete applies to an older data file only when the delete's spec is
// unpartitioned or both files have the same spec id and partition values (Iceberg spec,
// "Scan Planning"). A delete written to the wrong partition therefore leaves the old row
// alive here, where a global reader would hide the mistake. Also checks every file's
// partition values against its rows, with transforms computed here (identity, bucket[N]
// with the spec's Murmur3, truncate[W], day, hour), independently of the C code, and
// that a file naming a sort order holds its rows in that order (identity of integers).
//   node read_partitioned.mjs <table location>
//   -> {"rows":[...], "files":[{"content","spec","partition","records"}], "problems":[...],
//       "default_spec": N, "specs": [...], "sort_orders": [...], "default_sort_order": N}
// BigInt values print as decimal strings.
import './localfetch.mjs';
import { avroMetadata, avroRead, icebergMetadata } from 'icebird';
import { asyncBufferFromUrl, parquetReadObjects } from 'hyparquet';
import { compressors } from 'hyparquet-compressors';

const [tableUrl] = process.argv.slice(2);

async function avroRecords(url) {
  const buffer = await fetch(url).then(r => r.arrayBuffer());
  const reader = { view: new DataView(buffer), offset: 0 };
  const { metadata, syncMarker } = await avroMetadata(reader);
  return { metadata, records: await avroRead({ reader, metadata, syncMarker }) };
}

async function readParquet(url) {
  const file = await asyncBufferFromUrl({ url });
  return parquetReadObjects({ file, compressors });
}

// 32-bit Murmur3 (x86, seed 0), as the Iceberg spec's bucket transform uses.
function murmur3(bytes) {
  const c1 = 0xcc9e2d51, c2 = 0x1b873593;
  let h = 0;
  const n = bytes.length, blocks = n & ~3;
  for (let i = 0; i < blocks; i += 4) {
    let k = bytes[i] | (bytes[i + 1] << 8) | (bytes[i + 2] << 16) | (bytes[i + 3] << 24);
    k = Math.imul(k, c1); k = (k << 15) | (k >>> 17); k = Math.imul(k, c2);
    h ^= k; h = (h << 13) | (h >>> 19); h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  }
  let k = 0;
  switch (n & 3) {
    case 3: k ^= bytes[blocks + 2] << 16; // fall through
    case 2: k ^= bytes[blocks + 1] << 8; // fall through
    case 1: k ^= bytes[blocks];
      k = Math.imul(k, c1); k = (k << 15) | (k >>> 17); k = Math.imul(k, c2); h ^= k;
  }
  h ^= n;
  h ^= h >>> 16; h = Math.imul(h, 0x85ebca6b); h ^= h >>> 13; h = Math.imul(h, 0xc2b2ae35); h ^= h >>> 16;
  return h | 0;
}

function longBytes(v) {
  const b = Buffer.alloc(8);
  b.writeBigInt64LE(BigInt(v));
  return b;
}

const MICROS_PER_HOUR = 3600n * 1000000n;
const floorDiv = (a, b) => (a >= 0n ? a / b : -((-a + b - 1n) / b));

// Transform of a row's source value, as a comparable string (null -> null).
function transform(t, type, v) {
  if (v === null || v === undefined) return null;
  if (t === 'identity') return v instanceof Date ? String(BigInt(v.getTime()) * 1000n) : String(v);
  let m = /^bucket\[(\d+)\]$/.exec(t);
  if (m) {
    let bytes;
    if (type === 'int' || type === 'long' || type === 'date') bytes = longBytes(v);
    else if (type === 'string') bytes = Buffer.from(String(v), 'utf8');
    else throw new Error(`bucket of ${type} not checked here`);
    return String((murmur3(bytes) & 0x7fffffff) % Number(m[1]));
  }
  m = /^truncate\[(\d+)\]$/.exec(t);
  if (m) {
    const w = Number(m[1]);
    if (type === 'string') return [...String(v)].slice(0, w).join('');
    const x = BigInt(v), bw = BigInt(w);
    return String(x - (((x % bw) + bw) % bw));
  }
  const micros = v instanceof Date ? BigInt(v.getTime()) * 1000n : BigInt(v);
  if (t === 'day') return String(floorDiv(micros, 24n * MICROS_PER_HOUR));
  if (t === 'hour') return String(floorDiv(micros, MICROS_PER_HOUR));
  throw new Error(`transform ${t} not checked here`);
}

// A partition value as read from the manifest, as a comparable string.
function partString(v) {
  if (v === null || v === undefined) return null;
  if (v instanceof Date) return String(Math.floor(v.getTime() / 86400000)); // a date
  if (v instanceof Uint8Array) return Buffer.from(v).toString('utf8');
  return String(v);
}

const md = await icebergMetadata({ tableUrl });
const schema = md.schemas.find(s => s['schema-id'] === md['current-schema-id']);
const fieldById = new Map();
for (const s of md.schemas) for (const f of s.fields) fieldById.set(f.id, f);
const specs = new Map(md['partition-specs'].map(s => [s['spec-id'], s]));
const snap = md.snapshots.find(s => s['snapshot-id'] === md['current-snapshot-id']);
const problems = [];
const data = [], deletes = [];
if (snap) {
  const list = (await avroRecords(snap['manifest-list'])).records;
  for (const mf of list) {
    const { metadata, records } = await avroRecords(mf.manifest_path);
    const specId = Number(metadata['partition-spec-id'] ?? mf.partition_spec_id);
    if (Number(mf.partition_spec_id) !== specId)
      problems.push(`${mf.manifest_path}: manifest list says spec ${mf.partition_spec_id}, header ${specId}`);
    for (const e of records) {
      if (e.status === 2) continue;
      const seq = BigInt(e.sequence_number ?? mf.sequence_number);
      const df = e.data_file;
      const spec = specs.get(specId);
      if (!spec) { problems.push(`${df.file_path}: unknown spec ${specId}`); continue; }
      const part = spec.fields.map(pf => partString(df.partition?.[pf.name] ?? df.partition?.[pf['field-id']]));
      const f = { path: df.file_path, content: df.content, spec: specId, part, seq, records: Number(df.record_count),
                  order: Number(df.sort_order_id ?? 0) };
      (df.content === 0 ? data : deletes).push(f);
    }
  }
}

const orders = new Map((md['sort-orders'] ?? []).map(o => [o['order-id'], o]));
const cmp = (a, b) => (a === b ? 0 : a === null ? -2 : b === null ? 2 : (BigInt(a) < BigInt(b) ? -1 : 1));

// a file that names a sort order holds its rows in that order (identity of integers)
function checkSorted(f, rows) {
  const order = orders.get(f.order);
  if (!order) { problems.push(`${f.path}: unknown sort order ${f.order}`); return; }
  for (let r = 1; r < rows.length; r++) {
    for (const sf of order.fields) {
      const src = fieldById.get(sf['source-id']);
      if (sf.transform !== 'identity' || !['int', 'long'].includes(src.type)) break;
      const a = rows[r - 1][src.name] ?? null, b = rows[r][src.name] ?? null;
      let c = cmp(a, b);
      if (c === 0) continue;
      if (Math.abs(c) === 2) c = (c < 0) === (sf['null-order'] === 'nulls-first') ? -1 : 1;
      else if (sf.direction === 'desc') c = -c;
      if (c > 0) problems.push(`${f.path}: rows ${r - 1} and ${r} break sort order ${f.order}`);
      break;
    }
  }
}

// every file's rows lie in the file's partition
async function rowsOf(f) {
  const rows = await readParquet(f.path);
  if (f.order !== 0) checkSorted(f, rows);
  const spec = specs.get(f.spec);
  for (const row of rows)
    spec.fields.forEach((pf, i) => {
      const src = fieldById.get(pf['source-id']);
      if (!src || !(src.name in row)) return; // e.g. a delete file holds the key only
      const want = transform(pf.transform, src.type, row[src.name]);
      if (want !== f.part[i])
        problems.push(`${f.path}: row ${JSON.stringify(row, (k, v) => typeof v === 'bigint' ? v.toString() : v)} ` +
                      `has ${pf.name} = ${want}, the file's partition says ${f.part[i]}`);
    });
  return rows;
}

const keyNames = (schema['identifier-field-ids'] ?? []).map(id => fieldById.get(id).name);
const keyOf = row => JSON.stringify(keyNames.map(n => String(row[n])));
const delSets = [];
for (const d of deletes) {
  const rows = await rowsOf(d);
  delSets.push({ ...d, keys: new Set(rows.map(keyOf)) });
}
const out = [];
for (const f of data) {
  const rows = await rowsOf(f);
  for (const row of rows) {
    const k = keyOf(row);
    const deleted = delSets.some(d => d.seq > f.seq && d.keys.has(k) &&
      (specs.get(d.spec).fields.length === 0 ||
       (d.spec === f.spec && JSON.stringify(d.part) === JSON.stringify(f.part))));
    if (!deleted) out.push(row);
  }
}
const replacer = (k, v) => (typeof v === 'bigint' ? v.toString() : v instanceof Date ? v.toISOString() : v);
console.log(JSON.stringify({
  rows: out,
  files: [...data, ...deletes].map(f => ({ content: f.content, spec: f.spec, partition: f.part, records: f.records, order: f.order })),
  problems,
  default_spec: md['default-spec-id'],
  specs: md['partition-specs'],
  sort_orders: md['sort-orders'],
  default_sort_order: md['default-sort-order-id'],
}, replacer));
