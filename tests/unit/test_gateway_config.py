"""`ssh-gateway gateway-config`: the gateway host's files from the stacks' `gateway` outputs, merged, idempotent,
refusing a port two stacks claim."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from ssh_gateway.ops.cli import main
from ssh_gateway.ops.tools.gateway_files import GERBIL_FILE, TRAEFIK_FILE

pytestmark = pytest.mark.unit


def gateway(first: int, last: int, connect: int | None = None) -> dict[str, Any]:
    """A stack's `gateway` output as components/program.py builds it."""
    entry_points = {f"tcp-{p}": {"address": f":{p}/tcp"} for p in range(first, last + 1)}
    out: dict[str, Any] = {"gerbilPublishedPorts": f"{first}-{last}:{first}-{last}/tcp"}
    if connect is not None:
        out["gerbilConnectPort"] = f"{connect}:{connect}/tcp"
        entry_points[f"tcp-{connect}"] = {"address": f":{connect}/tcp"}
    return {"gateway": {**out, "traefikEntryPoints": entry_points}}


def run(tmp_path: Path, capsys: pytest.CaptureFixture[str], stacks: dict[str, Any], *extra: str) -> tuple[int, str]:
    argv = ["gateway-config"]
    for name, outputs in stacks.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(outputs))
        argv += ["--stack", name, "--outputs", str(path)]
    code = main([*argv, *extra])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_two_stacks_merge_into_one_file_each_and_a_second_write_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stacks = {"dev": gateway(40000, 40002, connect=40443), "prod": gateway(41000, 41001)}
    out_dir = tmp_path / "gateway"
    code, said = run(tmp_path, capsys, stacks, "--dir", str(out_dir))
    assert code == 0 and "dry run: 2 file(s)" in said and not out_dir.exists()
    assert f"+++ {out_dir / TRAEFIK_FILE}" in said

    code, said = run(tmp_path, capsys, stacks, "--write", str(out_dir))
    assert code == 0 and "wrote " in said, said
    traefik = yaml.safe_load((out_dir / TRAEFIK_FILE).read_text())
    ports = [40000, 40001, 40002, 40443, 41000, 41001]
    assert traefik == {"entryPoints": {f"tcp-{p}": {"address": f":{p}/tcp"} for p in ports}}
    text = (out_dir / TRAEFIK_FILE).read_text()
    assert "  # stack dev: the CONNECT port\n  tcp-40443:\n" in text
    gerbil = yaml.safe_load((out_dir / GERBIL_FILE).read_text())
    ranges = ["40000-40002:40000-40002/tcp", "40443:40443/tcp", "41000-41001:41000-41001/tcp"]
    assert gerbil == {"services": {"gerbil": {"ports": ranges}}}

    before = {p.name: p.stat().st_mtime_ns for p in out_dir.iterdir()}
    code, said = run(tmp_path, capsys, stacks, "--write", str(out_dir))
    assert code == 0 and "no change" in said and "---" not in said
    assert {p.name: p.stat().st_mtime_ns for p in out_dir.iterdir()} == before


def test_a_port_two_stacks_claim_is_refused_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # prod's CONNECT port lies in dev's range.
    stacks = {"dev": gateway(40000, 40009), "prod": gateway(41000, 41001, connect=40005)}
    code, said = run(tmp_path, capsys, stacks, "--write", str(tmp_path / "gateway"))
    assert code == 3, said
    assert "port 40005 (entry point tcp-40005) is claimed by stacks dev and prod" in said
    assert not (tmp_path / "gateway").exists()


@pytest.mark.parametrize(
    ("outputs", "message"),
    [
        ({}, "stack dev has no gateway.traefikEntryPoints output: run `pulumi up` on it first"),
        ({"gateway": {"traefikEntryPoints": {"web": {"address": ":80/tcp"}}}}, "entry point 'web' is not tcp-<port>"),
        (
            {"gateway": {"traefikEntryPoints": {"tcp-1": {"address": ":2/tcp"}}}},
            "entry point tcp-1 has {'address': ':2/tcp'}, not {'address': ':1/tcp'}",
        ),
    ],
)
def test_a_stack_without_a_sound_gateway_output_cannot_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], outputs: dict[str, Any], message: str
) -> None:
    code, said = run(tmp_path, capsys, {"dev": outputs}, "--write", str(tmp_path / "gateway"))
    assert code == 2 and message in said, said
    assert not (tmp_path / "gateway").exists()
