#!/bin/sh
# Backups of the compose profile `backup`, inside the pgBackRest image
# (mounted as /usr/local/bin/ordersvc-backup; docs/backup.md, ADR 0018).
#
#   ordersvc-backup schedule      the `backup` service's loop
#   ordersvc-backup now [TYPE]    one backup now (full, diff or incr; default
#                                 full), then the repository's contents: `make backup`
#
# The schedule is due-based, not clock-based: every BACKUP_CHECK_EVERY it reads
# the repository and takes a full backup when the newest full one is older than
# BACKUP_FULL_EVERY, else a differential one when the newest backup of any kind
# is older than BACKUP_DIFF_EVERY. A stack that was down at the hour a cron
# line names catches up within one check, and a backup that failed is tried
# again at the next one. Durations: a number with s, m, h or d.
#
# Environment: PGBACKREST_STANZA (the stanza, set by the compose file),
# BACKUP_FULL_EVERY [7d], BACKUP_DIFF_EVERY [1d], BACKUP_CHECK_EVERY [10m].
set -eu

log() { printf '%s backup: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*"; }
die() { log "error: $*" >&2; exit 2; }

seconds() {
	n=${1%[smhd]}
	case $n in '' | *[!0-9]*) die "not a duration: '$1' (a number with s, m, h or d)" ;; esac
	case $1 in
	*d) echo $((n * 86400)) ;;
	*h) echo $((n * 3600)) ;;
	*m) echo $((n * 60)) ;;
	*) echo "$n" ;;
	esac
}

# stanza: creates the stanza (idempotent: a no-op when it exists and matches
# the cluster), retrying while PostgreSQL starts.
stanza() {
	tries=0
	until pgbackrest stanza-create; do
		tries=$((tries + 1))
		[ "$tries" -lt 30 ] || return 1
		log "stanza-create failed; trying again in 5s"
		sleep 5
	done
}

# newest TYPE < INFO: the stop time (Unix seconds) of the newest backup of
# TYPE (full, or any) in `pgbackrest --output=json info`, 0 when there is none.
newest() {
	jq -e --arg t "$1" '[.[0].backup[]? | select($t == "any" or .type == $t) | .timestamp.stop] | max // 0'
}

case ${1:-} in
now)
	type=${2:-full}
	case $type in full | diff | incr) ;; *) die "backup type '$type': want full, diff or incr" ;; esac
	stanza
	pgbackrest --type="$type" backup
	pgbackrest info
	;;
schedule)
	full_every=$(seconds "${BACKUP_FULL_EVERY:-7d}")
	diff_every=$(seconds "${BACKUP_DIFF_EVERY:-1d}")
	check_every=$(seconds "${BACKUP_CHECK_EVERY:-10m}")
	# Stopping the service stops the loop at once (sh as PID 1 ignores
	# SIGTERM otherwise); a backup cut short is cleaned up by the next one.
	trap 'log "stopping"; exit 0' TERM INT
	log "full every ${BACKUP_FULL_EVERY:-7d}, differential every ${BACKUP_DIFF_EVERY:-1d}, checked every ${BACKUP_CHECK_EVERY:-10m}"
	stanza || die "stanza-create kept failing"
	# check forces a WAL switch and waits for it in the repository: a broken
	# archive_command shows in the logs now, not at the first restore.
	pgbackrest check || log "error: WAL archiving does not reach the repository (pgbackrest check failed)"
	while :; do
		now=$(date +%s)
		type=
		if ! info=$(pgbackrest --output=json info) ||
			! full=$(printf '%s' "$info" | newest full) || ! any=$(printf '%s' "$info" | newest any); then
			log "error: cannot read the repository (pgbackrest info failed)"
		elif [ $((now - full)) -ge "$full_every" ]; then
			type=full
		elif [ $((now - any)) -ge "$diff_every" ]; then
			type=diff
		fi
		if [ -n "$type" ]; then
			log "starting a $type backup"
			if pgbackrest --type="$type" backup; then
				log "$type backup done"
				pgbackrest info
			else
				log "error: $type backup failed; trying again in ${BACKUP_CHECK_EVERY:-10m}"
			fi
		fi
		sleep "$check_every" &
		wait $! || true
	done
	;;
*)
	die "usage: ordersvc-backup schedule | now [full|diff|incr]"
	;;
esac
