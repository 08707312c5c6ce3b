// fetch() over local files, for icebird and hyparquet reading a warehouse on disk: GET
// with an optional Range, and HEAD. One module for the verifier (chaos/verify.mjs, whose
// locations are mapped with --path-map) and the test readers (tests/js/lib/localfetch.mjs).
//
// Avro files (manifests, manifest lists) with the "deflate" codec are served re-encoded
// with the "null" codec, each block inflated by node's zlib (avroInflated): icebird 0.3.1
// inflates Avro's raw deflate blocks with a gzip decoder (hyparquet-compressors' gunzip)
// that, when its output buffer ends up larger than the data, reads the bytes after the
// deflate stream as a further gzip member and fails on some valid blocks ("offset is out
// of bounds"). The records are unchanged; icebird still decodes them.
import fs from 'node:fs';
import zlib from 'node:zlib';

/**
 * An Avro object container file with its deflate blocks inflated and its codec set to
 * null (any other file is returned as it is).
 */
export function avroInflated(buf) {
  if (buf.length < 4 || buf.toString('latin1', 0, 4) !== 'Obj\x01') return buf;
  let pos = 4;
  const long = () => {
    let n = 0n;
    let shift = 0n;
    let b;
    do {
      if (pos >= buf.length) throw new Error('truncated Avro file');
      b = BigInt(buf[pos++]);
      n |= (b & 0x7fn) << shift;
      shift += 7n;
    } while (b & 0x80n);
    return Number((n >> 1n) ^ -(n & 1n));
  };
  const bytes = () => {
    const n = long();
    const v = buf.subarray(pos, pos + n);
    pos += n;
    return v;
  };
  const zigzag = (v) => {
    let n = (BigInt(v) << 1n) ^ (BigInt(v) >> 63n);
    const out = [];
    do {
      let b = Number(n & 0x7fn);
      n >>= 7n;
      if (n) b |= 0x80;
      out.push(b);
    } while (n);
    return Buffer.from(out);
  };
  const meta = [];
  for (let count = long(); count !== 0; count = long()) {
    if (count < 0) {
      count = -count;
      long(); // the block's size in bytes
    }
    for (let i = 0; i < count; i++) meta.push([bytes().toString('utf8'), bytes()]);
  }
  const codec = meta.find(([k]) => k === 'avro.codec')?.[1].toString('utf8') ?? 'null';
  if (codec !== 'deflate') return buf;
  const sync = buf.subarray(pos, pos + 16);
  pos += 16;
  const out = [Buffer.from('Obj\x01', 'latin1'), zigzag(meta.length)];
  for (const [k, v] of meta) {
    const value = k === 'avro.codec' ? Buffer.from('null') : v;
    out.push(zigzag(Buffer.byteLength(k)), Buffer.from(k, 'utf8'), zigzag(value.length), value);
  }
  out.push(zigzag(0), sync);
  while (pos < buf.length) {
    const count = long();
    const data = zlib.inflateRawSync(bytes());
    out.push(zigzag(count), zigzag(data.length), data, buf.subarray(pos, pos + 16));
    pos += 16;
  }
  return Buffer.concat(out);
}

/**
 * A fetch() answered from disk. toPath(url) gives the local path of a URL, or null for a
 * URL that is not local: that one goes to otherwise(input, init). A missing file is a 404;
 * a .avro file is served (HEAD, GET, Range) as avroInflated gives it.
 */
export function fileFetch(toPath, otherwise) {
  return async (input, init = {}) => {
    const url = typeof input === 'string' ? input : input.url ?? String(input);
    const p = toPath(url);
    if (p === null) return otherwise(input, init);
    let st;
    try {
      st = await fs.promises.stat(p);
    } catch {
      return new Response(null, { status: 404, statusText: `not found: ${p}` });
    }
    const avro = p.endsWith('.avro') ? avroInflated(await fs.promises.readFile(p)) : null;
    const size = avro ? avro.length : st.size;
    if ((init.method ?? 'GET').toUpperCase() === 'HEAD') {
      return new Response(null, { status: 200, headers: { 'content-length': String(size) } });
    }
    const range = new Headers(init.headers ?? {}).get('range');
    let start = 0;
    let end = size - 1;
    const r = range ? /bytes=(\d*)-(\d*)/.exec(range) : null;
    if (r) {
      if (r[1] === '' && r[2] !== '') {
        start = Math.max(0, size - Number(r[2]));
      } else {
        start = Number(r[1]);
        if (r[2] !== '') end = Math.min(end, Number(r[2]));
      }
    }
    let body;
    if (avro) {
      body = avro.subarray(start, end + 1);
    } else {
      body = Buffer.alloc(Math.max(0, end - start + 1));
      const fh = await fs.promises.open(p, 'r');
      try {
        await fh.read(body, 0, body.length, start);
      } finally {
        await fh.close();
      }
    }
    return new Response(body, {
      status: range ? 206 : 200,
      headers: { 'content-length': String(body.length) },
    });
  };
}
