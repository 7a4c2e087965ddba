# Object-store emulators for scripts/stack.sh (sourced by it; uses its DL, STACK, LOGS,
# log, die, launch, pick_port, port_open, tail_log, apt_install).
#
# One emulator per cloud, each speaking the store's wire protocol on loopback:
#   - S3: versitygw (Apache-2.0 S3 gateway), posix backend with a metadata sidecar, built
#     with `go install` from the Go module proxy;
#   - GCS: fake-gcs-server (JSON API, filesystem backend), Go module proxy;
#   - Azure Blob: Azurite (blob service only), npm.
# After start-up each is checked to refuse a second conditional create of one object (S3
# If-None-Match: *, GCS ifGenerationMatch=0, Azure If-None-Match: *), with curl: a store
# that overwrites would make every commit test meaningless. Each gets a bucket/container
# named "lake".

# Builds and installs are cached in $DL/stores/<name>-<version>.
VERSITYGW_VERSION="v1.8.0"
FAKE_GCS_VERSION="v1.56.1"
# 3.35.0: the newest Azurite whose package accepts Node < 21 (3.36 asks for 21, 3.37 for 22,
# Debian 12/13 ship 18/20). It needs --skipApiVersionCheck for azblob's x-ms-version.
AZURITE_VERSION="3.35.0"
STORES_DL="$DL/stores"
S3_ACCESS_KEY="ingestd-test"
S3_SECRET_KEY="ingestd-test-secret"
AZURITE_ACCOUNT="devstoreaccount1"
# Azurite's published development key (not a secret: the same in every Azurite).
AZURITE_KEY="Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
STORE_BUCKET="lake"
STORES="s3 gcs azurite"

# store_alive NAME: the recorded process runs and serves this instance's data directory
# (its command line names $STACK/NAME-data), so another instance's server never counts.
store_alive() {
  local pid pidf="$STACK/$1.pid"
  [ -f "$pidf" ] || return 1
  pid="$(cat "$pidf" 2>/dev/null)" || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$STACK/$1-data" || return 1
}

# go_tool NAME MODULE VERSION: build a Go command once into $STORES_DL/NAME-VERSION/.
go_tool() {
  local name="$1" mod="$2" ver="$3" dir="$STORES_DL/$1-$3"
  [ -x "$dir/$name" ] && return 0
  command -v go >/dev/null 2>&1 || die "go is needed to build $name $ver (go install $mod@$ver)"
  log "building $name $ver from the Go module proxy (first time only, 2-4 minutes)"
  rm -rf "$dir.tmp"; mkdir -p "$dir.tmp" "$LOGS"
  if ! CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOBIN="$dir.tmp" go install "$mod@$ver" > "$LOGS/build-$name.log" 2>&1; then
    tail_log "$LOGS/build-$name.log"; die "could not build $name ($mod@$ver)"
  fi
  rm -rf "$dir"; mv "$dir.tmp" "$dir"
}

azurite_dist() {
  local dir="$STORES_DL/azurite-$AZURITE_VERSION"
  [ -f "$dir/.installed" ] && return 0
  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then apt_install nodejs npm; fi
  log "installing Azurite $AZURITE_VERSION from npm (first time only)"
  rm -rf "$dir.tmp"; mkdir -p "$dir.tmp" "$LOGS"
  if ! npm install --no-audit --no-fund --omit=dev --prefix "$dir.tmp" "azurite@$AZURITE_VERSION" > "$LOGS/npm-azurite.log" 2>&1; then
    tail_log "$LOGS/npm-azurite.log"; die "npm could not install azurite@$AZURITE_VERSION"
  fi
  touch "$dir.tmp/.installed"
  rm -rf "$dir"; mv "$dir.tmp" "$dir"
}

# s3req METHOD PATH [curl args...]: a SigV4-signed request to the S3 emulator; prints the status.
s3req() {
  local m="$1" p="$2"; shift 2
  curl -s -m 10 -o /dev/null -w '%{http_code}' --aws-sigv4 "aws:amz:us-east-1:s3" --user "$S3_ACCESS_KEY:$S3_SECRET_KEY" \
    -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -X "$m" "$@" "http://127.0.0.1:$(cat "$STACK/s3.port")/$p"
}

