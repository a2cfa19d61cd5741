#!/usr/bin/env bash
# Make sure the PostgreSQL server binaries (initdb, postgres, pg_ctl) are installed.
#
# Search order (same as app/embedded/binaries.py):
#   1. $SUNDIAL_PG_BINDIR, if set
#   2. pg_config --bindir, if that directory contains the server binaries
#   3. the highest /usr/lib/postgresql/<version>/bin
#   4. the directory of initdb on PATH
# If none is found, install Debian/Ubuntu's "postgresql" package with apt-get
# (directly as root, through sudo otherwise). Installing that package may start a
# system cluster on port 5432; Sundial neither needs nor uses it.
#
# With --with-auto-failover, also make sure pg_auto_failover is installed for that PostgreSQL
# (pg_autoctl and the monitor's extension: Debian's pg-auto-failover-cli and
# postgresql-<major>-auto-failover), which `sundial dev-cluster` and the HA tests run.
#
# Prints one line when the binaries are present. Exits 1 if they cannot be installed.
set -euo pipefail

has_server_binaries() {
    local dir="$1"
    [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/postgres" ] && [ -x "$dir/pg_ctl" ]
}

find_bindir() {
    local dir
    if [ -n "${SUNDIAL_PG_BINDIR:-}" ]; then
        if has_server_binaries "$SUNDIAL_PG_BINDIR"; then
            echo "$SUNDIAL_PG_BINDIR"
            return 0
        fi
        echo "SUNDIAL_PG_BINDIR=$SUNDIAL_PG_BINDIR does not contain initdb, postgres and pg_ctl" >&2
        return 1
    fi
    if command -v pg_config >/dev/null 2>&1; then
        dir="$(pg_config --bindir 2>/dev/null || true)"
        if has_server_binaries "$dir"; then
            echo "$dir"
            return 0
        fi
    fi
    if [ -d /usr/lib/postgresql ]; then
        # Version directories sorted numerically, highest first (e.g. 16 before 9.6).
        for dir in $(find /usr/lib/postgresql -mindepth 1 -maxdepth 1 -type d -printf '%f\n' |
            grep -E '^[0-9]+(\.[0-9]+)*$' | sort -t. -k1,1nr -k2,2nr); do
            if has_server_binaries "/usr/lib/postgresql/$dir/bin"; then
                echo "/usr/lib/postgresql/$dir/bin"
                return 0
            fi
        done
    fi
    if command -v initdb >/dev/null 2>&1; then
        local initdb
        initdb="$(command -v initdb)"
        for dir in "$(dirname "$initdb")" "$(dirname "$(readlink -f "$initdb")")"; do
            if has_server_binaries "$dir"; then
                echo "$dir"
                return 0
            fi
        done
    fi
    return 1
}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo "$@"; else
        echo "installing packages needs root; run as root: $*" >&2
        exit 1
    fi
}

ensure_auto_failover() {
    local bindir="$1" major
    major="$("$bindir/postgres" --version | sed -E 's/.* ([0-9]+)(\.[0-9]+)*.*/\1/')"
    if command -v pg_autoctl >/dev/null 2>&1 &&
        [ -f "/usr/share/postgresql/$major/extension/pgautofailover.control" ]; then
        echo "pg_auto_failover: $(command -v pg_autoctl) (PostgreSQL $major)"
        return 0
    fi
    echo "pg_auto_failover not found for PostgreSQL $major; installing it..." >&2
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        pg-auto-failover-cli "postgresql-$major-auto-failover"
}

install_postgres() {
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then
            sudo="sudo"
        else
            echo "PostgreSQL server binaries not found, and installing them needs root." >&2
            echo "Run as root: apt-get update && apt-get install -y postgresql" >&2
            echo "or set SUNDIAL_PG_BINDIR to the directory containing initdb and postgres." >&2
            exit 1
        fi
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "PostgreSQL server binaries not found and apt-get is not available." >&2
        echo "Install the PostgreSQL server with your package manager" >&2
        echo "(e.g. 'brew install postgresql@16' on macOS), or set SUNDIAL_PG_BINDIR." >&2
        exit 1
    fi
    echo "PostgreSQL server binaries not found; installing the 'postgresql' package..." >&2
    $sudo apt-get update
    $sudo env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y --no-install-recommends postgresql
}

main() {
    local bindir
    if bindir="$(find_bindir)"; then
        echo "PostgreSQL server binaries: $bindir"
        if [ "${1:-}" = --with-auto-failover ]; then ensure_auto_failover "$bindir"; fi
        return 0
    fi
    if [ -n "${SUNDIAL_PG_BINDIR:-}" ]; then
        exit 1  # an explicit, wrong setting is not fixed by installing packages
    fi
    install_postgres
    if bindir="$(find_bindir)"; then
        echo "PostgreSQL server binaries: $bindir"
        if [ "${1:-}" = --with-auto-failover ]; then ensure_auto_failover "$bindir"; fi
        return 0
    fi
    echo "PostgreSQL was installed but initdb/postgres/pg_ctl are still not found." >&2
    exit 1
}

main "$@"
