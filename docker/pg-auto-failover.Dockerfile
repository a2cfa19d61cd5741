# PostgreSQL 15 with pg_auto_failover, for the `ha` profile of docker-compose.yml: the monitor
# and both database nodes run this image, each with its own `pg_autoctl create ...` command.
FROM postgres:15-bookworm

# postgresql-15-auto-failover: the monitor's extension; pg-auto-failover-cli: pg_autoctl, the
# keeper. openssl: `pg_autoctl ... --ssl-self-signed` makes its certificate with the openssl tool.
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        postgresql-15-auto-failover \
        pg-auto-failover-cli \
        openssl \
    && rm -rf /var/lib/apt/lists/*

# Everything a node keeps lives in its volume, mounted at /var/lib/postgresql/data: the
# database, and pg_autoctl's configuration and state (found through the XDG variables), so
# a container made anew resumes the node that the volume holds. pg_autoctl's initdb takes
# its encoding from the locale: under C/POSIX the databases would be SQL_ASCII, whose text
# psycopg hands Sundial as bytes; C.UTF-8 makes them UTF8, as the embedded cluster is.
ENV LANG=C.UTF-8 \
    PGDATA=/var/lib/postgresql/data/pgdata \
    XDG_CONFIG_HOME=/var/lib/postgresql/data/config \
    XDG_DATA_HOME=/var/lib/postgresql/data/share

# pg_autoctl refuses to run as root.
USER postgres
WORKDIR /var/lib/postgresql
ENTRYPOINT ["pg_autoctl"]
CMD ["--help"]
