#!/usr/bin/env bash
# A consumer's type-check against a packed tarball: a fresh folder with the
# tarball, @types/node and the project's TypeScript installed, a stock
# `tsc --init` tsconfig, and .ci/consumer-gateway.ts (imports from
# "proclease" and "proclease/openclaw"). Then the same file with no tsconfig
# and exactly the two options docs/install.md names for that case, and
# TypeScript 5.9 (the API the project's scripts use) the same way, where its
# defaults without those options fail as docs/install.md says.
#
# Usage: .ci/consumer-check.sh path/to/proclease-X.Y.Z.tgz
set -euo pipefail
tarball=$(realpath "${1:?usage: $0 <tarball>}")
root=$(cd "$(dirname "$0")/.." && pwd)
# the versions the project itself builds and type-checks with
ts=$(node -p 'require(process.argv[1]).devDependencies.typescript' "$root/package.json")
types=$(node -p 'require(process.argv[1]).devDependencies["@types/node"]' "$root/package.json")
ts5=$(node -p 'require(process.argv[1]).devDependencies["typescript-api"]' "$root/package.json")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
npm init -y >/dev/null
# proclease is ESM only: a gateway file that imports it is an ES module
npm pkg set type=module
# nothing here runs the package: its install script (a prebuild pick) is not needed to type-check
npm install --ignore-scripts --no-audit --no-fund --silent "$tarball" "typescript@$ts" "@types/node@$types" "typescript5@$ts5"
npx --no-install tsc --init >/dev/null
cp "$root/.ci/consumer-gateway.ts" gateway.ts
echo "consumer: typescript@$ts, @types/node@$types, a stock tsc --init tsconfig:"
grep -E '^\s*"(module|target|strict|skipLibCheck|types)"' tsconfig.json | sed 's/^\s*/  /'
npx --no-install tsc -p tsconfig.json --noEmit
echo "consumer: tsc -p tsconfig.json --noEmit passed"
npx --no-install tsc --ignoreConfig --strict --target es2022 --module nodenext --noEmit gateway.ts
echo "consumer: tsc --strict --target es2022 --module nodenext gateway.ts (no tsconfig) passed"
tsc5="node node_modules/typescript5/bin/tsc"
echo "consumer: $($tsc5 --version), no tsconfig:"
$tsc5 --strict --target es2022 --module nodenext --noEmit gateway.ts
echo "  tsc --strict --target es2022 --module nodenext gateway.ts passed"
if out=$($tsc5 --strict --noEmit gateway.ts 2>&1); then
  echo "TypeScript 5's defaults passed: docs/install.md says they fail; update it" >&2
  exit 1
fi
for code in "stream-limits.d.ts.*TS18028" "proclease/openclaw.*TS2307|TS2307.*proclease/openclaw"; do
  grep -Eq "$code" <<<"$out" || { echo "TypeScript 5's defaults failed, but not with $code as docs/install.md says:" >&2; echo "$out" >&2; exit 1; }
done
echo "  tsc --strict gateway.ts fails as docs/install.md says (TS18028 in the ACP SDK's declarations, TS2307 at proclease/openclaw)"
