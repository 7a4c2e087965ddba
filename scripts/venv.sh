#!/usr/bin/env bash
# Creates or updates the project's Python virtualenv at .venv/ with the packages pinned in
# scripts/requirements.txt (delta-rs, pyarrow, confluent-kafka with its Avro, Protobuf and JSON
# Schema serdes).
# Idempotent: a stamp file keyed on the hash of requirements.txt (and the Python version)
# makes a second run a no-op. Prints the venv's path on stdout's last line.
#   PYTHON=/path/to/python3 scripts/venv.sh     # choose the interpreter (default: python3)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
REQ="$ROOT/scripts/requirements.txt"
PY="${PYTHON:-python3}"
STAMP="$VENV/.requirements.stamp"

log() { echo "venv.sh: $*" >&2; }

command -v "$PY" >/dev/null 2>&1 || { log "no $PY on PATH"; exit 1; }

# python3 -m venv needs ensurepip; Debian's system python ships it separately.
if ! "$PY" -c 'import ensurepip, venv' >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    ver="$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    log "installing python$ver-venv with apt-get"
    apt-get update -qq
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "python$ver-venv" >/dev/null; then
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    fi
  else
    log "$PY lacks the venv/ensurepip modules (install python3-venv)"; exit 1
  fi
fi

key="$( { "$PY" -c 'import sys; print(sys.version)'; cat "$REQ"; } | sha256sum | cut -d' ' -f1)"

if [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$key" ] \
   && "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
  log "up to date"
  echo "$VENV"
  exit 0
fi

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
  log "creating $VENV"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
fi

log "installing scripts/requirements.txt"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$REQ"
# Fail here, not in a test, if an import is broken.
"$VENV/bin/python" -c 'import deltalake, pyarrow, confluent_kafka, fastavro, requests
from confluent_kafka.schema_registry.avro import AvroSerializer, AvroDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer'
echo "$key" > "$STAMP"
log "ready: $VENV (activate with: . $VENV/bin/activate)"
echo "$VENV"
