#!/usr/bin/env bash
# Rebuilds the seed corpora under tests/fuzz/corpus/ (docs/testing.md):
#   yaml-model/  examples/**/*.yaml, tests/lit/bad-input/*.yaml and the lit
#                tests' other model files
#   textual-ir/  tests/lit/**/*.ir
#   checkpoint/, npy/, idx/, csv/  written by ampc-fuzz-seeds (MakeSeeds.cpp)
# Seeds are named seed-*; regression inputs (regress-*, added by hand with
# the fix they test) are left alone.
#
#   tests/fuzz/make-corpus.sh [BUILD_DIR]     (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
corpus=$root/tests/fuzz/corpus
seeds=$build/bin/ampc-fuzz-seeds
if [[ ! -x $seeds ]]; then
  echo "make-corpus.sh: $seeds not found; build it first (cmake --build $build --target ampc-fuzz-seeds)" >&2
  exit 1
fi

for t in yaml-model textual-ir checkpoint npy idx csv; do
  mkdir -p "$corpus/$t"
  find "$corpus/$t" -name 'seed-*' -delete
done

# A flat name from a path: tests/lit/bad-input/x.yaml -> seed-bad-input-x.yaml.
add() { # target file prefix
  local name
  name=$(echo "${2#"$3"}" | tr '/' '-')
  cp "$2" "$1/seed-$name"
}
cd "$root"
for f in examples/*.yaml examples/*/*.yaml; do add "$corpus/yaml-model" "$f" ""; done
for f in tests/lit/bad-input/*.yaml tests/lit/cli/*.yaml tests/lit/cli/Inputs/*.yaml; do
  add "$corpus/yaml-model" "$f" "tests/lit/"
done
while IFS= read -r f; do add "$corpus/textual-ir" "$f" "tests/lit/"; done \
  < <(find tests/lit -name '*.ir' | sort)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$seeds" "$tmp"
for t in checkpoint npy idx csv; do
  for f in "$tmp/$t"/*; do cp "$f" "$corpus/$t/seed-$(basename "$f")"; done
done
du -sh --apparent-size "$corpus"
