// The verifier's logical columns (chaos/verify.mjs, logicalColumns) after type changes
// Iceberg cannot promote (docs/worker.md, "Schema changes"): the source name is the
// current field and the earlier types are `<name>__v<k>`; tables versioned before that
// scheme have `<name>__v<k>` current and the first type under `<name>`. Either way the
// members are ordered newest first by field id, so a mirror row is read from the current
// field and a changelog row from whichever member holds its value. No servers needed.
import test from 'node:test';
import assert from 'node:assert/strict';
import { logicalColumns } from '../../chaos/verify.mjs';

const f = (id, name, type = 'string') => ({ id, name, type, required: id === 1 });

test('the source name holds the newest type; earlier ones follow by field id', () => {
  const cols = logicalColumns([f(1, 'id', 'int'), f(4, 'n__v1', 'decimal(10,2)'), f(8, 'n', 'decimal(16,4)'),
    f(9, 'n__v2', 'int')]);
  const n = cols.find((c) => c.name === 'n');
  assert.deepEqual(n.members, ['n__v2', 'n', 'n__v1']);
  assert.equal(n.type, 'int');
  assert.deepEqual(cols.map((c) => c.name), ['id', 'n']);
});

test('tables versioned before: n__v2 current, n the first type', () => {
  const cols = logicalColumns([f(1, 'id', 'int'), f(4, 'n', 'decimal(10,2)'), f(8, 'n__v2', 'decimal(14,4)')]);
  const n = cols.find((c) => c.name === 'n');
  assert.deepEqual(n.members, ['n__v2', 'n']);
  assert.equal(n.type, 'decimal(14,4)');
});

test('a retired field that yielded its name to a source column stays with its column', () => {
  // the source has n and n__v1; n's first type is n__v1__f2
  const cols = logicalColumns([f(1, 'id', 'int'), f(2, 'n__v1__f2'), f(3, 'n__v1', 'date'), f(4, 'n', 'int')], [],
    new Set(['id', 'n', 'n__v1']));
  assert.deepEqual(cols.find((c) => c.name === 'n').members, ['n', 'n__v1__f2']);
  assert.deepEqual(cols.find((c) => c.name === 'n__v1').members, ['n__v1']);
});
