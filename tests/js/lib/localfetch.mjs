// Lets icebird/hyparquet read a warehouse in a local directory: fetch() of an absolute
// path or a file:// URL is answered from disk (GET with optional Range, HEAD); other URLs
// go to the real fetch. Import this module before reading.
import { open, stat } from 'node:fs/promises';

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
