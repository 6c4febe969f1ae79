"""Job configuration: TOML files, ``--set`` / ``--conf-set`` overrides, validation.

Everything here runs before Spark starts, so a bad setting costs no JVM start:
:func:`load_config` reads the file and applies the command line's overrides,
:func:`check_config` refuses unknown tables and keys (listing the known ones)
and values of the wrong type (a boolean key takes only a TOML boolean), naming
the key as ``table.key``.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from importlib.resources import files

from ..errors import ParamError
from ..io import check_encoding, resolve_sample
from ..params import TrainParams, validate_params


class ConfigError(ParamError):
    """A configuration file, table, key or value the jobs cannot use."""


# --------------------------------------------------------------------------
# Shipped example configurations (sparklda/conf/*.toml, package data)


def shipped_configs() -> list[str]:
    """Names of the example configurations shipped in the package (``local``, ``cluster``...)."""
    return sorted(
        p.name[: -len(".toml")]
        for p in files("sparklda").joinpath("conf").iterdir()
        if p.name.endswith(".toml")
    )


def shipped_config(name: str) -> bytes:
    """The bytes of the shipped configuration ``name`` (``local`` or ``local.toml``)."""
    stem = name.removesuffix(".toml")
    names = shipped_configs()
    if stem not in names:
        raise ConfigError(f"No shipped configuration named {name!r}; choose from {names}.")
    return files("sparklda").joinpath("conf", f"{stem}.toml").read_bytes()


# --------------------------------------------------------------------------
# Loading and overrides


def parse_value(text: str):
    """A ``--set`` value: a TOML literal (``50``, ``0.1``, ``true``, ``"x"``, ``[1, 2]``);
    anything that is not one (a bare word such as ``scvb0`` or ``False``) is a string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def parse_key(text: str) -> list[str]:
    """The parts of a TOML dotted key: ``spark.conf."spark.executor.memory"`` ->
    ``['spark', 'conf', 'spark.executor.memory']``."""
    try:
        node = tomllib.loads(f"{text} = 0")
    except tomllib.TOMLDecodeError:
        raise ConfigError(
            f"--set: {text!r} is not a TOML key such as training.k or "
            f'spark.conf."spark.executor.memory".'
        ) from None
    parts = []
    while isinstance(node, dict):
        ((key, node),) = node.items()
        parts.append(key)
    return parts


def _spark_conf_path(parts: list[str]) -> list[str]:
    """``spark.conf.spark.executor.memory`` (unquoted) names the property
    ``spark.executor.memory``: keys under ``spark.conf`` are never nested tables."""
    if len(parts) > 3 and parts[:2] == ["spark", "conf"]:
        return parts[:2] + [".".join(parts[2:])]
    return parts


def apply_override(cfg: dict, item: str) -> None:
    """Apply one ``--set SECTION.KEY=VALUE`` to ``cfg`` in place."""
    key, sep, value = item.partition("=")
    if not sep or "." not in key:
        raise ConfigError(f"--set expects SECTION.KEY=VALUE, got {item!r}.")
    parts = _spark_conf_path(parse_key(key.strip()))
    node = cfg
    for i, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            where = ".".join(parts[: i + 1])
            raise ConfigError(
                f"--set {item!r}: {where} is a value ({child!r}), not a table, "
                f"so it has no key {parts[i + 1]!r}."
            )
        node = child
    if isinstance(node.get(parts[-1]), dict):
        raise ConfigError(
            f"--set {item!r}: {'.'.join(parts)} is a table; set one of its keys "
            f"({sorted(node[parts[-1]])})."
        )
    node[parts[-1]] = parse_value(value.strip())


def apply_conf_set(cfg: dict, item: str) -> None:
    """Apply one ``--conf-set PROPERTY=VALUE``: the Spark property by its full dotted name,
    the value taken as written (a string), i.e. ``[spark.conf] "PROPERTY" = "VALUE"``."""
    key, sep, value = item.partition("=")
    key = key.strip()
    if not sep or not key or any(c.isspace() for c in key):
        raise ConfigError(
            f"--conf-set expects PROPERTY=VALUE (a Spark property such as "
            f"spark.executor.memory=2g), got {item!r}."
        )
    spark = cfg.setdefault("spark", {})
    if not isinstance(spark, dict):
        raise ConfigError(f"--conf-set {item!r}: spark is a value, not a table.")
    conf = spark.setdefault("conf", {})
    if not isinstance(conf, dict):
        raise ConfigError(f"--conf-set {item!r}: spark.conf is a value, not a table.")
    conf[key] = value.strip()


def load_config(path: str | None, overrides=(), conf_sets=()) -> dict:
    """The configuration of ``path`` (TOML; none: empty) with ``--set`` overrides and then
    ``--conf-set`` Spark properties applied. Raises :class:`ConfigError`."""
    cfg: dict = {}
    if path:
        if not os.path.exists(path):
            raise ConfigError(
                f"configuration file {path!r} does not exist (the shipped examples "
                f"{shipped_configs()} are printed by --print-config NAME)."
            )
        if os.path.isdir(path):
            raise ConfigError(f"configuration file {path!r} is a directory.")
        with open(path, "rb") as f:
            try:
                cfg = tomllib.load(f)
            except tomllib.TOMLDecodeError as e:
                raise ConfigError(f"{path}: {e}") from None
    for item in overrides:
        apply_override(cfg, item)
    for item in conf_sets:
        apply_conf_set(cfg, item)
    return cfg