# azreq METHOD PATH QUERY IF_NONE_MATCH BODY: a SharedKey-signed Blob request to Azurite
# (path-style: the account is the first path element, and appears twice in the signed
# resource); prints the status.
azreq() {
  local method="$1" path="$2" query="$3" inm="$4" body="$5" date len="" ct="" hdrs sts key sig res url
  date="$(LC_ALL=C date -u '+%a, %d %b %Y %H:%M:%S GMT')"
  hdrs="x-ms-date:$date"$'\n'"x-ms-version:2021-08-06"
  if [ -n "$body" ]; then len="${#body}"; ct="text/plain"; hdrs="x-ms-blob-type:BlockBlob"$'\n'"$hdrs"; fi
  res="/$AZURITE_ACCOUNT/$AZURITE_ACCOUNT/$path"
  [ -n "$query" ] && res="$res"$'\n'"${query/=/:}"
  sts="$method"$'\n\n\n'"$len"$'\n\n'"$ct"$'\n\n\n\n'"$inm"$'\n\n\n'"$hdrs"$'\n'"$res"
  key="$(printf '%s' "$AZURITE_KEY" | base64 -d | od -An -v -tx1 | tr -d ' \n')"
  sig="$(printf '%s' "$sts" | openssl dgst -sha256 -mac HMAC -macopt "hexkey:$key" -binary | base64 -w0)"
  local args=(-s -m 10 -o /dev/null -w '%{http_code}' -X "$method" -H "x-ms-date: $date" -H "x-ms-version: 2021-08-06"
    -H "Authorization: SharedKey $AZURITE_ACCOUNT:$sig")
  [ -n "$inm" ] && args+=(-H "If-None-Match: $inm")
  if [ -n "$body" ]; then
    args+=(-H "x-ms-blob-type: BlockBlob" -H "Content-Type: text/plain" --data-binary "$body")
  elif [ "$method" = PUT ]; then
    args+=(-H "Content-Length: 0")
  fi
  url="http://127.0.0.1:$(cat "$STACK/azurite.port")/$AZURITE_ACCOUNT/$path"
  [ -n "$query" ] && url="$url?$query"
  curl "${args[@]}" "$url"
}

# wait_http NAME URL: until the server answers HTTP at all (any status), 60 s at most.
wait_http() {
  local _
  for _ in $(seq 1 120); do
    if ! store_alive "$1"; then tail_log "$LOGS/$1.log"; die "$1 exited during start-up"; fi
    [ "$(curl -s -m 2 -o /dev/null -w '%{http_code}' "$2" 2>/dev/null)" != "000" ] && return 0
    sleep 0.5
  done
  tail_log "$LOGS/$1.log"; die "$1 did not answer at $2 within 60 s"
}

# check_refused NAME FIRST SECOND: the self-test's two statuses: the first conditional
# create must succeed, the second must be refused.
check_refused() {
  case "$2" in 200|201) ;; *) die "$1: a conditional create of a fresh object answered $2, want 200/201" ;; esac
  case "$3" in
    412|409) log "$1 refuses a second conditional create ($3)" ;;
    *) die "$1 accepted a second conditional create ($3): it overwrites objects, so it cannot test Delta commits" ;;
  esac
}

s3_start() { # s3_start PORT
  go_tool versitygw github.com/versity/versitygw/cmd/versitygw "$VERSITYGW_VERSION"
  echo "$1" > "$STACK/s3.port"
  mkdir -p "$STACK/s3-data" "$STACK/s3-meta"
  # --sidecar keeps object metadata (which If-None-Match needs) in files, so the emulator
  # works on filesystems without user xattrs too; --nometa would make it overwrite.
  ROOT_ACCESS_KEY="$S3_ACCESS_KEY" ROOT_SECRET_KEY="$S3_SECRET_KEY" \
    launch s3 "$STACK/s3.pid" "$LOGS/s3.log" "$STORES_DL/versitygw-$VERSITYGW_VERSION/versitygw" \
    --port "127.0.0.1:$1" posix --sidecar "$STACK/s3-meta" "$STACK/s3-data"
}

