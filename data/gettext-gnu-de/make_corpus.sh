#!/usr/bin/env bash
# Rebuild this folder from the German catalogs of nine GNU packages installed on a Debian machine.
# Usage: bash data/gettext-gnu-de/make_corpus.sh   (needs bertlab installed and the packages' .mo files)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
locales="$(mktemp -d)"
trap 'rm -rf "$locales"' EXIT
mkdir -p "$locales/de/LC_MESSAGES"
for catalog in bash coreutils diffutils findutils grep make sed tar wget; do
  ln -s "/usr/share/locale/de/LC_MESSAGES/$catalog.mo" "$locales/de/LC_MESSAGES/"
done
bertlab data gettext --lang de --locale-dir "$locales" --heldout 0.08 -o "$here"
