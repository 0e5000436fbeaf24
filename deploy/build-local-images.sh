#!/usr/bin/env bash
# Builds, from Debian's packages and the host's Go toolchain, the images this
# project would otherwise pull from a registry, for machines that reach no
# container registry. See deploy/README.md.
#
#   eval "$(deploy/build-local-images.sh)"         # progress on stderr, exports on stdout
#   deploy/build-local-images.sh scale          # also the profile scale's images
#
# Arguments: the compose profiles whose images to build besides the core ones
# (PostgreSQL, Go, runtime: all that `make up` needs): scale (HAProxy,
# PgBouncer), ha, backup, or all. The exports name the images built by this
# run or an earlier one; a profile's images are built only when it is named.
#
# Idempotent: an image is rebuilt only when it is missing or its inputs changed
# (label ordersvc.local.inputs). The debootstrap rootfs is cached as a tarball
# in $ORDERSVC_IMAGE_CACHE (default /var/cache/ordersvc-local-images).
# Needs root (debootstrap) and a running Docker engine.
#
# Environment:
#   ORDERSVC_IMAGE_CACHE  cache directory for the rootfs tarball
#   LOCAL_IMAGE_PREFIX    image name prefix [ordersvc-local]
#   DEBIAN_MIRROR         Debian mirror URL; default: read from apt's configuration
#   GOROOT_HOST           Go toolchain copied into the Go image [$(go env GOROOT)]
#   REBUILD=1             drop the cached rootfs and rebuild every image
#
# Every step that takes longer than 20 s says so when it starts, with an
# estimate (its last duration on this machine, kept in the cache directory,
# else a typical figure), and reports progress every 20 s while it runs.
set -Eeuo pipefail
shopt -s nullglob

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
suite=bookworm
cache=${ORDERSVC_IMAGE_CACHE:-/var/cache/ordersvc-local-images}
prefix=${LOCAL_IMAGE_PREFIX:-ordersvc-local}
goroot=${GOROOT_HOST:-$(go env GOROOT 2>/dev/null || echo /usr/local/go)}
go_version=$(sed -n '1s/^go//p' "$goroot/VERSION")
rootfs_tar=$cache/rootfs-$suite-minbase.tar

base_image=$prefix/debian:$suite
postgres_image=$prefix/postgres:15
go_image=$prefix/golang:$go_version-$suite
runtime_image=$prefix/static:nonroot
haproxy_image=$prefix/haproxy:2.6
pgbouncer_image=$prefix/pgbouncer:1.18

# Progress goes to fd 3, a copy of stderr, so that it still shows while a
# step's own output is redirected to its log file.
exec 3>&2
log() { printf 'build-local-images: %s\n' "$*" >&3; }

# Profiles asked for: the core images are always built.
want_scale=0 want_ha=0 want_backup=0
for profile in "$@"; do
	case $profile in
	core | default) ;;
	scale) want_scale=1 ;;
	ha) want_ha=1 ;;
	backup) want_backup=1 ;;
	all) want_scale=1 want_ha=1 want_backup=1 ;;
	*) log "error: unknown profile '$profile' (core, scale, ha, backup or all)"; exit 2 ;;
	esac
done
die() { log "error: $*"; exit 1; }
inputs_hash() { sha256sum | cut -c1-16; }
# up_to_date IMAGE HASH: the image exists and was built from the same inputs.
up_to_date() {
	[ "$(docker image inspect -f '{{index .Config.Labels "ordersvc.local.inputs"}}' "$1" 2>/dev/null)" = "$2" ]
}
image_id() { docker image inspect -f '{{.Id}}' "$1" 2>/dev/null || true; }
# timed NAME TYPICAL_SECONDS COMMAND...: runs COMMAND, announcing it with an
# estimate (the last duration recorded for NAME, else TYPICAL_SECONDS) and a
# progress line every 20 s; records the duration for the next estimate.
timed() {
	local name=$1 typical=$2 estimate
	shift 2
	estimate=$(cat "$cache/duration-$name" 2>/dev/null || echo "$typical")
	log "$name: about ${estimate}s$([ -s "$cache/duration-$name" ] && echo ' (its last run here)' || echo ' (typical)')"
	local t0=$SECONDS
	( while sleep 20; do log "$name: $((SECONDS - t0))s of about ${estimate}s"; done ) &
	local ticker=$! status=0
	"$@" || status=$?
	kill "$ticker" 2>/dev/null || true
	wait "$ticker" 2>/dev/null || true
	if [ "$status" = 0 ]; then
		echo $((SECONDS - t0)) >"$cache/duration-$name"
		log "$name: done in $((SECONDS - t0))s"
	fi
	return "$status"
}
stale=() # images replaced by this run, removed at the end