s3_ready() {
  local k a b
  wait_http s3 "http://127.0.0.1:$(cat "$STACK/s3.port")/"
  a="$(s3req PUT "$STORE_BUCKET")"
  case "$a" in 200|409) ;; *) die "versitygw: create bucket $STORE_BUCKET answered $a" ;; esac
  k="$STORE_BUCKET/.stack-check-$(date +%s%N)"
  a="$(s3req PUT "$k" -H 'If-None-Match: *' --data-binary first)"
  b="$(s3req PUT "$k" -H 'If-None-Match: *' --data-binary second)"
  s3req DELETE "$k" >/dev/null || true
  check_refused "versitygw (S3)" "$a" "$b"
}

gcs_start() { # gcs_start PORT
  go_tool fake-gcs-server github.com/fsouza/fake-gcs-server "$FAKE_GCS_VERSION"
  echo "$1" > "$STACK/gcs.port"
  mkdir -p "$STACK/gcs-data"
  # Its defaults (0.0.0.0, https, public host storage.googleapis.com, /storage) are all overridden.
  launch gcs "$STACK/gcs.pid" "$LOGS/gcs.log" "$STORES_DL/fake-gcs-server-$FAKE_GCS_VERSION/fake-gcs-server" \
    -scheme http -host 127.0.0.1 -port "$1" -public-host "127.0.0.1:$1" -external-url "http://127.0.0.1:$1" \
    -backend filesystem -filesystem-root "$STACK/gcs-data" -log-level warn
}

gcs_ready() {
  local g a b k
  g="http://127.0.0.1:$(cat "$STACK/gcs.port")"
  wait_http gcs "$g/storage/v1/b"
  a="$(curl -s -m 10 -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    -d "{\"name\":\"$STORE_BUCKET\"}" "$g/storage/v1/b?project=ingestd-test")"
  case "$a" in 200|409) ;; *) die "fake-gcs-server: create bucket $STORE_BUCKET answered $a" ;; esac
  k=".stack-check-$(date +%s%N)"
  a="$(curl -s -m 10 -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: text/plain' --data-binary first \
    "$g/upload/storage/v1/b/$STORE_BUCKET/o?uploadType=media&name=$k&ifGenerationMatch=0")"
  b="$(curl -s -m 10 -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: text/plain' --data-binary second \
    "$g/upload/storage/v1/b/$STORE_BUCKET/o?uploadType=media&name=$k&ifGenerationMatch=0")"
  curl -s -m 10 -o /dev/null -X DELETE "$g/storage/v1/b/$STORE_BUCKET/o/$k" || true
  check_refused "fake-gcs-server (GCS)" "$a" "$b"
}

azurite_start() { # azurite_start PORT
  azurite_dist
  echo "$1" > "$STACK/azurite.port"
  mkdir -p "$STACK/azurite-data"
  launch azurite "$STACK/azurite.pid" "$LOGS/azurite.log" \
    node "$STORES_DL/azurite-$AZURITE_VERSION/node_modules/azurite/dist/src/blob/main.js" \
    --blobHost 127.0.0.1 --blobPort "$1" --location "$STACK/azurite-data" --skipApiVersionCheck --disableTelemetry
}

azurite_ready() {
  local a b k
  wait_http azurite "http://127.0.0.1:$(cat "$STACK/azurite.port")/$AZURITE_ACCOUNT"
  a="$(azreq PUT "$STORE_BUCKET" restype=container "" "")"
  case "$a" in 201|409) ;; *) die "Azurite: create container $STORE_BUCKET answered $a" ;; esac
  k="$STORE_BUCKET/.stack-check-$(date +%s%N)"
  a="$(azreq PUT "$k" "" '*' first)"
  b="$(azreq PUT "$k" "" '*' second)"
  azreq DELETE "$k" "" "" "" >/dev/null || true
  check_refused "Azurite (Azure Blob)" "$a" "$b"
}

