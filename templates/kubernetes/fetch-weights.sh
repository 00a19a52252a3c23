#!/bin/sh
# Pull the model (and a built TensorRT engine, if any) from the weight store; skip when the cache
# already holds a verified copy of the same manifest (${MANIFEST}: path, size, sha256 of every file).
# With a node cache (CACHE_DIR), each verified model stays on the node in CACHE_DIR/<sha256 of its manifest>,
# used again while its files' sizes and times are those verify-weights.py recorded, and WEIGHTS_DIR becomes a
# link to it; the least recently used go first when a new one would pass CACHE_BYTES.
# Values come from the environment, never inlined.
set -eu
. "$(dirname "$0")/store.sh"
src="s3://${BUCKET}/${PREFIX}"

unchanged() {  # $1: a kept model; true when its record (.verified's second line) still holds
  [ -f "$1/.verified" ] && [ -f "$1/.files" ] || return 1
  now=$(cd "$1" && while IFS= read -r p; do stat -c '%s %Y %i' -- "$p" 2>/dev/null || echo missing; done < .files |
        sha256sum | cut -d' ' -f1)
  [ "$(tail -n 1 "$1/.verified")" = "${now}" ]
}

make_room() {  # $1: bytes about to arrive, $2: the model they are
  used=$(du -sk "${CACHE_DIR}" | cut -f1)
  for marker in $(ls -tr "${CACHE_DIR}"/*/.verified 2>/dev/null); do  # least recently used first
    [ $((used * 1024 + $1)) -le "${CACHE_BYTES}" ] && return 0
    old=$(dirname "${marker}") name=$(basename "$(dirname "${marker}")")
    # Only a kept model of this cache: a folder named by 64 hex digits, right under CACHE_DIR.
    case "${name}" in *[!0-9a-f]*) continue ;; esac
    [ "${#name}" -eq 64 ] && [ "$(dirname "${old}")" = "${CACHE_DIR}" ] && [ "${name}" != "$2" ] || continue
    echo "weights: the node cache would pass ${CACHE_BYTES} bytes: removing $(basename "${old}"), used least recently"
    rm -rf "${old}"
    used=$(du -sk "${CACHE_DIR}" | cut -f1)
  done
  [ $((used * 1024 + $1)) -le "${CACHE_BYTES}" ] ||
    echo "weights: warning: the node cache will hold more than ${CACHE_BYTES} bytes (target.cache_size)" >&2
}

took() {  # " in S s": the seconds since $1 (/proc/uptime's first field, to the hundredth); nothing without one
  now=$(cut -d' ' -f1 /proc/uptime 2>/dev/null) && [ -n "$1" ] && [ -n "${now}" ] || return 0
  awk -v a="$1" -v b="${now}" 'BEGIN { printf " in %.2f s", b - a }'
}
start=$(cut -d' ' -f1 /proc/uptime 2>/dev/null || true)  # when the fetch began (its log line says how long)

drop_abandoned() {  # what pods gone mid-fetch (deleted, scaled away) left in $1: nothing written in it for 30 min
  # A live fetch writes all the time, a live check touches its folder every minute (verify-weights.py's alive);
  # a pod's own staging folder is its to resume (the same pod's restart).
  for old in "$1"/*; do
    [ -e "${old}" ] && [ "${old}" != "$1/$2" ] || continue
    [ -z "$(find "${old}" -mmin -30 | head -n 1)" ] || continue
    echo "weights: removing ${old##*/}, left by a fetch that did not finish"
    rm -rf "${old}"
  done
}

if [ -n "${CACHE_DIR:-}" ]; then
  incoming="${CACHE_DIR}/.incoming"
  me=$(uname -n)  # the pod's name: a restarted fetch resumes its own staging folder
  mkdir -p "${incoming}" "$(dirname "${WEIGHTS_DIR}")"
  copy_one "${src}/${MANIFEST}" "${incoming}/${me}.manifest"
  want=$(sha256sum "${incoming}/${me}.manifest" | cut -d' ' -f1)
  if unchanged "${CACHE_DIR}/${want}"; then
    echo "weights: the node cache holds manifest ${want}; nothing to fetch"
  else
    rm -rf "${CACHE_DIR:?}/${want}"  # a copy whose files changed since they were verified is not used
    drop_abandoned "${incoming}" "${want}.${me}"  # before sizing the cache: they count in its bound
    need=$(grep -o '"size": *[0-9]*' "${incoming}/${me}.manifest" | awk -F: '{s += $2} END {printf "%.0f", s}')
    make_room "${need}" "${want}"
    get_tree "${src}" "${incoming}/${want}.${me}"
    echo "weights: fetched ${src} for manifest ${want} into the node cache$(took "${start}")"
  fi
  rm -f "${incoming}/${me}.manifest"
  ln -sfn "${CACHE_DIR}/${want}" "${WEIGHTS_DIR}"
else
  mkdir -p "${WEIGHTS_DIR}"
  copy_one "${src}/${MANIFEST}" "${WEIGHTS_DIR}/.manifest.new"
  want=$(sha256sum "${WEIGHTS_DIR}/.manifest.new" | cut -d' ' -f1)
  if [ -f "${WEIGHTS_DIR}/.verified" ] && [ "$(cat "${WEIGHTS_DIR}/.verified")" = "${want}" ]; then
    echo "weights: cache holds verified manifest ${want}; nothing to fetch"
  else
    # Only what differs is fetched: a second run after an interruption resumes.
    get_tree "${src}" "${WEIGHTS_DIR}"
    echo "weights: fetched ${src} for manifest ${want}$(took "${start}")"
  fi
  rm -f "${WEIGHTS_DIR}/.manifest.new"
fi
if [ -n "${BUILD_PREFIX:-}" ]; then
  mkdir -p "${BUILD_DIR}"
  get_tree "s3://${BUCKET}/${BUILD_PREFIX}" "${BUILD_DIR}"
  echo "engine: fetched s3://${BUCKET}/${BUILD_PREFIX}"
fi
