"""docker-compose.yml cannot run on our machines (no Docker engine), so check that it agrees
with the server: every SUNDIAL_* variable is a real setting, ports match, and the URL points
at the compose database with the psycopg driver.

`docker compose up` starts the services in no profile (postgres, sundial). The `ha` profile
adds a pg_auto_failover formation (monitor, node1, node2, on the image of
docker/pg-auto-failover.Dockerfile) and a server on it (sundial-ha); its tests check that the
pieces name each other rightly, since nothing else would until someone runs it."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml
from sqlalchemy.engine import make_url

from app.config import Settings

ROOT = Path(__file__).resolve().parents[1]


def load() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def default_services(compose: dict) -> dict[str, dict]:
    """The services plain `docker compose up` starts: those in no profile."""
    return {name: s for name, s in compose["services"].items() if not s.get("profiles")}


def test_services_and_settings_agree() -> None:
    compose = load()
    assert set(default_services(compose)) == {"postgres", "sundial"}
    env = compose["services"]["sundial"]["environment"]
    known = {f"SUNDIAL_{name.upper()}" for name in Settings.model_fields}
    assert set(env) <= known, set(env) - known
    settings = Settings(
        database_url=env["SUNDIAL_DATABASE_URL"],
        host=env["SUNDIAL_HOST"],
        port=int(env["SUNDIAL_PORT"]),
        workers=int(env["SUNDIAL_WORKERS"]),
    )
    assert settings.host == "0.0.0.0"


def test_port_mapping_matches_server_port() -> None:
    sundial = load()["services"]["sundial"]
    port = sundial["environment"]["SUNDIAL_PORT"]
    assert f"{port}:{port}" in sundial["ports"]
    assert f":{port}/readyz" in " ".join(sundial["healthcheck"]["test"])


def test_database_url_reaches_the_compose_postgres() -> None:
    compose = load()
    pg_env = compose["services"]["postgres"]["environment"]
    url = make_url(compose["services"]["sundial"]["environment"]["SUNDIAL_DATABASE_URL"])
    assert url.drivername == "postgresql+psycopg"
    assert (url.host, url.port) == ("postgres", 5432)
    assert (url.username, url.password, url.database) == (
        pg_env["POSTGRES_USER"],
        pg_env["POSTGRES_PASSWORD"],
        pg_env["POSTGRES_DB"],
    )
    assert compose["services"]["sundial"]["depends_on"]["postgres"]["condition"] == (
        "service_healthy"
    )


def test_dockerfile_copies_what_the_server_needs() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    for path in ("app", "alembic", "migrations", "pyproject.toml"):
        assert f"COPY {path}" in dockerfile or f" {path} " in dockerfile, path


# --- profile ha ----------------------------------------------------------------------------

HA_SERVICES = {"monitor", "node1", "node2", "sundial-ha"}
NODES = ("node1", "node2")
FORMATION = ("monitor", *NODES)
DATA_VOLUME = "/var/lib/postgresql/data"
PG_AUTO_FAILOVER_DOCKERFILE = ROOT / "docker" / "pg-auto-failover.Dockerfile"
TUNED_MONITOR = {
    "pgautofailover.health_check_period": "1000",
    "pgautofailover.health_check_timeout": "1000",
    "pgautofailover.health_check_max_retries": "1",
    "pgautofailover.health_check_retry_delay": "500",
    "pgautofailover.node_considered_unhealthy_timeout": "3000",
    "pgautofailover.primary_demote_timeout": "4000",
}
TUNED_KEEPER = {"timeout.network_partition_timeout": "3"}


def ha(compose: dict) -> dict[str, dict]:
    return {name: s for name, s in compose["services"].items() if "ha" in s.get("profiles", ())}


def interpolated(value: str) -> str:
    """``value`` as compose passes it on with no variable set: ``${NAME:-default}`` is the
    default and ``$$`` a ``$``; a variable without a default would be empty, so none may
    appear."""
    value = re.sub(r"\$\{\w+:?-([^}]*)\}", r"\1", value.replace("$$", "\0"))
    assert "$" not in value, f"a variable without a default in {value!r}"
    return value.replace("\0", "$")


def command(service: dict) -> list[str]:
    """The service's command as the argument list compose runs."""
    given = service["command"]
    return shlex.split(given) if isinstance(given, str) else [str(arg) for arg in given]


def option(argv: list[str], name: str) -> str | None:
    """The value given to ``name`` in ``argv`` (``--name value``), if any."""
    return argv[argv.index(name) + 1] if name in argv else None


