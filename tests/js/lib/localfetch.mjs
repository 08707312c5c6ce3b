// Lets icebird/hyparquet read a warehouse in a local directory: fetch() of an absolute
// path or a file:// URL is answered from disk (GET with optional Range, HEAD); other URLs
// go to the real fetch. Import this module before reading.
//
// Avro files (manifests, manifest lists) with the "deflate" codec are served re-encoded
// with the "null" codec, each block inflated by node's zlib: icebird 0.3.1 decompresses
// Avro blocks with hyparquet's gunzip, which throws "offset is out of bounds" on some
// valid raw-deflate blocks. The records are unchanged; only the block codec differs.
import { open, readFile, stat } from 'node:fs/promises';
import { inflateRawSync } from 'node:zlib';

function readLong(buf, pos) {
  let n = 0n;
  let shift = 0n;
  let b;
  do {
    b = buf[pos++];
    n |= BigInt(b & 0x7f) << shift;
    shift += 7n;
  } while (b & 0x80);
  return [Number((n >> 1n) ^ -(n & 1n)), pos];
}

function writeLong(v) {
  let n = (BigInt(v) << 1n) ^ (BigInt(v) >> 63n);
  const out = [];
  do {
    let b = Number(n & 0x7fn);
    n >>= 7n;
    if (n) b |= 0x80;
    out.push(b);
  } while (n);
  return Buffer.from(out);
}

function bytesField(buf, pos) {
  const [len, p] = readLong(buf, pos);
  return [buf.subarray(p, p + len), p + len];
}

// Rewrites an Avro object container file from codec deflate to null.
function inflateAvro(buf) {
  if (buf.length < 4 || buf.toString('latin1', 0, 4) !== 'Obj\x01') return buf;
  let pos = 4;
  const meta = [];
  for (;;) {
    let count;
    [count, pos] = readLong(buf, pos);
    if (count === 0) break;
    if (count < 0) {
      count = -count;
      [, pos] = readLong(buf, pos);
    }
    for (let i = 0; i < count; i++) {
      let k, v;
      [k, pos] = bytesField(buf, pos);
      [v, pos] = bytesField(buf, pos);
      meta.push([k.toString('utf8'), v]);
    }
  }
  const codec = meta.find(([k]) => k === 'avro.codec');
  if (!codec || codec[1].toString() !== 'deflate') return buf;
  const sync = buf.subarray(pos, pos + 16);
  pos += 16;
  const parts = [Buffer.from('Obj\x01', 'latin1'), writeLong(meta.length)];
  for (const [k, v] of meta) {
    const val = k === 'avro.codec' ? Buffer.from('null') : v;
    parts.push(writeLong(Buffer.byteLength(k)), Buffer.from(k), writeLong(val.length), val);
  }
  parts.push(writeLong(0), sync);
  while (pos < buf.length) {
    let count, size;
    [count, pos] = readLong(buf, pos);
    [size, pos] = readLong(buf, pos);
    const data = inflateRawSync(buf.subarray(pos, pos + size));
    pos += size + 16;
    parts.push(writeLong(count), writeLong(data.length), data, sync);
  }
  return Buffer.concat(parts);
}

const realFetch = globalThis.fetch;

function localPath(url) {
  const s = typeof url === 'string' ? url : url.url ?? String(url);
  if (s.startsWith('file://')) return decodeURIComponent(s.slice(7));
  if (s.startsWith('/')) return s;
  return null;
}

globalThis.fetch = async (url, init = {}) => {
  const path = localPath(url);
  if (path === null) return realFetch(url, init);
  let st;
  try {
    st = await stat(path);
  } catch {
    return new Response(null, { status: 404, statusText: 'Not Found' });
  }
  if (path.endsWith('.avro')) {
    const body = inflateAvro(await readFile(path));
    return new Response(body, { status: 200, headers: { 'content-length': String(body.length) } });
  }
  const headers = new Headers(init.headers || {});
  if ((init.method || 'GET').toUpperCase() === 'HEAD')
    return new Response(null, { status: 200, headers: { 'content-length': String(st.size) } });
  let start = 0;
  let end = st.size - 1;
  const range = headers.get('range');
  if (range) {
    const m = /bytes=(\d*)-(\d*)/.exec(range);
    if (m) {
      if (m[1] === '' && m[2] !== '') {
        start = Math.max(0, st.size - Number(m[2]));
      } else {
        start = Number(m[1]);
        if (m[2] !== '') end = Math.min(end, Number(m[2]));
      }
    }
  }
  const len = Math.max(0, end - start + 1);
  const buf = Buffer.alloc(len);
  const fh = await open(path, 'r');
  try {
    await fh.read(buf, 0, len, start);
  } finally {
    await fh.close();
  }
  return new Response(buf, {
    status: range ? 206 : 200,
    headers: { 'content-length': String(len) },
  });
};