write_stores_env() {
  local s3="http://127.0.0.1:$(cat "$STACK/s3.port")" az="http://127.0.0.1:$(cat "$STACK/azurite.port")/$AZURITE_ACCOUNT"
  cat > "$STACK/stores.env" <<ENV
export AWS_ENDPOINT_URL_S3=$s3
export S3_ENDPOINT=$s3
export AWS_ACCESS_KEY_ID=$S3_ACCESS_KEY
export AWS_SECRET_ACCESS_KEY=$S3_SECRET_KEY
export AWS_REGION=us-east-1
export STORAGE_EMULATOR_HOST=127.0.0.1:$(cat "$STACK/gcs.port")
export AZURITE_BLOB_ENDPOINT=$az
export AZURITE_ACCOUNT_KEY=$AZURITE_KEY
export AZURE_STORAGE_CONNECTION_STRING="DefaultEndpointsProtocol=http;AccountName=$AZURITE_ACCOUNT;AccountKey=$AZURITE_KEY;BlobEndpoint=$az;"
ENV
}

# stores_dist: build or install the missing emulators, in parallel (the npm download
# overlaps the Go builds); a no-op when all are cached.
stores_dist() {
  local pids=() p rc=0
  [ -x "$STORES_DL/versitygw-$VERSITYGW_VERSION/versitygw" ] ||
    { go_tool versitygw github.com/versity/versitygw/cmd/versitygw "$VERSITYGW_VERSION" & pids+=("$!"); }
  [ -x "$STORES_DL/fake-gcs-server-$FAKE_GCS_VERSION/fake-gcs-server" ] ||
    { go_tool fake-gcs-server github.com/fsouza/fake-gcs-server "$FAKE_GCS_VERSION" & pids+=("$!"); }
  [ -f "$STORES_DL/azurite-$AZURITE_VERSION/.installed" ] || { azurite_dist & pids+=("$!"); }
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  [ "$rc" = 0 ] || die "could not install the object-store emulators (see above)"
}

# stores_up: start the emulators that do not run yet (idempotent), check each, write
# stores.env. Ports: S3_PORT (7070), GCS_PORT (4443), AZURITE_PORT (10000), with the rules
# of pick_port; a previous run's port is reused when free.
stores_up() {
  mkdir -p "$STACK" "$LOGS"
  local name port def var explicit chosen="" started=""
  command -v curl >/dev/null 2>&1 || apt_install curl
  command -v openssl >/dev/null 2>&1 || apt_install openssl
  stores_dist
  for name in $STORES; do
    if store_alive "$name"; then chosen="$chosen $(cat "$STACK/$name.port")"; fi
  done
  for name in $STORES; do
    store_alive "$name" && continue
    case "$name" in s3) def=7070 ;; gcs) def=4443 ;; azurite) def=10000 ;; esac
    var="$(echo "$name" | tr '[:lower:]' '[:upper:]')_PORT"
    explicit=0
    if [ -n "${!var:-}" ]; then
      explicit=1; def="${!var}"
    elif [ -f "$STACK/$name.port" ] && ! port_open "$(cat "$STACK/$name.port")"; then
      def="$(cat "$STACK/$name.port")"
    fi
    # shellcheck disable=SC2086 # chosen is a list of ports
    port="$(pick_port "$var" "$def" "$explicit" $chosen)"
    chosen="$chosen $port"
    rm -f "$STACK/$name.pid"
    STORES_STARTED="${STORES_STARTED:-} $name"
    "${name}_start" "$port"; started="$started $name"
  done
  for name in $started; do "${name}_ready"; done
  write_stores_env
  if [ -n "$started" ]; then log "object stores ready:$started"; else log "object stores already running"; fi
}

# stop_store NAME: stop an emulator of this instance (TERM, then KILL after 10 s).
stop_store() {
  local pid _ name="$1"
  if store_alive "$name"; then
    pid="$(cat "$STACK/$name.pid")"
    log "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  fi
  rm -f "$STACK/$name.pid"
}

stores_down() {
  local name
  for name in $STORES; do stop_store "$name"; done
}

# stores_status: one line per emulator; returns 1 if one does not run.
stores_status() {
  local name rc=0
  for name in $STORES; do
    if store_alive "$name"; then
      printf '%-9s running, pid %s, 127.0.0.1:%s\n' "$name:" "$(cat "$STACK/$name.pid")" "$(cat "$STACK/$name.port")"
    else
      printf '%-9s not running\n' "$name:"; rc=1
    fi
  done
  return "$rc"
}
