"""cdc.toml loading: typed, unknown keys and wrong types rejected with the key named."""

from __future__ import annotations

import pytest

from cdc.config import Config, ConfigError, NodeConfig, load


def test_round_trip(tmp_path):
    cfg = Config(dn=[NodeConfig(id=1, port=4001), NodeConfig(id=2, port=4002)])
    cfg.cn.heartbeat_interval_ms = 50
    cfg.dump(tmp_path / "cdc.toml")
    assert load(tmp_path / "cdc.toml") == cfg
    assert cfg.dn_by_id(2).port == 4002
    with pytest.raises(ConfigError, match="no DN with id 9"):
        cfg.dn_by_id(9)


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "[cn]\nheartbeat_intervall_ms = 5\n",
            r"unknown key\(s\) \['heartbeat_intervall_ms'\] in \[cn\]",
        ),
        ("[cn]\nheartbeat_interval_ms = 'fast'\n", "cn.heartbeat_interval_ms: expected int"),
        ("[[dn]]\nport = 5\n", r"\[dn\[0\]\]: .*missing .*'id'"),
        ("dn = 3\n", "dn: expected a list"),
        ("[gms\n", "not valid TOML"),
        ("[pipeline]\nfork_server = false\n", "pipeline.fork_server = False is no longer supp"),
        ('[cn]\ndn_client = "aiomysql"\n', "cn.dn_client = 'aiomysql' is no longer supported"),
        (
            '[cn]\ncatalog_database = "a"\ncatalogue_database = "b"\n',
            "cn.catalog_database and its new name catalogue_database are both set",
        ),
        (
            '[dumper]\nstreams = 2\nstream_secret = "0123456789abcdef"\n'
            '[dumper.stream_addresses]\n2 = "10.0.0.2:7000"\n',
            r"\[dumper.stream_addresses\] '2': expected a stream number in 0..1",
        ),
        (
            '[dumper]\nstreams = 2\nstream_secret = "0123456789abcdef"\n'
            '[dumper.stream_addresses]\n1 = "10.0.0.2"\n',
            "'1' = '10.0.0.2': expected HOST:PORT",
        ),
        (
            '[dumper]\nstreams = 2\n[dumper.stream_addresses]\n1 = "10.0.0.2:7000"\n',
            "stream_addresses needs stream_secret",
        ),
    ],
)
def test_bad_config(tmp_path, text, message):
    path = tmp_path / "cdc.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load(path)


def test_removed_keys_with_todays_behaviour_are_dropped(tmp_path):
    """`cluster up` wrote every key: an old cdc.toml says these unasked."""
    path = tmp_path / "cdc.toml"
    path.write_text(
        "[pipeline]\nfork_server = true\n[dumper]\nwarm_sources = true\n"
        '[cn]\ndn_client = "protocol"\nbatch_round_trips = false\n'
    )
    assert load(path).cn.batch_round_trips is False
    assert load(path).pipeline == Config().pipeline


def test_renamed_keys_are_read_under_their_old_name(tmp_path):
    """`[cn] catalog_database` (before the name agreed with "catalogue") still works."""
    path = tmp_path / "cdc.toml"
    path.write_text('[cn]\ncatalog_database = "my_catalogue"\n')
    cfg = load(path)
    assert cfg.cn.catalogue_database == "my_catalogue"
    cfg.dump(path)  # `cluster up` rewrites it under the new name
    assert 'catalogue_database = "my_catalogue"' in path.read_text()
    assert load(path) == cfg


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load(tmp_path / "nope.toml")