# --------------------------------------------------------------------------
# Validation

STR, BOOL, INT, NUMBER, PARAM, CONF = "a string", "a boolean", "an integer", "a number", "", "conf"
#: a table of string values (``[mlflow.tags]``)
STR_TABLE = "a table of strings"

_PARAM_FIELDS = {f.name: f for f in dataclasses.fields(TrainParams)}
#: TrainParams fields that belong to the [evaluation] table (also accepted in [training]).
EVALUATION_KEYS = (
    "heldout_count",
    "heldout_fraction",
    "eval_every",
    "foldin_max_iter",
    "evaluator",
    "particles",
)


def _param_kind(name: str) -> str:
    # booleans are checked here (bool("False") is True); numbers by TrainParams.validate
    return BOOL if isinstance(_PARAM_FIELDS[name].default, bool) else PARAM


INPUT = {
    "format": STR,
    "docword": STR,
    "vocab": STR,
    "path": STR,
    "text_col": STR,
    "id_col": STR,
    "features_col": STR,
    "vocab_size": INT,
    "min_df": NUMBER,
    "max_df": NUMBER,
    "min_token_length": INT,
    "encoding": STR,
}
#: table -> key -> kind (a nested dict is a sub-table's schema)
SCHEMA: dict[str, dict] = {
    "spark": {"master": STR, "app_name": STR, "log_level": STR, "ship_package": BOOL, "conf": CONF},
    "input": INPUT,
    "training": {**{name: _param_kind(name) for name in _PARAM_FIELDS}, "initial_model": STR},
    "evaluation": {name: _param_kind(name) for name in EVALUATION_KEYS},
    # plots: the convergence plot beside metrics.json (needs the extra sparklda[plots])
    "output": {"model": STR, "metrics": STR, "overwrite": BOOL, "top_terms": INT, "plots": BOOL},
    # resumable checkpoints: TrainParams checkpoint_dir, checkpoint_interval,
    # checkpoint_seconds, keep_checkpoint (docs/architecture.md, "Checkpoints and resume")
    "checkpoint": {"dir": STR, "every_rounds": PARAM, "every_seconds": PARAM, "keep": BOOL},
    "infer": {"model": STR, "output": STR, "overwrite": BOOL, "vector_type": STR, "input": INPUT},
    # MLflow tracking of the train job (sparklda.mlflow.settings; needs sparklda[mlflow])
    "mlflow": {
        "enabled": BOOL,
        "tracking_uri": STR,
        "experiment": STR,
        "run_name": STR,
        "tags": STR_TABLE,
        "log_model": BOOL,
        "registered_model": STR,
    },
}


def _type_name(value) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


def _check_value(key: str, kind: str, value) -> None:
    if kind == STR_TABLE:
        if not isinstance(value, dict):
            raise ConfigError(f"{key} must be a table of strings; got {value!r}.")
        bad = sorted(k for k, v in value.items() if not isinstance(v, str))
        if bad:
            raise ConfigError(
                f"{key} must be a table of strings; {[f'{key}.{k}' for k in bad]} are not "
                f"strings (write them in quotes)."
            )
        return
    if isinstance(value, dict) and kind != CONF:
        raise ConfigError(f"{key} must be a value, not a table (got {value!r}).")
    if kind == BOOL and not isinstance(value, bool):
        hint = ""
        if isinstance(value, str) and value.lower() in ("true", "false"):
            hint = f" On the command line write --set {key}={value.lower()}."
        raise ConfigError(
            f"{key} must be a TOML boolean (true or false); got {value!r} "
            f"({_type_name(value)}).{hint}"
        )
    if kind == STR and not isinstance(value, str):
        raise ConfigError(f"{key} must be a string; got {value!r} ({_type_name(value)}).")
    if kind == INT and (isinstance(value, bool) or not isinstance(value, int)):
        raise ConfigError(f"{key} must be an integer; got {value!r} ({_type_name(value)}).")
    if kind == NUMBER and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise ConfigError(f"{key} must be a number; got {value!r} ({_type_name(value)}).")
    if kind == PARAM and isinstance(value, list):
        raise ConfigError(f"{key} must be a single value; got {value!r} (an array).")


