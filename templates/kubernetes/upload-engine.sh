#!/bin/sh
# Upload a built TensorRT engine to the weight store's build cache; the marker goes last, so a
# half-finished upload is never taken for a complete engine. Values come from the environment.
set -eu
marker="${BUILD_DIR}/.inferry-build-complete"
if [ -f "${marker}" ]; then
  echo "engine: s3://${BUCKET}/${BUILD_PREFIX} is already complete in the build cache"
  exit 0
fi
. "$(dirname "$0")/store.sh"
put_tree "${BUILD_DIR}" "s3://${BUCKET}/${BUILD_PREFIX}"
date -u +%Y-%m-%dT%H:%M:%SZ > "${marker}"
copy_one "${marker}" "s3://${BUCKET}/${BUILD_PREFIX}/.inferry-build-complete"
echo "engine: uploaded to s3://${BUCKET}/${BUILD_PREFIX}"
