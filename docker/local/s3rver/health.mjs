// Health check of the local stack's S3 endpoint (docker/docker-compose.local.yml, service
// "s3"): exits 0 when s3rver answers on port 9000 (any HTTP status), 1 otherwise.
const ctl = new AbortController();
setTimeout(() => ctl.abort(), 2000);
fetch('http://127.0.0.1:9000/', { signal: ctl.signal }).then(
  () => process.exit(0),
  () => process.exit(1),
);