def postgresql_conf(text: str) -> dict[str, str]:
    """The ``name = value`` lines of a postgresql.conf, as a dict."""
    pairs = (line.split("=", 1) for line in text.splitlines() if line.strip())
    return {name.strip(): value.strip() for name, value in pairs}


def keeper_settings(text: str) -> dict[str, str]:
    """The words ``section.option=value`` the entrypoint gives `pg_autoctl config set`."""
    return dict(word.split("=", 1) for word in text.split())


def dockerfile(path: Path) -> list[tuple[str, str]]:
    """The instructions of a Dockerfile as (KEYWORD, arguments), continuation lines joined."""
    text = re.sub(r"\\\n", " ", path.read_text())
    lines = (line.strip() for line in text.splitlines())
    return [
        (keyword.upper(), args.strip())
        for keyword, _, args in (line.partition(" ") for line in lines)
        if keyword and not keyword.startswith("#")
    ]


def dockerfile_env(instructions: list[tuple[str, str]]) -> dict[str, str]:
    return dict(
        pair.split("=", 1)
        for keyword, args in instructions
        if keyword == "ENV"
        for pair in shlex.split(args)
    )


def pgport(service: dict) -> int:
    return int(option(command(service), "--pgport") or 5432)


def test_ha_services_are_only_in_the_ha_profile() -> None:
    compose = load()
    assert set(ha(compose)) == HA_SERVICES
    for name in HA_SERVICES:
        assert compose["services"][name]["profiles"] == ["ha"], name
    everything = set(compose["services"])
    for name, service in compose["services"].items():
        needs = set(service.get("depends_on", ()))
        assert needs <= everything, (name, needs - everything)
        if name in default_services(compose):
            assert not needs & HA_SERVICES, f"plain `docker compose up` would need {name}'s {needs}"
    header = (ROOT / "docker-compose.yml").read_text().split("\nservices:", 1)[0]
    assert "docker compose --profile ha up --build" in header


def test_ha_server_settings_are_real_settings() -> None:
    compose = load()
    server = compose["services"]["sundial-ha"]
    env = server["environment"]
    known = {f"SUNDIAL_{name.upper()}" for name in Settings.model_fields}
    assert set(env) <= known, set(env) - known
    # Every variable, as the server reads it (the URL and admin token are checked too).
    settings = Settings.model_validate(
        {key.removeprefix("SUNDIAL_").lower(): interpolated(str(v)) for key, v in env.items()}
    )
    assert settings.host == "0.0.0.0"
    host_ports = {
        mapping.split(":")[0]
        for s in default_services(compose).values()
        for mapping in s.get("ports", ())
    }
    published = [mapping.split(":") for mapping in server["ports"]]
    assert [inside for _, inside in published] == [str(settings.port)]
    assert not {outside for outside, _ in published} & host_ports, "clashes with the default"
    assert f":{settings.port}/readyz" in " ".join(server["healthcheck"]["test"])
    assert server["build"] == compose["services"]["sundial"]["build"]


def test_ha_database_url_lists_every_node_and_wants_the_primary() -> None:
    compose = load()
    server = compose["services"]["sundial-ha"]
    url = make_url(interpolated(server["environment"]["SUNDIAL_DATABASE_URL"]))
    assert url.drivername == "postgresql+psycopg"
    assert (url.host, url.port) == (None, None)  # only the hosts of the query
    nodes = [compose["services"][name] for name in NODES]
    assert url.query["host"] == tuple(
        f"{name}:{pgport(node)}" for name, node in zip(NODES, nodes, strict=True)
    )
    assert url.query["target_session_attrs"] == "read-write"
    for name, node in zip(NODES, nodes, strict=True):
        argv = command(node)
        assert option(argv, "--dbname") == url.database, name
        assert (option(argv, "--username") or "postgres") == url.username, name
        assert option(argv, "--auth") == "trust", f"{name}: the URL carries no password"
        # The node lets the compose network reach --dbname as --username (the server's
        # container would be refused otherwise), over TLS when the node has TLS.
        assert "--pg-hba-lan" in argv, name
        if "--ssl-self-signed" in argv:
            assert url.query["sslmode"] == "require", name
        assert server["depends_on"][name]["condition"] == "service_healthy"


