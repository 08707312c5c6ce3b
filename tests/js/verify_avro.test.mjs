// The verifier's Avro path (chaos/filefetch.mjs, avroInflated): a manifest list this pipeline
// wrote (deflate codec, tests/data/avro/manifest-list-deflate.avro, from a make
// compose-test run) that icebird 0.3.1 fails to inflate ("offset is out of bounds": its
// gzip decoder reads past the raw deflate stream), read after the verifier inflates its
// blocks with zlib. Run by tests/run.sh integration (node --test).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { avroMetadata, avroRead } from 'icebird';
import { avroInflated } from '../../chaos/filefetch.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const fixture = fs.readFileSync(path.join(here, '../data/avro/manifest-list-deflate.avro'));

async function records(buf) {
  const ab = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength);
  const reader = { view: new DataView(ab), offset: 0 };
  const { metadata, syncMarker } = await avroMetadata(reader);
  return { codec: metadata['avro.codec'], rows: await avroRead({ reader, metadata, syncMarker }) };
}

test('a deflate manifest list icebird cannot inflate reads once inflated', async () => {
  await assert.rejects(records(fixture), /out of bounds/, 'icebird reads it now: the workaround may go');
  const { codec, rows } = await records(avroInflated(fixture));
  assert.equal(codec, 'null');
  assert.equal(rows.length, 1);
  assert.match(rows[0].manifest_path, /^s3:\/\/warehouse\/public\/transactions_changelog\/metadata\/.*-m0\.avro$/);
  assert.ok(Number(rows[0].manifest_length) > 0);
});

test('files that are not deflate Avro pass unchanged', () => {
  const text = Buffer.from('{"format-version": 2}');
  assert.equal(avroInflated(text), text);
  const inflated = avroInflated(fixture);
  assert.equal(avroInflated(inflated), inflated);
});
