"""The pieces of the shared-backend work that need no process: the shards rule the workflows' matrices come from
(ssh_gateway/core/shards.py and its command on the repo's own stacks/), and how an `azblob://` URL and the
environment name the storage endpoint and credential, read as the pulumi CLI (gocloud.dev's azureblob) reads them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ssh_gateway.core.shards import DeployedStack, ShardsError, deployed_stacks, environment_of
from ssh_gateway.ops.recovery.azblob_backend import AzblobError, azblob_stack
from ssh_gateway.ops.recovery.stack_lock import read_lock
from ssh_gateway.plumbing.toolchain import REPO

pytestmark = pytest.mark.unit

FILES = ["Pulumi.dev.yaml", "Pulumi.local.yaml", "Pulumi.prod-b.yaml", "Pulumi.prod-a.yaml", "README.md"]
KEY = {"AZURE_STORAGE_ACCOUNT": "stsshgateway", "AZURE_STORAGE_KEY": "a2V5"}


def test_an_environment_is_a_stack_name_up_to_its_first_dash() -> None:
    assert [environment_of(s) for s in ("dev", "prod-a", "prod-eu-2")] == ["dev", "prod", "prod"]


def test_the_deployed_stacks_are_every_stack_file_but_local_by_environment() -> None:
    assert deployed_stacks(FILES) == [
        DeployedStack("dev", "dev"),
        DeployedStack("prod", "prod-a"),
        DeployedStack("prod", "prod-b"),
    ]
    assert [s.stack for s in deployed_stacks(FILES, ["prod"])] == ["prod-a", "prod-b"]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ("stage", "--env 'stage': no stacks/Pulumi.stage.yaml or stacks/Pulumi.stage-*.yaml (environments with "
         "stack files: dev, prod)"),
        ("prod-a", "--env 'prod-a': an environment is a name without '-' (e.g. prod)"),
        ("local", "--env 'local': no stacks/Pulumi.local.yaml or stacks/Pulumi.local-*.yaml"),
    ],
)  # fmt: skip
def test_an_unknown_environment_is_refused_naming_the_ones_there_are(env: str, message: str) -> None:
    with pytest.raises(ShardsError) as refused:
        deployed_stacks(FILES, [env])
    assert str(refused.value).startswith(message)


def test_the_command_lists_the_repos_own_stacks_as_the_workflows_run_it() -> None:
    # As the workflows' listing job runs it: a bare checkout's python3, without the venv or any site-packages (-S).
    python = str(Path(sys.base_prefix) / "bin" / "python3")
    command = [python, "-S", "-m", "ssh_gateway.ops", "shards", "--env", "prod", "--json"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == [{"environment": "prod", "stack": "prod"}]
    every = subprocess.run([*command[:5], "--json"], cwd=REPO, capture_output=True, text=True, check=True)
    listed = [entry["stack"] for entry in json.loads(every.stdout)]
    assert {"dev", "prod"} <= set(listed) and "local" not in listed
    missing = subprocess.run([*command[:5], "--env", "stage"], cwd=REPO, capture_output=True, text=True, check=False)
    assert missing.returncode == 2 and missing.stderr.startswith("ssh-gateway shards: --env 'stage': no stacks/")


@pytest.mark.parametrize(
    ("url", "env", "endpoint"),
    [
        ("azblob://pulumi-state", KEY, "https://stsshgateway.blob.core.windows.net"),
        ("azblob://pulumi-state?storage_account=other", KEY, "https://other.blob.core.windows.net"),
        ("azblob://s?localemu=true&domain=127.0.0.1:10000&protocol=http", KEY, "http://127.0.0.1:10000/stsshgateway"),
        ("azblob://s?domain=blob.core.chinacloudapi.cn", KEY, "https://stsshgateway.blob.core.chinacloudapi.cn"),
        ("azblob://s", {**KEY, "AZURE_STORAGE_DOMAIN": "localhost:9"}, "https://localhost:9/stsshgateway"),
    ],
)
def test_the_blob_endpoint_is_built_as_the_cli_builds_it(url: str, env: dict[str, str], endpoint: str) -> None:
    stack = azblob_stack(url, "ssh-gateway", "prod-a", env)
    assert (stack.account_url, stack.container) == (endpoint, url.removeprefix("azblob://").split("?")[0])
    assert stack.credential == {"account_name": env["AZURE_STORAGE_ACCOUNT"], "account_key": "a2V5"}
    assert "a2V5" not in repr(stack)


def test_a_sas_token_is_the_credential_without_a_key() -> None:
    stack = azblob_stack(
        "azblob://s", "p", "s", {"AZURE_STORAGE_ACCOUNT": "a", "AZURE_STORAGE_SAS_TOKEN": "sv=x&sig=y"}
    )
    assert stack.credential == "sv=x&sig=y"


@pytest.mark.parametrize(
    ("url", "env", "message"),
    [
        ("azblob://s?region=x", KEY, "PULUMI_BACKEND_URL has unknown query parameter(s) ['region']: allowed are"),
        ("azblob://s?protocol=ftp", KEY, "protocol='ftp' in the backend URL: allowed are 'http' and 'https'"),
        ("azblob://s", {}, "no storage account: set AZURE_STORAGE_ACCOUNT or ?storage_account= in"),
        (
            "azblob://s",
            {"AZURE_STORAGE_ACCOUNT": "a"},
            "no credential for the Azure Blob backend: set AZURE_STORAGE_KEY",
        ),
        ("s3://bucket", KEY, "'s3://bucket' is not an azblob://<container> URL"),
    ],
)
def test_a_backend_that_cannot_be_read_is_named(url: str, env: dict[str, str], message: str) -> None:
    with pytest.raises(AzblobError) as refused:
        azblob_stack(url, "ssh-gateway", "dev", env)
    assert str(refused.value).startswith(message)


def test_a_lock_reads_as_the_cli_wrote_it() -> None:
    content = b'{"pid":4242,"username":"ci","hostname":"runner-7","timestamp":"2026-12-01T07:46:19.733441656Z"}'
    lock = read_lock(".pulumi/locks/organization/p/s/1.json", content)
    assert (lock.pid, lock.hostname, lock.taken_at) == (4242, "runner-7", 1796111179.733441)
    assert read_lock("k", b"\x00not json") == read_lock("k", b"[]")
    assert (read_lock("k", b"").pid, read_lock("k", b"").hostname, read_lock("k", b"").taken_at) == (0, "", None)
