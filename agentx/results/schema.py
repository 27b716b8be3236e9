"""The results database's tables (SQLAlchemy Core). The schema is the API's contract (SPEC §8):
endpoints return these rows; chart data lives in per-point blobs precomputed at import."""

from __future__ import annotations

from sqlalchemy import (Boolean, Column, Float, ForeignKey, Index, Integer, LargeBinary, MetaData, String, Table,
                        Text, UniqueConstraint)

metadata = MetaData()

# The labels that make a deployment's natural key, in this order (SPEC §8).
DEPLOYMENT_LABELS = ("model", "hardware", "gpus", "engine", "engine_version", "precision", "parallelism",
                     "spec_decoding", "kv_offload", "router", "engine_settings")
# Labels added after version 1: they join the key only when set, so earlier deployments keep theirs.
LATER_LABELS = ("engine_settings",)

deployments = Table(
    "deployments", metadata,
    Column("id", Integer, primary_key=True),
    Column("key", String(64), nullable=False, unique=True),  # sha256 of the labels, the natural key
    Column("model", String(200)), Column("hardware", String(100)), Column("gpus", Integer),
    Column("engine", String(100)), Column("engine_version", String(100)), Column("precision", String(50)),
    Column("parallelism", String(100)), Column("spec_decoding", String(100)), Column("kv_offload", String(100)),
    Column("router", String(100)), Column("engine_settings", String(300)),
    Column("created_at", String(40), nullable=False),
)

sweeps = Table(
    "sweeps", metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(200), nullable=False),
    Column("fingerprint", String(64), nullable=False, unique=True),
    Column("recipe", Text, nullable=False),  # the recipe as JSON
    Column("status", String(20), nullable=False),  # running | finished | partial (some points failed)
    Column("out_dir", Text),
    Column("started_at", String(40), nullable=False),
    Column("finished_at", String(40)),
)

datasets = Table(
    "datasets", metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(500), nullable=False),
    Column("variant", String(100), nullable=False, default=""),
    Column("conversations", Integer, nullable=False, default=0),
    Column("summary", Text),  # JSON
    UniqueConstraint("name", "variant"),
)

conversations = Table(
    "conversations", metadata,
    Column("id", Integer, primary_key=True),
    Column("dataset_id", Integer, ForeignKey("datasets.id", ondelete="CASCADE"), nullable=False),
    Column("session", String(300), nullable=False),
    Column("turns", Integer, nullable=False),
    Column("subagent_groups", Integer, nullable=False),
    Column("input_tokens", Integer, nullable=False),
    Column("cached_tokens", Integer, nullable=False),
    Column("output_tokens", Integer, nullable=False),
    Column("tree", Text, nullable=False),  # JSON: the flamegraph structure (SPEC §8)
    Column("runs", Integer, nullable=False, default=1),  # runs imported that replayed it (migration 4)
    UniqueConstraint("dataset_id", "session"),
)

# Scalar columns of a point that a chart or a filter uses (SPEC §8 lists their definitions).
METRIC_COLUMNS = (
    "tput_per_gpu", "output_tput_per_gpu", "input_tput_per_gpu", "total_tok_s", "output_tok_s",
    "p50_ttft", "p90_ttft", "p50_e2el", "p90_e2el", "p50_itl", "p90_itl",
    "p50_intvty", "p90_intvty", "p50_e2e_norm_intvty", "p90_e2e_norm_intvty",
    "tok_per_usd_hyperscaler", "tok_per_usd_neocloud", "tok_per_usd_rental_3y", "tok_s_per_mw",
    "theoretical_cache_hit_rate", "server_prefix_hit_rate", "kv_usage_mean", "error_rate",
    # measured power (SPEC §3 "Power"; null unless power_valid): added by migration 3
    "joules_per_output_token", "joules_per_total_token", "avg_power_w", "peak_power_w", "measured_tok_s_per_mw",
)
POWER_COLUMNS = METRIC_COLUMNS[-5:]

points = Table(
    "points", metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", String(64), nullable=False, unique=True),
    Column("deployment_id", Integer, ForeignKey("deployments.id"), nullable=False),
    Column("sweep_id", Integer, ForeignKey("sweeps.id")),
    Column("dataset_id", Integer, ForeignKey("datasets.id")),
    Column("fingerprint", String(64)),  # the sweep point's fingerprint (resuming skips stored ones)
    Column("source", String(20), nullable=False),  # agentx | aiperf
    Column("status", String(20), nullable=False),  # ok | failed
    Column("failure", Text),
    Column("concurrency", Integer),
    Column("started_at", String(40)),  # ISO 8601 UTC
    Column("imported_at", String(40), nullable=False),
    Column("run_dir", Text),  # the run folder; its records.parquet stays there
    Column("valid", Boolean),
    Column("simulated", Boolean, nullable=False, default=False),
    Column("requests_ok", Integer), Column("requests_failed", Integer),
    *[Column(name, Float) for name in METRIC_COLUMNS],
    Column("power_valid", Boolean),  # the power columns are measured (migration 3)
    Column("settings", Text),  # JSON: every identity label, including spec decoding, offload, parallelism
    Column("result", Text),  # JSON: the result point (SPEC §4)
)
Index("points_by_deployment", points.c.deployment_id, points.c.concurrency)
Index("points_by_started", points.c.started_at)
Index("points_by_fingerprint", points.c.fingerprint)

# Per-point precomputed chart data, one row per kind: series (1 s grid), histograms, timeline
# (rows by conversation and by lane). `data` is gzip-compressed JSON, served as it is.
point_blobs = Table(
    "point_blobs", metadata,
    Column("point_id", Integer, ForeignKey("points.id", ondelete="CASCADE"), primary_key=True),
    Column("kind", String(40), primary_key=True),
    Column("version", Integer, nullable=False),
    Column("data", LargeBinary, nullable=False),
)
