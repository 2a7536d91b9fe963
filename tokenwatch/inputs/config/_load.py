"""Reading a watch config: the YAML into the schema, secrets refused, the paths it names taken from
its folder, then every check (:mod:`._checks`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tokenwatch.base.yaml_schema import KeyPath, Reader, load_yaml
from tokenwatch.inputs.config._checks import check_config
from tokenwatch.inputs.config._schema import ProgressSourceConfig, WatchConfig
from tokenwatch.inputs.fleet_access import with_paths_from

_SECRET_KEYS = ("password", "passphrase", "secret", "token")


def load_watch_config(path: str | Path) -> WatchConfig:
    """Read and check ``path``; raises :class:`SchemaError` (one line: file, line, key, problem)."""
    data, lines = load_yaml(path)
    reader = Reader(str(path), lines)
    if isinstance(data, Mapping):
        _refuse_secrets(reader, data, ())
    config = reader.build(WatchConfig, data)
    config = _with_path(config, str(path))
    config = dataclasses.replace(config, progress=[_rules_file_named(p, Path(path)) for p in config.progress])
    check_config(reader, config, data)
    return config


def _with_path(config: WatchConfig, path: str) -> WatchConfig:
    notify, fleet = config.notify, config.fleet
    folder = Path(path).resolve().parent
    if notify is not None:  # a command named by a relative path is found beside the config
        notify = dataclasses.replace(notify, base_dir=str(folder))
    if fleet is not None and fleet.auth is not None:  # so are the fleet's token and TLS files
        fleet = dataclasses.replace(fleet, auth=with_paths_from(fleet.auth, folder))
    return dataclasses.replace(config, path=path, notify=notify, fleet=fleet)


def is_rules_file(preset: str) -> bool:
    """Whether a log ``preset`` names a rules file (``rules.yaml``, ``conf/harness.yml``), not a built-in."""
    return preset.endswith((".yaml", ".yml")) or "/" in preset


def _rules_file_named(source: ProgressSourceConfig, config_path: Path) -> ProgressSourceConfig:
    """A log entry's rules file as ``rules`` (``preset: FILE.yaml`` says the same), its path taken from
    the config's folder when relative (the config is read from anywhere, the file lies beside it)."""
    if source.kind != "log":
        return source
    rules = source.rules
    if rules is None and source.preset is not None and is_rules_file(source.preset):
        rules = source.preset
    if rules is None:
        return source
    where = Path(rules).expanduser()
    if not where.is_absolute():
        where = config_path.parent / where
    return dataclasses.replace(source, rules=str(where))


def _refuse_secrets(reader: Reader, data: Any, path: KeyPath) -> None:
    if isinstance(data, Mapping):
        for key, value in data.items():
            sub = (*path, str(key))
            if str(key).lower() in _SECRET_KEYS:
                how = (
                    "give the file or environment variable that holds it (fleet.auth: bearer_token_file, "
                    "bearer_token_env, password_file, password_env)"
                    if path[:1] == ("fleet",)
                    else "SSH uses keys or the agent"
                )
                raise reader.error(sub, f"secrets are not accepted in the config ({how})")
            _refuse_secrets(reader, value, sub)
    elif isinstance(data, list):
        for i, item in enumerate(data):
            _refuse_secrets(reader, item, (*path, i))
