#!/bin/sh
# Upload a built TensorRT engine to the weight store's build cache; the marker goes last, so a
# half-finished upload is never taken for a complete engine. Values come from the environment.
set -eu
marker="${BUILD_DIR}/.inferry-build-complete"
if [ -f "${marker}" ]; then
  echo "engine: s3://${BUCKET}/${BUILD_PREFIX} is already complete in the build cache"
  exit 0
fi
mkdir -p "${HOME}/.aws"
printf '[default]\ns3 =\n    addressing_style = %s\n' "${ADDRESSING_STYLE:-path}" > "${HOME}/.aws/config"
aws s3 sync --only-show-errors "${BUILD_DIR}" "s3://${BUCKET}/${BUILD_PREFIX}"
date -u +%Y-%m-%dT%H:%M:%SZ > "${marker}"
aws s3 cp --only-show-errors "${marker}" "s3://${BUCKET}/${BUILD_PREFIX}/.inferry-build-complete"
echo "engine: uploaded to s3://${BUCKET}/${BUILD_PREFIX}"
