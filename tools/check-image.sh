#!/usr/bin/env bash
# Checks compose/Dockerfile without a container engine (`make image-check`, run by `make test`):
#   1. NETPLAY_EXECUTABLES (what the image ships) are exactly Package.swift's executable products;
#   2. the build stage installs exactly the Makefile's APT_PACKAGES;
#   3. each executable, built as the Dockerfile builds it (swift build -c release
#      --static-swift-stdlib --product X, into the usual .build), loads only shared libraries from
#      Debian packages (ldd, then dpkg -S on the path and on the symlink's target), and the runtime
#      stage installs exactly those packages, leaving out the ones debian:bookworm-slim already has
#      (BASE_PACKAGES below: glibc's libc6, libgcc-s1, libstdc++6 (apt needs it) and zlib1g, all
#      Priority required or apt's dependencies, so present in every bookworm image);
#   4. EXPOSE lists every port compose/cluster.yaml binds (the image runs it by default).
# Usage: tools/check-image.sh [--no-build | --debug]
#   --no-build: check the binaries already in .build/release;
#   --debug: check the debug binaries already built (`make test` builds them for the tests): they
#     load the Swift runtime from the toolchain (lib/swift/...), which the static build embeds,
#     so those libraries are passed over; every other library is the static build's (the same
#     ldd list on this toolchain), and the check takes seconds instead of a release build.
# Prints what to write on a mismatch. Assumes a Debian bookworm host, like the image's stages.
set -euo pipefail
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}
DOCKERFILE=compose/Dockerfile
BASE_PACKAGES="libc6 libgcc-s1 libstdc++6 zlib1g"
build=1
mode=release
case "${1:-}" in
  --no-build) build=0;;
  --debug) build=0; mode=debug;;
esac
fail=0
problem() { echo "image-check: $*" >&2; fail=1; }
sorted() { tr ' ' '\n' | sed '/^$/d' | sort -u | tr '\n' ' ' | sed 's/ $//'; }

# The Dockerfile's stages: ARG NETPLAY_EXECUTABLES, the apt-get install of each stage, EXPOSE.
read -r -d '' PARSE <<'PY' || true
import re, sys
text = re.sub(r"\\\n", " ", open(sys.argv[1]).read())
stages, what = [], sys.argv[2]
for line in text.splitlines():
    line = line.strip()
    if line.startswith("FROM "): stages.append([])
    elif stages: stages[-1].append(line)
def installs(stage):
    for line in stage:
        m = re.search(r"apt-get install (.*?)(&&|$)", line)
        if m: return " ".join(w for w in m.group(1).split() if not w.startswith("-"))
    return ""
if what == "executables":
    for line in stages[0]:
        m = re.match(r'ARG NETPLAY_EXECUTABLES="(.*)"', line)
        if m: print(m.group(1))
elif what == "build": print(installs(stages[0]))
elif what == "runtime": print(installs(stages[-1]))
elif what == "expose":
    print(" ".join(" ".join(l.split()[1:]) for l in stages[-1] if l.startswith("EXPOSE ")))
PY
dockerfile() { python3 -c "$PARSE" "$DOCKERFILE" "$1"; }

executables=$(dockerfile executables | sorted)
[ -n "$executables" ] || { echo "image-check: no ARG NETPLAY_EXECUTABLES=\"...\" in $DOCKERFILE" >&2; exit 1; }
products=$($SWIFT package dump-package 2>/dev/null | python3 -c '
import json, sys
print(" ".join(p["name"] for p in json.load(sys.stdin)["products"] if "executable" in p["type"]))' | sorted)
[ "$executables" = "$products" ] ||
  problem "$DOCKERFILE NETPLAY_EXECUTABLES ($executables) are not Package.swift's executable products ($products)"

makefile=$(make -s --no-print-directory print-APT_PACKAGES | sorted)
buildstage=$(dockerfile build | sorted)
[ "$buildstage" = "$makefile" ] ||
  problem "the build stage installs ($buildstage), the Makefile's APT_PACKAGES are ($makefile)"

# Every port cluster.yaml binds (endpoints: HOST:PORT or tcp://HOST:PORT) is in EXPOSE.
bound=$(grep -oE '(tcp://)?[0-9.]+:[0-9]{4,5}\b' compose/cluster.yaml | sed 's/.*://' | sorted)
exposed=$(dockerfile expose | sorted)
for port in $bound; do
  case " $exposed " in *" $port "*) ;; *)
    case $port in 7000|7105|7205|7305|7405) ;; # control endpoints: never exposed (docs/security.md)
      *) problem "compose/cluster.yaml binds $port but $DOCKERFILE does not EXPOSE it";; esac;; esac
done

if [ $build = 1 ]; then
  for exe in $executables; do
    echo "image-check: swift build -c release --static-swift-stdlib --product $exe"
    if ! log=$($SWIFT build -c release --static-swift-stdlib --product "$exe" 2>&1); then
      echo "$log" | tail -30 >&2; echo "image-check: building $exe failed" >&2; exit 1
    fi
  done
fi
bin=$($SWIFT build -c $mode --show-bin-path)

owner() {  # the Debian package that owns a library path (usrmerge: /lib and /usr/lib are one)
  local candidates=("$1" "$(readlink -f "$1")") c p
  for c in "${candidates[@]}"; do
    for p in "$c" "${c#/usr}" "/usr$c"; do
      dpkg -S "$p" 2>/dev/null | grep -v '^diversion' | head -1 | cut -d: -f1 && return 0
    done
  done
  return 1
}
paths=""
for exe in $executables; do
  [ -x "$bin/$exe" ] || { problem "$bin/$exe is missing"; continue; }
  while read -r line; do
    case "$line" in
      *"not found"*) problem "$exe: $line"; continue;;
      linux-vdso*|"") continue;;
      *"=>"*) path=$(echo "$line" | sed -E 's/.*=> ([^ ]+).*/\1/');;
      *) path=$(echo "$line" | awk '{print $1}');;
    esac
    case "$path" in libswift*|*/libswift*|*/lib_FoundationICU*|*/libFoundation*|*/libdispatch*|*/libBlocksRuntime*)
      if [ $mode = debug ]; then
        case "$path" in */lib/swift/*) continue;; esac  # the toolchain's runtime: embedded by the static build
      fi
      problem "$exe loads the Swift runtime dynamically ($path): not built with --static-swift-stdlib";; esac
    paths="$paths $path"
  done < <(ldd "$bin/$exe")
done
loaded=""
for path in $(echo "$paths" | sorted); do
  package=$(owner "$path") || { problem "$path (loaded) belongs to no Debian package"; continue; }
  loaded="$loaded $package"
done
needed=""
for package in $(echo "$loaded" | sorted); do
  case " $BASE_PACKAGES " in *" $package "*) ;; *) needed="$needed $package";; esac
done
needed=$(echo "$needed" | sorted)
runtime=$(dockerfile runtime | sorted)
runtime_libs=$(echo "$runtime" | tr ' ' '\n' | grep -v '^ca-certificates$' | sorted)
[ "$runtime_libs" = "$needed" ] ||
  problem "the runtime stage installs ($runtime_libs) besides ca-certificates; the executables load ($needed) beyond the base image's ($BASE_PACKAGES)"
if [ $fail = 0 ]; then
  echo "image-check: OK ($mode binaries): $(echo $executables | wc -w) executables load ($needed) + base ($BASE_PACKAGES); build stage = APT_PACKAGES; EXPOSE covers cluster.yaml"
fi
exit $fail