def test_nodes_register_with_the_monitor_service() -> None:
    compose = load()
    monitor = compose["services"]["monitor"]
    monitor_argv = command(monitor)
    assert monitor_argv[:3] == ["pg_autoctl", "create", "monitor"]
    assert option(monitor_argv, "--hostname") == "monitor"
    for name in NODES:
        node = compose["services"][name]
        argv = command(node)
        assert argv[:3] == ["pg_autoctl", "create", "postgres"], name
        assert option(argv, "--hostname") == name, "the other services reach it by its name"
        assert option(argv, "--name") == name
        monitor_url = make_url(option(argv, "--monitor") or "")
        assert monitor_url.drivername in {"postgres", "postgresql"}
        assert (monitor_url.host, monitor_url.port) == ("monitor", pgport(monitor)), name
        assert (monitor_url.username, monitor_url.database) == (
            "autoctl_node",
            "pg_auto_failover",
        )
        if "--ssl-self-signed" in monitor_argv:
            assert monitor_url.query["sslmode"] == "require", name
        assert node["depends_on"]["monitor"]["condition"] == "service_healthy"


def test_every_formation_member_keeps_its_own_volume() -> None:
    compose = load()
    sources = []
    for name in FORMATION:
        mounts = [m.split(":") for m in compose["services"][name]["volumes"]]
        assert [target for _, target in mounts] == [DATA_VOLUME], name
        sources += [source for source, _ in mounts]
    assert len(set(sources)) == len(FORMATION), sources
    assert set(sources) <= set(compose["volumes"])
    # The database and pg_autoctl's own configuration and state all live in that volume.
    env = dockerfile_env(dockerfile(PG_AUTO_FAILOVER_DOCKERFILE))
    for variable in ("PGDATA", "XDG_CONFIG_HOME", "XDG_DATA_HOME"):
        assert env[variable].startswith(f"{DATA_VOLUME}/"), variable


def test_monitor_and_keepers_are_tuned() -> None:
    compose = load()
    monitor_env = compose["services"]["monitor"]["environment"]
    assert postgresql_conf(monitor_env["PGAF_POSTGRESQL_CONF"]) == TUNED_MONITOR
    for name in NODES:
        env = compose["services"][name]["environment"]
        assert keeper_settings(env["PGAF_KEEPER_SETTINGS"]) == TUNED_KEEPER, name
        assert "PGAF_POSTGRESQL_CONF" not in env, name
    for name in FORMATION:
        # The entrypoint is what turns those variables into settings.
        script = " ".join(compose["services"][name]["entrypoint"])
        for variable in ("PGAF_POSTGRESQL_CONF", "PGAF_KEEPER_SETTINGS"):
            assert f"$${variable}" in script, (name, variable)
        assert "exec pg_autoctl run" in script


def test_formation_scripts_escape_their_dollars_from_compose() -> None:
    """Compose replaces ``$NAME`` in the file by the variable of the machine running it:
    a shell variable of a command must be written ``$$NAME``."""
    compose = load()
    for name in FORMATION:
        service = compose["services"][name]
        for text in [*service["entrypoint"], *command(service)]:
            assert "$" not in text.replace("$$", ""), (name, text)


def test_formation_runs_the_pg_auto_failover_image() -> None:
    compose = load()
    builds = {name: compose["services"][name]["build"] for name in FORMATION}
    for name, build in builds.items():
        path = (ROOT / build["context"] / build["dockerfile"]).resolve()
        assert path == PG_AUTO_FAILOVER_DOCKERFILE, name
    assert len({compose["services"][name]["image"] for name in FORMATION}) == 1
    instructions = dockerfile(PG_AUTO_FAILOVER_DOCKERFILE)
    assert instructions[0] == ("FROM", "postgres:15-bookworm")
    installs = " ".join(args for keyword, args in instructions if keyword == "RUN").split()
    assert "install" in installs
    wanted = {"postgresql-15-auto-failover", "pg-auto-failover-cli"}
    if any("--ssl-self-signed" in command(compose["services"][n]) for n in FORMATION):
        wanted.add("openssl")  # pg_autoctl makes self-signed certificates with it
    assert wanted <= set(installs), wanted - set(installs)
    users = [args for keyword, args in instructions if keyword == "USER"]
    assert users[-1:] == ["postgres"], "pg_autoctl refuses to run as root"
    # pg_autoctl's initdb takes the encoding from the locale: SQL_ASCII under C would reach
    # Sundial as bytes.
    assert dockerfile_env(instructions)["LANG"].upper().endswith(("UTF-8", "UTF8"))
