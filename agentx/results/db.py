"""Open a results database and bring its schema up to date.

`--db URL` takes any SQLAlchemy URL (`sqlite:///path.db`, `postgresql://user@host/db`); a plain
path means a SQLite file. The default is `results.db` in the user's data directory. Migrations are
numbered and applied automatically, each in its own transaction, recorded in `agentx_schema`.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, event, inspect, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import ArgumentError, DBAPIError

from agentx.errors import AgentxError
from agentx.results import schema

SCHEMA_VERSION = 3

_versions = Table("agentx_schema", MetaData(), Column("version", Integer, primary_key=True),
                  Column("applied_at", String(40), nullable=False))


def _v1(conn: Connection) -> None:
    """A new database: every table of `schema.py` as it is now (later migrations then find their
    change made)."""
    schema.metadata.create_all(conn)


def _v2(conn: Connection) -> None:
    """deployments.engine_settings, a deployment label (SPEC §8)."""
    if "engine_settings" not in {c["name"] for c in inspect(conn).get_columns("deployments")}:
        conn.exec_driver_sql("ALTER TABLE deployments ADD COLUMN engine_settings VARCHAR(300)")


def _v3(conn: Connection) -> None:
    """points: the measured power columns and power_valid (SPEC §8)."""
    have = {c["name"] for c in inspect(conn).get_columns("points")}
    for name in schema.POWER_COLUMNS:
        if name not in have:
            conn.exec_driver_sql(f"ALTER TABLE points ADD COLUMN {name} FLOAT")
    if "power_valid" not in have:
        conn.exec_driver_sql("ALTER TABLE points ADD COLUMN power_valid BOOLEAN")


# version -> migration; a later schema change appends one (e.g. an ALTER TABLE) and bumps SCHEMA_VERSION
MIGRATIONS: dict[int, Callable[[Connection], None]] = {1: _v1, 2: _v2, 3: _v3}


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def default_path() -> Path:
    from platformdirs import user_data_dir

    return Path(user_data_dir("agentx", appauthor=False)) / "results.db"


def resolve_url(url: str | None, say: Callable[[str], None] = lambda _: None) -> str:
    """The SQLAlchemy URL for `--db` (None: the default SQLite file, announced when it is new)."""
    if url is None:
        path = default_path()
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            say(f"results database: creating {path} (the default; --db URL chooses another)")
        return f"sqlite:///{path}"
    if "://" not in url:
        return f"sqlite:///{Path(url).expanduser().resolve()}"
    if url.startswith("postgresql://"):
        return "postgresql+psycopg://" + url[len("postgresql://"):]
    return url


def connect(url: str | None = None, say: Callable[[str], None] = lambda _: None,
            pool_size: int | None = None) -> Engine:
    """An engine on the database at `url`, its schema migrated to SCHEMA_VERSION. `pool_size`: at
    most this many connections (a server's worker threads), none beyond it."""
    pool = {"pool_size": pool_size, "max_overflow": 0, "pool_timeout": 60} if pool_size else {}
    try:
        engine = create_engine(resolve_url(url, say), **pool)
    except (ArgumentError, ImportError) as e:
        raise AgentxError(f"--db: cannot use {url!r}: {e}") from None
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    try:
        migrate(engine)
    except DBAPIError as e:  # not a database, refused, no such database, no permission
        reason = "; ".join(line.strip() for line in str(e.orig).splitlines() if line.strip())
        raise AgentxError(f"--db {engine.url.render_as_string(hide_password=True)}: {reason}") from None
    return engine


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def migrate(engine: Engine) -> int:
    """Apply the migrations this database lacks; return its version."""
    with engine.begin() as conn:
        _versions.create(conn, checkfirst=True)
    with engine.begin() as conn:
        current = conn.execute(select(_versions.c.version).order_by(_versions.c.version.desc())).scalar() or 0
    if current > SCHEMA_VERSION:
        raise AgentxError(f"the results database is at schema version {current}, newer than this agentx "
                          f"({SCHEMA_VERSION}): upgrade agentx")
    for version in range(current + 1, SCHEMA_VERSION + 1):
        with engine.begin() as conn:
            MIGRATIONS[version](conn)
            conn.execute(_versions.insert().values(version=version, applied_at=now()))
    return SCHEMA_VERSION


def tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names())
