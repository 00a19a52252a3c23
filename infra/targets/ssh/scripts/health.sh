# inferry health gate: /health answers and /v1/models lists the served model, before a deadline.
# Reads the API key from stdin (never argv). Args: BASE_URL HEALTH_PATH MODELS_PATH MODEL TIMEOUT_S [CURL_ARGS...]
base=$1 health=$2 models=$3 model=$4 timeout=$5
shift 5
IFS= read -r key || true
deadline=$(( $(date +%s) + timeout ))
while :; do
  if curl -fsS -m 5 -o /dev/null "$@" "$base$health" 2>/dev/null; then
    body=$(printf 'Authorization: Bearer %s\n' "$key" | curl -fsS -m 5 -H @- "$@" "$base$models" 2>/dev/null)
    case "$body" in *"\"id\":\"$model\""*|*"\"id\": \"$model\""*) echo healthy; exit 0;; esac
  fi
  [ "$(date +%s)" -ge "$deadline" ] && { echo "not healthy after ${timeout}s" >&2; exit 3; }
  sleep 0.3
done
