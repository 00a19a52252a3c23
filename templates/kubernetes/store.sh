# Sourced by fetch-weights.sh and upload-engine.sh: copies between the weight store and the pod.
# s5cmd when the image has it (the default fetch_image, peakcom/s5cmd, keeps it at /s5cmd), else the aws CLI:
# s5cmd addresses a custom endpoint path-style only and reads '*' and '?' in a source as wildcards, so a store
# addressed virtual-host style, or a prefix holding those characters, takes the aws CLI.
# Values come from the environment, never inlined.
S5CMD=$(command -v s5cmd || { [ -x /s5cmd ] && echo /s5cmd; } || true)
s5cmd_unfit=""
[ "${ADDRESSING_STYLE:-path}" = path ] || s5cmd_unfit=yes
case "${PREFIX:-}${BUILD_PREFIX:-}" in *[*?]*) s5cmd_unfit=yes ;; esac
if [ -n "${S5CMD}" ] && [ -n "${s5cmd_unfit}" ]; then
  if command -v aws > /dev/null; then S5CMD=""; else
    echo "store: s5cmd cannot address this store (storage.addressing_style: ${ADDRESSING_STYLE:-path}," \
         "or '*' or '?' in the key prefix) and the fetch image has no aws CLI:" \
         "set target.fetch_image to an image with the aws CLI, such as amazon/aws-cli:2.22.0" >&2
    exit 2
  fi
fi
if [ -z "${S5CMD}" ]; then
  command -v aws > /dev/null || {
    echo "store: the fetch image (target.fetch_image) has neither s5cmd nor the aws CLI" >&2; exit 2; }
  mkdir -p "${HOME}/.aws"  # path-style addressing for S3-compatible stores (no `aws configure`: one CLI start less)
  printf '[default]\ns3 =\n    addressing_style = %s\n' "${ADDRESSING_STYLE:-path}" > "${HOME}/.aws/config"
fi

s5() {  # s5cmd at the store's endpoint, printing errors only
  if [ -n "${AWS_ENDPOINT_URL:-}" ]; then
    "${S5CMD}" --log error --endpoint-url "${AWS_ENDPOINT_URL}" "$@"
  else
    "${S5CMD}" --log error "$@"
  fi
}

copy_one() {  # $1 to $2, one object or file (s3:// on one side)
  if [ -n "${S5CMD}" ]; then s5 cp "$1" "$2"; else aws s3 cp --only-show-errors "$1" "$2"; fi
}

s5_sync() {  # s5cmd sync "$@"; fails on any error it prints, but that a prefix holds nothing
  # s5cmd's sync exits 0 when a listing fails (a refused key, say). A prefix that holds nothing (no engine built
  # yet, an upload's empty destination) is what the aws CLI's sync takes as nothing to do.
  errors=$(s5 sync "$@" 2>&1 >/dev/null) || { printf '%s\n' "${errors}" >&2; return 1; }
  if printf '%s\n' "${errors}" | grep -v -e '^$' -e ': no object found$' >&2; then return 1; fi
}

get_tree() {  # s3://$1 (a prefix) into the folder $2: what is missing or differs in size, so a rerun resumes
  if [ -n "${S5CMD}" ]; then
    # s5cmd would write a key holding '..' outside the folder (the aws CLI skips such keys): none is fetched.
    s5_sync --exclude '*..*' "${1%/}/*" "$2/"
  else
    aws s3 sync --only-show-errors "$1" "$2"
  fi
}

put_tree() {  # the folder $1 to s3://$2 (a prefix): what the store lacks or holds different
  if [ -n "${S5CMD}" ]; then s5_sync "$1/" "${2%/}/"; else aws s3 sync --only-show-errors "$1" "$2"; fi
}
