"""`ssh-gateway up`'s one decision: a first `up` (nothing made yet) skips the per-step checkpoints, no other."""

from __future__ import annotations

from typing import Any

import pytest

from ssh_gateway.core.names import NSG_RULE_TYPE, PANGOLIN_TYPE, SECRET_TYPE, SERVICE_TYPE
from ssh_gateway.ops.cli import build_parser
from ssh_gateway.ops.tools.pulumi_up import SKIP_CHECKPOINTS, decision_preview_arguments, first_up_env, holds_resources

pytestmark = pytest.mark.unit

STACK = {"urn": "urn:pulumi:dev::ssh-gateway::pulumi:pulumi:Stack::ssh-gateway-dev", "type": "pulumi:pulumi:Stack"}
PROVIDER = {
    "urn": "urn:pulumi:dev::ssh-gateway::pulumi:providers:pulumi-python::default",
    "type": "pulumi:providers:pulumi-python",
}
MADE = {"urn": "urn:pulumi:dev::ssh-gateway::x::gpu-01", "type": PANGOLIN_TYPE}


def _export(resources: list[dict[str, Any]], pending: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    deployment: dict[str, Any] = {"manifest": {}, "resources": resources}
    if pending is not None:
        deployment["pending_operations"] = pending
    return {"version": 3, "deployment": deployment}


@pytest.mark.parametrize(
    "exported",
    [{}, {"version": 3, "deployment": {"manifest": {}}}, _export([]), _export([STACK, PROVIDER])],
    ids=["never-updated", "no-resources-key", "empty", "only-the-stack-and-its-provider"],
)
def test_a_stack_with_nothing_made_is_a_first_up(exported: dict[str, Any]) -> None:
    assert not holds_resources(exported)
    assert first_up_env(exported, lambda: [PANGOLIN_TYPE, NSG_RULE_TYPE]) == SKIP_CHECKPOINTS
    assert SKIP_CHECKPOINTS == {"PULUMI_SKIP_CHECKPOINTS": "true"}


def test_a_first_up_of_services_and_secrets_skips_checkpoints_one_of_istio_objects_keeps_them() -> None:
    assert first_up_env(_export([]), lambda: [PANGOLIN_TYPE, SERVICE_TYPE, SECRET_TYPE]) == SKIP_CHECKPOINTS
    # Istio objects carry no stack mark, so recover does not adopt them.
    istio = "kubernetes:networking.istio.io/v1alpha3:EnvoyFilter"
    assert first_up_env(_export([]), lambda: [PANGOLIN_TYPE, istio]) == {}


def _never() -> list[str]:
    raise AssertionError("a stack that holds resources needs no preview")


def test_a_stack_that_holds_a_resource_keeps_every_checkpoint() -> None:
    assert first_up_env(_export([STACK, PROVIDER, MADE]), _never) == {}


def test_a_pending_create_is_not_a_first_up() -> None:
    # A killed first `up` that checkpointed its pending create: recover settles it; the next `up` is not first.
    assert first_up_env(_export([STACK], pending=[{"resource": MADE, "type": "creating"}]), _never) == {}


def test_the_cli_has_up_with_pulumi_arguments_after_dashes() -> None:
    args = build_parser().parse_args(["up", "--stack", "dev", "--", "--parallel", "8"])
    assert args.stack == "dev" and args.extra == ["--", "--parallel", "8"] and callable(args.run)


def test_the_decision_preview_takes_the_policy_packs_and_nothing_unknown() -> None:
    workflow = ["--policy-pack", "policy", "--diff", "--suppress-progress"]
    assert decision_preview_arguments(workflow) == ["--policy-pack", "policy"]
    assert decision_preview_arguments(["--policy-pack=a", "--policy-pack-config", "c.json", "--parallel", "8"]) == [
        "--policy-pack=a",
        "--policy-pack-config",
        "c.json",
    ]
    assert decision_preview_arguments(["--color=never", "-p", "4", "--skip-preview"]) == []
    # A flag that changes what the update does, and one not known here: the update keeps its own preview.
    assert decision_preview_arguments(["--target", "urn:pulumi:dev::p::t::a"]) is None
    assert decision_preview_arguments(["--diff", "--refresh"]) is None
