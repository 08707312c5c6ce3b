// The independent readers chaos/verify uses, re-exported from tests/js/node_modules so
// scripts outside tests/js resolve the pinned versions: icebird (Iceberg metadata and
// Avro manifests) and DuckDB (Parquet).
export * as icebird from 'icebird';
export { DuckDBInstance } from '@duckdb/node-api';