def flatten_spark_conf(conf) -> dict[str, str]:
    """``[spark.conf]`` as Spark property strings. Unquoted dotted keys written inside the
    table (``spark.executor.memory = "2g"``) became nested tables in TOML; they are joined
    back into the property's name. TOML booleans become ``true``/``false``."""
    if not isinstance(conf, dict):
        raise ConfigError(f"spark.conf must be a table of Spark properties; got {conf!r}.")
    out: dict[str, str] = {}

    def walk(prefix: str, node: dict):
        for k, v in node.items():
            name = f"{prefix}.{k}" if prefix else k
            if isinstance(v, dict):
                walk(name, v)
            elif isinstance(v, bool):
                out[name] = "true" if v else "false"
            elif isinstance(v, (str, int, float)):
                out[name] = str(v)
            else:
                raise ConfigError(
                    f'spark.conf."{name}" must be a string, number or boolean; '
                    f"got {v!r} ({_type_name(v)})."
                )

    walk("", conf)
    return out


def _check_table(prefix: str, schema: dict, table) -> None:
    if not isinstance(table, dict):
        raise ConfigError(f"[{prefix}] must be a table; got {prefix} = {table!r}.")
    unknown = sorted(set(table) - set(schema))
    if unknown:
        raise ConfigError(
            f"Unknown key(s) {[f'{prefix}.{k}' for k in unknown]} in [{prefix}]; "
            f"known keys: {sorted(schema)}."
        )
    for key, value in table.items():
        kind = schema[key]
        name = f"{prefix}.{key}"
        if isinstance(kind, dict):
            _check_table(name, kind, value)
        elif kind == CONF:
            flatten_spark_conf(value)
        else:
            _check_value(name, kind, value)


INPUT_FORMATS = {"uci": ("docword",), "text": ("path",), "json": ("path",), "parquet": ("path",)}
LOG_LEVELS = ("ALL", "DEBUG", "ERROR", "FATAL", "INFO", "OFF", "TRACE", "WARN")


def _check_input(prefix: str, table: dict) -> None:
    fmt = table.get("format", "uci")
    if fmt not in INPUT_FORMATS:
        raise ConfigError(
            f"The '{prefix}.format' parameter must be one of "
            f"{list(INPUT_FORMATS)}. Got {fmt!r} instead."
        )
    for key in INPUT_FORMATS[fmt]:
        if not table.get(key):
            raise ConfigError(f"{prefix}.format = {fmt!r} needs {prefix}.{key}.")
    if "encoding" in table:
        try:
            check_encoding(table["encoding"], fmt, "the job configuration", f"{prefix}.encoding")
        except ParamError as e:
            raise ConfigError(str(e)) from None


def check_config(cfg: dict, tables=tuple(SCHEMA)) -> dict:
    """Refuse unknown tables (of ``tables``), unknown keys and values of the wrong type;
    returns ``cfg``. Raises :class:`ConfigError` naming the key."""
    unknown = sorted(set(cfg) - set(tables))
    if unknown:
        raise ConfigError(f"Unknown configuration table(s) {unknown}; known: {sorted(tables)}.")
    for name, table in cfg.items():
        _check_table(name, SCHEMA[name], table)
    level = cfg.get("spark", {}).get("log_level", "WARN")
    if level.upper() not in LOG_LEVELS:
        raise ConfigError(
            f"The 'spark.log_level' parameter must be one of {list(LOG_LEVELS)}. "
            f"Got {level!r} instead."
        )
    if cfg.get("input"):
        _check_input("input", cfg["input"])
    if cfg.get("infer", {}).get("input"):
        _check_input("infer.input", cfg["infer"]["input"])
    both = sorted(set(cfg.get("training", {})) & set(cfg.get("evaluation", {})))
    if both:
        raise ConfigError(
            f"{[f'training.{k}' for k in both]} and "
            f"{[f'evaluation.{k}' for k in both]} are both set; keep one."
        )
    return cfg


#: [checkpoint] key -> the TrainParams field it sets
CHECKPOINT_KEYS = {
    "dir": "checkpoint_dir",
    "every_rounds": "checkpoint_interval",
    "every_seconds": "checkpoint_seconds",
    "keep": "keep_checkpoint",
}


def train_params(cfg: dict) -> TrainParams:
    """TrainParams from the [training], [evaluation] and [checkpoint] tables, validated."""
    training = {k: v for k, v in cfg.get("training", {}).items() if k != "initial_model"}
    checkpoint = {CHECKPOINT_KEYS[k]: v for k, v in cfg.get("checkpoint", {}).items()}
    both = sorted(set(training) & set(checkpoint))
    if both:
        raise ConfigError(
            f"{[f'training.{k}' for k in both]} are also set in [checkpoint]; keep one."
        )
    # messages about checkpoints name the keys the user wrote, not TrainParams' fields
    aliases = {field: f"checkpoint.{key}" for key, field in CHECKPOINT_KEYS.items()}
    values = {**training, **cfg.get("evaluation", {}), **checkpoint}
    return validate_params(values, aliases=aliases)


def input_settings(table: dict) -> dict:
    """The ``[input]`` table; ``sample:`` paths of UCI files stay as they are (the
    reader reads the shipped corpus on the driver and distributes it), other
    ``sample:`` paths are resolved to the shipped file."""
    out = dict(table)
    if out.get("path") is not None:
        out["path"] = resolve_sample(out["path"])
    return out
