#!/bin/sh
# Pull the model (and a built TensorRT engine, if any) from the weight store; skip when the cache
# already holds a verified copy of the same manifest (${MANIFEST}: path, size, sha256 of every file).
# Values come from the environment, never inlined.
set -eu
src="s3://${BUCKET}/${PREFIX}"
mkdir -p "${WEIGHTS_DIR}"
mkdir -p "${HOME}/.aws"  # path-style addressing for S3-compatible stores (no `aws configure`: one CLI start less)
printf '[default]\ns3 =\n    addressing_style = %s\n' "${ADDRESSING_STYLE:-path}" > "${HOME}/.aws/config"
aws s3 cp --only-show-errors "${src}/${MANIFEST}" "${WEIGHTS_DIR}/.manifest.new"
want=$(sha256sum "${WEIGHTS_DIR}/.manifest.new" | cut -d' ' -f1)
if [ -f "${WEIGHTS_DIR}/.verified" ] && [ "$(cat "${WEIGHTS_DIR}/.verified")" = "${want}" ]; then
  echo "weights: cache holds verified manifest ${want}; nothing to fetch"
else
  # sync transfers only what differs: a second run after an interruption resumes.
  aws s3 sync --only-show-errors "${src}" "${WEIGHTS_DIR}"
  echo "weights: fetched ${src} for manifest ${want}"
fi
rm -f "${WEIGHTS_DIR}/.manifest.new"
if [ -n "${BUILD_PREFIX:-}" ]; then
  mkdir -p "${BUILD_DIR}"
  aws s3 sync --only-show-errors "s3://${BUCKET}/${BUILD_PREFIX}" "${BUILD_DIR}"
  echo "engine: fetched s3://${BUCKET}/${BUILD_PREFIX}"
fi
