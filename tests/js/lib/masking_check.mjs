// Column masking checks of tests/integration/pipeline/column_masking.sh, with readers this
// project did not write (docs/worker.md, "Column masking"):
//
//   node masking_check.mjs read <table location>
//     -> {"fields":[names of the current schema], "rows":[{...}]}: the table's current
//        rows (deletes applied) read by chaos/verify's reader (icebird for the metadata and
//        manifests, DuckDB for the Parquet files), values as canonical text.
//
//   node masking_check.mjs scan <warehouse> <file of clear values, one a line>
//     -> {"files":{kind: n}, "hits":[{file, value, where}]}: looks for every clear value
//        in every byte of every file under the warehouse, as stored ("raw": Parquet
//        footers and page headers with their statistics, metadata JSON, state checkpoint
//        files), in every value of every Parquet file as DuckDB decodes it ("parquet":
//        data and dictionary pages after decompression, all columns of data, equality
//        delete and changelog files), and in Avro files with their deflate blocks
//        inflated ("avro": manifests with their lower/upper bounds, manifest lists).
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const verify = await import(pathToFileURL(path.join(root, 'chaos/verify.mjs')).href);
const { DuckDBInstance } = await import(pathToFileURL(path.join(root, 'tests/js/deploy/readers.mjs')).href);

function walk(dir, out = []) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else if (e.isFile()) out.push(p);
  }
  return out;
}

function kindOf(file) {
  const b = path.basename(file);
  if (file.includes(`${path.sep}_checkpoints${path.sep}`)) return 'state checkpoint';
  if (b.endsWith('.parquet')) {
    if (b.includes('-eqdel-')) return 'parquet equality deletes';
    if (b.includes('-cl-')) return 'parquet changelog';
    return 'parquet data';
  }
  if (b.startsWith('snap-') && b.endsWith('.avro')) return 'avro manifest list';
  if (b.endsWith('.avro')) return 'avro manifest';
  if (b.endsWith('.metadata.json')) return 'metadata json';
  return 'other';
}

function readVarint(buf, pos) {
  let n = 0n;
  let shift = 0n;
  for (;;) {
    const b = buf[pos.i++];
    n |= BigInt(b & 0x7f) << shift;
    if ((b & 0x80) === 0) break;
    shift += 7n;
  }
  return Number((n >> 1n) ^ -(n & 1n)); // zigzag
}

/** The blocks of an Avro object container, inflated when the codec is deflate. */
function avroPlain(buf) {
  if (buf.subarray(0, 4).toString('latin1') !== 'Obj\x01') throw new Error('not an Avro container');
  const pos = { i: 4 };
  const meta = {};
  for (let n = readVarint(buf, pos); n !== 0; n = readVarint(buf, pos)) {
    if (n < 0) {
      n = -n;
      readVarint(buf, pos); // block size in bytes
    }
    for (let k = 0; k < n; k++) {
      const kl = readVarint(buf, pos);
      const key = buf.subarray(pos.i, pos.i + kl).toString('utf8');
      pos.i += kl;
      const vl = readVarint(buf, pos);
      meta[key] = buf.subarray(pos.i, pos.i + vl);
      pos.i += vl;
    }
  }
  const codec = meta['avro.codec']?.toString() ?? 'null';
  pos.i += 16; // sync marker
  const parts = [];
  while (pos.i < buf.length) {
    readVarint(buf, pos); // objects in the block
    const size = readVarint(buf, pos);
    const block = buf.subarray(pos.i, pos.i + size);
    pos.i += size + 16;
    parts.push(codec === 'deflate' ? zlib.inflateRawSync(block) : block);
  }
  return Buffer.concat(parts);
}

async function read(dir) {
  verify.configure([]);
  const conn = await (await DuckDBInstance.create(':memory:')).connect();
  const t = await verify.readIcebergTable(dir, conn);
  console.log(JSON.stringify({ fields: t.fields.map((f) => f.name), rows: t.rows }));
}

async function scan(warehouse, valuesFile) {
  const values = fs.readFileSync(valuesFile, 'utf8').split('\n').filter(Boolean);
  const conn = await (await DuckDBInstance.create(':memory:')).connect();
  const files = {};
  const hits = [];
  const look = (file, where, text) => {
    for (const v of values) if (text.includes(v)) hits.push({ file, value: v, where });
  };
  for (const file of walk(warehouse)) {
    const kind = kindOf(file);
    files[kind] = (files[kind] ?? 0) + 1;
    const bytes = fs.readFileSync(file);
    look(file, 'raw', bytes.toString('latin1'));
    look(file, 'raw', bytes.toString('utf8'));
    if (kind.startsWith('parquet')) {
      const sql = `SELECT * FROM read_parquet('${file.replaceAll("'", "''")}')`;
      const rows = (await conn.runAndReadAll(sql)).getRowObjectsJson();
      look(file, 'parquet', JSON.stringify(rows));
    } else if (kind.startsWith('avro')) {
      look(file, 'avro', avroPlain(bytes).toString('latin1'));
    }
  }
  console.log(JSON.stringify({ files, hits }));
}

const [cmd, a, b] = process.argv.slice(2);
if (cmd === 'read' && a) await read(a);
else if (cmd === 'scan' && a && b) await scan(a, b);
else {
  console.error('usage: masking_check.mjs read <table location> | scan <warehouse> <values file>');
  process.exit(2);
}
