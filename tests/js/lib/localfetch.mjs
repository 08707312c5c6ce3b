// Lets icebird/hyparquet read a warehouse in a local directory: fetch() of an absolute
// path or a file:// URL is answered from disk (GET with optional Range, HEAD, Avro files
// served inflated: chaos/filefetch.mjs); other URLs go to the real fetch. Import this
// module before reading.
import { fileFetch } from '../../../chaos/filefetch.mjs';

const realFetch = globalThis.fetch;

function localPath(url) {
  if (url.startsWith('file://')) return decodeURIComponent(url.slice(7));
  if (url.startsWith('/')) return url;
  return null;
}

globalThis.fetch = fileFetch(localPath, realFetch);
