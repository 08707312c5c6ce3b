#!/usr/bin/env bash
# The short form of `make compose-test` (docker/compose-test.sh --short), run by
# `make test` in CI: podman set up if missing, the images built (the host's binaries copied
# into the project image), the compose stack up with 3 workers, one worker container
# killed with SIGKILL and one paused past the heartbeat timeout under load, the verifier
# after each (0 lost, 0 duplicated, 0 mismatched), the stack down. It fails, never skips,
# when containers cannot run here. About 2 minutes with the images cached, 3 from nothing
# (docs/deployment.md, "make compose-test").
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
exec docker/compose-test.sh --short
