"""The one reader of a stack's settings: a stack file or a flat config in, `Settings` or one `SettingsError` out."""

from __future__ import annotations

import pytest

from ssh_gateway.core.settings import SettingsError, read_config, read_stack_file, stack_file_config
from ssh_gateway.plumbing.toolchain import REPO

pytestmark = pytest.mark.unit

STACK = """\
config:
  pangolin:apiKey:
    secure: v1:abc  # another namespace's secret: only its key is read
  ssh-gateway:pangolin: {url: "http://127.0.0.1:39003/v1", orgId: acme, siteId: 1}
  ssh-gateway:ports:
    range: 40000-40019
  ssh-gateway:gateway:
    hostTemplate: ssh-{instance}.qa.example.com
  ssh-gateway:firewall:
    enabled: false
  ssh-gateway:instances:
    - {name: gpu-alice, target: static, staticHost: 127.0.0.1, staticPort: 2222}
"""


@pytest.mark.parametrize("stack", ["local", "dev", "prod"])
def test_committed_stack_files_are_valid(stack: str) -> None:
    assert read_stack_file((REPO / "stacks" / f"Pulumi.{stack}.yaml").read_text()).instances


def test_a_stack_file_reads_as_its_config_does() -> None:
    config = {
        "pangolin:apiKey": "k.s",
        "ssh-gateway:pangolin": '{"url": "http://127.0.0.1:39003/v1", "orgId": "acme", "siteId": 1}',
        "ssh-gateway:ports": '{"range": "40000-40019"}',
        "ssh-gateway:gateway": '{"hostTemplate": "ssh-{instance}.qa.example.com"}',
        "ssh-gateway:firewall": '{"enabled": false}',
        "ssh-gateway:instances": '[{"name": "gpu-alice", "target": "static", "staticHost": "127.0.0.1", '
        '"staticPort": 2222}]',
    }
    assert read_stack_file(STACK) == read_config(config)


def test_a_name_the_program_would_refuse_is_refused_by_every_reader() -> None:
    long = STACK.replace("name: gpu-alice", "name: " + "g" * 62)  # a DNS label, but ssh-<name> is 66
    with pytest.raises(SettingsError, match=r"ssh-gateway:instances\[0\]\.name: .*over DNS's 63"):
        read_stack_file(long)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("config: [unclosed", "not valid YAML"),
        ("- a list\n", "not a Pulumi stack file: its top level is not a mapping"),
        (STACK.replace("pangolin:apiKey", "pangolin:apikey"), "pangolin:apikey: unknown key; did you mean"),
        (STACK + "  ssh-gateway:connect:\n    secure: v1:xyz\n", "ssh-gateway:connect is encrypted"),
        (STACK.replace("range: 40000-40019", "range: 40019-40000"), r"ssh-gateway:ports\.range = \"40019-40000\""),
    ],
)
def test_a_refusal_is_one_settings_error(text: str, error: str) -> None:
    with pytest.raises(SettingsError, match=error):
        read_stack_file(text)


def test_the_config_of_a_stack_file_is_plain_values() -> None:
    config = stack_file_config(STACK)
    assert config["ssh-gateway:instances"] == [
        {"name": "gpu-alice", "target": "static", "staticHost": "127.0.0.1", "staticPort": 2222}
    ]
    assert type(config["ssh-gateway:pangolin"]["siteId"]) is int
    assert stack_file_config("") == {} == stack_file_config("encryptionsalt: v1:abc\n")
