#!/usr/bin/env bash
# Renames a copy of this service: its Go module path and its service name.
#
#   tools/rename.sh MODULE [NAME]       e.g. tools/rename.sh example.com/shop
#   make rename MODULE=example.com/shop [NAME=shop]
#
# MODULE replaces the module path github.com/ordersvc/ordersvc in every
# go.mod, import and document. NAME (default: the last element of MODULE,
# lower-cased, without characters other than a-z and 0-9) then replaces every
# remaining "ordersvc" (and "ORDERSVC", "Ordersvc"): metric prefixes, alert names, problem type URIs,
# advisory lock names, container labels, image names, database name prefixes
# of the tests, the README's title. See docs/template.md for what each one is.
# LICENSE keeps its copyright notice: add your own line, keep the original.
#
# Runs in the directory that holds go.mod; edits files in place (git shows the
# change). Text files only; the tracked files when this is a git work tree,
# otherwise every file below the directory. Idempotent: a second run finds
# nothing to change.
set -Eeuo pipefail

old_module=github.com/ordersvc/ordersvc
old_name=ordersvc

die() { printf 'rename: %s\n' "$*" >&2; exit 2; }

[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: tools/rename.sh MODULE [NAME]   (e.g. example.com/shop)"
module=$1
[[ $module =~ ^[a-z0-9][a-zA-Z0-9._~/-]*[a-zA-Z0-9]$ && $module != */ && $module != *//* ]] ||
	die "MODULE \"$module\" is not a Go module path such as example.com/shop"
name=${2:-$(basename "$module" | tr 'A-Z' 'a-z' | tr -cd 'a-z0-9')}
# The name becomes part of Prometheus metric names, a URN and SQL string
# literals: lower-case letters and digits, starting with a letter.
[[ $name =~ ^[a-z][a-z0-9]*$ ]] || die "NAME \"$name\" must be lower-case letters and digits, starting with a letter (give it as the second argument)"
upper=$(tr 'a-z' 'A-Z' <<<"$name")
title=${name^} # alert names: OrdersvcOutboxLagging -> ShopOutboxLagging

[ -f go.mod ] || die "run it in the directory that holds go.mod"
if grep -q "^module $module\$" go.mod; then
	printf 'rename: the module is already %s; nothing to do\n' "$module" >&2
	exit 0
fi
grep -q "^module $old_module\$" go.mod || die "go.mod's module is not $old_module: renamed already? (rename a fresh copy)"

# The files to edit: text files that mention the old module or name.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	list() { git ls-files -z --cached --others --exclude-standard; }
else
	list() { find . -path ./.git -prune -o -type f -print0; }
fi
files=()
while IFS= read -r -d '' f; do
	[ -f "$f" ] && [ ! -L "$f" ] || continue
	# The licence keeps the original copyright notice (MIT asks for it).
	case ${f#./} in tools/rename.sh | LICENSE) continue ;; esac
	grep -Iq -i "$old_name" "$f" 2>/dev/null && files+=("$f")
done < <(list)

# Module path first (it contains the name twice), then the name itself.
for f in "${files[@]}"; do
	sed -i \
		-e "s|$old_module|$module|g" \
		-e "s|$old_name|$name|g" \
		-e "s|ORDERSVC|$upper|g" \
		-e "s|Ordersvc|$title|g" \
		"$f"
done
printf 'rename: module %s -> %s, name %s -> %s, %d files changed\n' "$old_module" "$module" "$old_name" "$name" "${#files[@]}" >&2
left=$(list | xargs -0 grep -Il -i "$old_name" 2>/dev/null | grep -Ev '(^|/)(tools/rename.sh|LICENSE)$' || true)
[ -z "$left" ] || { printf 'rename: still mentions %s (mixed case?):\n%s\n' "$old_name" "$left" >&2; exit 1; }

# On a machine with no registry, the original's local images (make images)
# serve the copy as they are; their names are in the original's .env.
if [ ! -f .env ] && docker image inspect "$old_name-local/postgres:15" >/dev/null 2>&1; then
	printf 'rename: this machine has the original'"'"'s local images (%s-local/…): copy the original'"'"'s .env here (cp <the original>/.env .) to use them; make images would build them again as %s-local/…\n' "$old_name" "$name" >&2
fi