[ "$(id -u)" = 0 ] || die "run as root (debootstrap needs it)"
docker info >/dev/null 2>&1 || die "no Docker engine answers"
[ -n "$go_version" ] || die "no Go toolchain at $goroot"
mkdir -p "$cache"

if [ "${REBUILD:-0}" = 1 ]; then
	log "REBUILD=1: removing cached rootfs and local images"
	rm -f "$rootfs_tar"
	docker image rm -f "$prefix/postgres-pgbackrest:15" "$prefix/patroni:3.0" "$prefix/etcd:3.4" "$haproxy_image" "$pgbouncer_image" "$runtime_image" "$go_image" "$postgres_image" "$base_image" >/dev/null 2>&1 || true
fi

# Debian sources as apt on this host has them: "URI SUITE" lines, Packages indexes only.
apt_sources() {
	# shellcheck disable=SC2016 # $(...) are apt's format fields
	apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 'Identifier: Packages' 2>/dev/null | sort -u
}

# 1. Base image: a debootstrap minbase rootfs (cached), imported as one layer.
base_hash=$(printf '%s minbase ca-certificates,tzdata v1' "$suite" | inputs_hash)
if ! up_to_date "$base_image" "$base_hash"; then
	if [ ! -s "$rootfs_tar" ]; then
		mirror=${DEBIAN_MIRROR:-$(apt_sources | awk -v s="$suite" '$2 == s { print $1; exit }')}
		security=$(apt_sources | awk -v s="$suite-security" '$2 == s { print $1; exit }')
		updates=$(apt_sources | awk -v s="$suite-updates" '$2 == s { print $1; exit }')
		[ -n "$mirror" ] || die "no '$suite' source in apt's configuration; set DEBIAN_MIRROR"
		if ! command -v debootstrap >/dev/null; then
			log "installing debootstrap"
			apt-get update -qq >&2
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >&2
		fi
		work=$(mktemp -d "$cache/rootfs.XXXXXX")
		trap 'rm -rf "$work"' EXIT
		log "debootstrap --variant=minbase $suite from $mirror"
		timed debootstrap 90 debootstrap --variant=minbase --include=ca-certificates,tzdata "$suite" "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 ||
			{ tail -n 30 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
		{
			echo "deb $mirror $suite main"
			[ -z "$updates" ] || echo "deb $updates $suite-updates main"
			[ -z "$security" ] || echo "deb $security $suite-security main"
		} >"$work/rootfs/etc/apt/sources.list"
		rm -rf "$work"/rootfs/var/cache/apt/archives/*.deb "$work"/rootfs/var/cache/apt/*.bin "$work"/rootfs/var/lib/apt/lists/*
		tar -C "$work/rootfs" --numeric-owner --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' \
			-cf "$rootfs_tar.tmp" .
		mv "$rootfs_tar.tmp" "$rootfs_tar"
		rm -rf "$work"
		trap - EXIT
	fi
	log "importing $base_image from $rootfs_tar"
	stale+=("$(image_id "$base_image")")
	docker import -c 'ENV LANG=C.UTF-8' -c 'CMD ["bash"]' \
		-c "LABEL ordersvc.local.inputs=$base_hash" "$rootfs_tar" "$base_image" >/dev/null
fi
base_id=$(image_id "$base_image")

# build IMAGE HASH TYPICAL_SECONDS [docker build args...]: build with the
# inputs label, base image as BASE_IMAGE.
build() {
	local image=$1 hash=$2 typical=$3
	shift 3
	local name=${image//[\/:]/_}
	local out=$cache/build-$name.log
	log "building $image (log: $out)"
	stale=("$(image_id "$image")" "${stale[@]}")
	timed "build-${name#"${prefix//[\/:]/_}_"}" "$typical" docker build --network host --build-arg "BASE_IMAGE=$base_image" \
		--label "ordersvc.local.inputs=$hash" -t "$image" "$@" >"$out" 2>&1 ||
		{ tail -n 40 "$out" >&2; die "building $image failed"; }
}

# in_background IMAGE COMMAND...: runs a build while the next ones run (the
# images share only the base); finish_background waits for them all.
background=()
in_background() {
	stale=("$(image_id "$1")" "${stale[@]}")
	shift
	"$@" &
	background+=("$!")
}
finish_background() {
	local pid failed=0
	for pid in "${background[@]}"; do wait "$pid" || failed=1; done
	background=()
	[ "$failed" = 0 ] || die "a build failed (its log is named above)"
}

# 2. PostgreSQL from Debian's postgresql-15 (apt runs inside the build, on
#    the host's network), in the background: the longest of the core builds.
pg_dir=$here/local-images/postgres
pg_hash=$(printf '%s' "$base_id" | cat - "$pg_dir/Dockerfile" "$pg_dir/docker-entrypoint.sh" | inputs_hash)
up_to_date "$postgres_image" "$pg_hash" || in_background "$postgres_image" build "$postgres_image" "$pg_hash" 90 "$pg_dir"

# 3. Go build image: base + the host's GOROOT + the host's locally added CA certificates.
go_dir=$here/local-images/golang
ca_dir=$(mktemp -d)
trap 'rm -rf "$ca_dir"' EXIT
for crt in /usr/local/share/ca-certificates/*.crt; do cp "$crt" "$ca_dir"/; done
go_hash=$(printf '%s %s' "$base_id" "$go_version" | cat - "$go_dir/Dockerfile" "$ca_dir"/* | inputs_hash)
if ! up_to_date "$go_image" "$go_hash"; then
	# Context streamed as a tar so GOROOT need not be copied first; without
	# what no build reads (the toolchain's own tests and test data, API
	# lists, docs): a fifth less to send and to commit as a layer.
	gr=$(basename "$goroot")
	tar -c -C "$go_dir" Dockerfile \
		-C "$(dirname "$ca_dir")" --transform "s|^$(basename "$ca_dir")|local-ca|" "$(basename "$ca_dir")" \
		--exclude="$gr/test" --exclude="$gr/api" --exclude="$gr/doc" --exclude="$gr/misc" --exclude="$gr/src/*/testdata" \
		-C "$(dirname "$goroot")" --transform "s|^$gr|go|" "$gr" |
		build "$go_image" "$go_hash" 40 -
fi

# 4. Runtime image standing in for distroless static:nonroot.
st_dir=$here/local-images/static
st_hash=$(printf '%s' "$base_id" | cat - "$st_dir"/* | inputs_hash)
up_to_date "$runtime_image" "$st_hash" || build "$runtime_image" "$st_hash" 15 "$st_dir"
finish_background

exports=(
	"POSTGRES_IMAGE=$postgres_image"
	"TEST_POSTGRES_IMAGE=$postgres_image"
	"GO_IMAGE=$go_image"
	"RUNTIME_IMAGE=$runtime_image"
)
ready=("$base_image" "$postgres_image" "$go_image" "$runtime_image")

# ---- Profile images: built only when their profile is asked for (or built
# by an earlier run: their names are exported then too). A profile's block
# builds its images, and adds their names to ready and exports.

# 5. Profile `scale` (docker-compose.yml, deploy/scale/): HAProxy and
#    PgBouncer from Debian's packages. The profile `ha` needs HAProxy too.
for name in haproxy pgbouncer; do
	dir=$here/local-images/$name
	image_var=${name}_image
	hash=$(printf '%s' "$base_id" | cat - "$dir/Dockerfile" | inputs_hash)
	want=$want_scale
	[ "$name" != haproxy ] || [ "$want_ha" = 0 ] || want=1
	if [ "$want" = 1 ] && ! up_to_date "${!image_var}" "$hash"; then
		in_background "${!image_var}" build "${!image_var}" "$hash" 60 "$dir"
	fi
done
finish_background
for name in haproxy pgbouncer; do
	image_var=${name}_image
	if [ -n "$(image_id "${!image_var}")" ]; then
		ready+=("${!image_var}")
		exports+=("${name^^}_IMAGE=${!image_var}")
	fi
done

# 6. Profile `ha` (docker-compose.yml, deploy/ha/, docs/ha.md): Patroni 3.0
#    with PostgreSQL 15, and etcd 3.4, from Debian's packages. HAProxy is
#    the image of step 5 (built there for `ha` too). Names overridable: PATRONI_IMAGE, ETCD_IMAGE.
patroni_image=${PATRONI_IMAGE:-$prefix/patroni:3.0}
etcd_image=${ETCD_IMAGE:-$prefix/etcd:3.4}
for name in patroni etcd; do
	dir=$here/local-images/$name
	image_var=${name}_image
	hash=$(printf '%s' "$base_id" | cat - "$dir/Dockerfile" | inputs_hash)
	if [ "$want_ha" = 1 ] && ! up_to_date "${!image_var}" "$hash"; then
		in_background "${!image_var}" build "${!image_var}" "$hash" 120 "$dir"
	fi
done
finish_background
for name in patroni etcd; do
	image_var=${name}_image
	if [ -n "$(image_id "${!image_var}")" ]; then
		ready+=("${!image_var}")
		exports+=("${name^^}_IMAGE=${!image_var}")
	fi
done
ha_images="$(image_id "$patroni_image") $(image_id "$etcd_image")"

# 7. Profile `backup` (deploy/backup/, docs/backup.md, ADR 0018): PostgreSQL
# with Debian's pgbackrest (2.45), built FROM the PostgreSQL image above: the
# archiver and the restore cluster run the same server binaries as the data
# directory they handle. PGBACKREST_IMAGE names it.
pgbackrest_image=$prefix/postgres-pgbackrest:15
pgbr_dir=$here/local-images/pgbackrest
pgbr_hash=$(printf '%s' "$(image_id "$postgres_image")" | cat - "$pgbr_dir/Dockerfile" | inputs_hash)
if [ "$want_backup" = 1 ] && ! up_to_date "$pgbackrest_image" "$pgbr_hash"; then
	build "$pgbackrest_image" "$pgbr_hash" 60 --build-arg "POSTGRES_IMAGE=$postgres_image" "$pgbr_dir"
fi
if [ -n "$(image_id "$pgbackrest_image")" ]; then
	ready+=("$pgbackrest_image")
	exports+=("PGBACKREST_IMAGE=$pgbackrest_image")
fi
# ---- end of profile `backup` ----------------------------------------------


# Leftovers: replaced images (derived ones first), and intermediate stages
# built FROM the base image, which carry its label.
current=" ${ha_images:-} $(image_id "$pgbackrest_image") $(image_id "$haproxy_image") $(image_id "$pgbouncer_image") $(image_id "$runtime_image") $(image_id "$go_image") $(image_id "$postgres_image") $base_id "
for id in "${stale[@]}"; do
	[ -z "$id" ] || [[ $current == *" $id "* ]] || docker image rm "$id" >/dev/null 2>&1 || true
done
docker image prune -f --filter "label=ordersvc.local.inputs=$base_hash" >/dev/null

log "ready: ${ready[*]}"
[ "$want_scale" = 1 ] || [ -n "$(image_id "$haproxy_image")" ] ||
	log "the profile scale's images were not built: deploy/build-local-images.sh scale (make images PROFILE=scale)"
# Ryuk's image cannot be pulled either. With a local engine, the host override
# keeps testcontainers on loopback: where /.dockerenv exists it would otherwise
# take the default gateway for the Docker host.
printf 'export %s\n' "${exports[@]}" TESTCONTAINERS_RYUK_DISABLED=true
case ${DOCKER_HOST:-unix://} in unix://*) echo 'export TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1' ;; esac
