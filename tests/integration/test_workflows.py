"""The GitHub workflows (.github/): actionlint (pinned, built from Go modules by scripts/bootstrap) finds nothing,
catches a broken input, and the workflows do what docs/pull-requests.md says."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from ssh_gateway.plumbing.toolchain import REPO, pulumi_env

pytestmark = pytest.mark.integration

ACTIONLINT_VERSION = "v1.7.12"
WORKFLOWS = REPO / ".github" / "workflows"


def actionlint(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    binary = pulumi_env().get("SSH_GATEWAY_ACTIONLINT")
    assert binary and Path(binary).is_file(), ".toolchain.env has no SSH_GATEWAY_ACTIONLINT: run scripts/bootstrap"
    return subprocess.run([binary, "-color=false", *args], cwd=cwd, capture_output=True, text=True, check=False)


def workflow(name: str) -> dict[Any, Any]:
    """A workflow as YAML 1.1 reads it: its `on:` key becomes True."""
    loaded: dict[Any, Any] = yaml.safe_load((WORKFLOWS / name).read_text())
    return loaded


def steps_using(job: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [step for step in job["steps"] if str(step.get("uses", "")).startswith(action)]


def test_actionlint_is_the_pinned_build() -> None:
    assert actionlint("-version").stdout.splitlines()[0] == ACTIONLINT_VERSION


def test_the_workflows_pass_actionlint() -> None:
    result = actionlint()  # every workflow under .github/workflows, and the local action they use
    assert result.returncode == 0, result.stdout + result.stderr
    assert {p.name for p in WORKFLOWS.glob("*.yml")} >= {
        "preview.yml",
        "up.yml",
        "up-stack.yml",
        "drift.yml",
        "recover.yml",
    }


def test_actionlint_catches_a_wrong_action_input(tmp_path: Path) -> None:
    shutil.copytree(REPO / ".github", tmp_path / ".github")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)  # actionlint finds a project by its repo
    broken = tmp_path / ".github" / "workflows" / "preview.yml"
    broken.write_text(broken.read_text().replace("comment-on-pr: true", "comment-on-prs: true"))
    result = actionlint(cwd=tmp_path)
    assert result.returncode == 1
    assert 'input "comment-on-prs" is not defined in action "pulumi/actions@v6"' in result.stdout


def test_preview_runs_pulumi_actions_per_stack_and_posts_the_summary() -> None:
    preview = workflow("preview.yml")
    assert "pull_request" in preview[True]
    job = preview["jobs"]["preview"]
    assert job["strategy"]["matrix"]["include"] == "${{ fromJSON(needs.stacks.outputs.stacks) }}"
    assert job["environment"] == "preview-${{ matrix.environment }}"  # one per environment, for all its shards
    [action] = [s for s in steps_using(job, "pulumi/actions@") if s.get("with", {}).get("command")]
    assert action["with"]["command"] == "preview"
    assert action["with"]["comment-on-pr"] is True and action["with"]["diff"] is True
    assert action["with"]["policyPacks"] == "policy"
    run = "\n".join(str(s.get("run", "")) for s in job["steps"])
    assert 'scripts/preview-summary --ambient "$STACK"' in run
    assert steps_using(job, "marocchino/sticky-pull-request-comment@")[0]["with"]["path"].endswith("summary.md")
    assert {"PULUMI_CONFIG_PASSPHRASE", "PANGOLIN_API_KEY", "ARM_CLIENT_ID"} <= set(job["env"])


def test_up_deploys_each_environments_shards_as_parallel_jobs_dev_then_prod() -> None:
    up = workflow("up.yml")
    assert up[True]["push"]["branches"] == ["main"]
    jobs = up["jobs"]
    assert list(jobs) == ["shards", "dev", "prod"]
    assert (jobs["dev"]["needs"], jobs["prod"]["needs"]) == ("shards", ["shards", "dev"])
    for env in ("dev", "prod"):
        job = jobs[env]
        # One job per stack of the environment, none cancelled by another's failure, none waiting for another.
        assert job["strategy"] == {
            "fail-fast": False,
            "matrix": {"include": f"${{{{ fromJSON(needs.shards.outputs.{env}) }}}}"},
        }
        assert job["uses"] == "./.github/workflows/up-stack.yml"
        assert job["with"] == {"stack": "${{ matrix.stack }}", "environment": "${{ matrix.environment }}"}
    job = workflow("up-stack.yml")["jobs"]["up"]
    assert job["environment"] == "${{ inputs.environment }}"  # the environment's reviewers approve its jobs
    assert job["concurrency"] == {"group": "up-${{ inputs.stack }}", "cancel-in-progress": False}


def _step(job: dict[str, Any], step_id: str) -> dict[str, Any]:
    [step] = [s for s in job["steps"] if s.get("id") == step_id]
    assert isinstance(step, dict)
    return step


def test_each_stack_deploys_with_ssh_gateway_up_and_a_failure_names_the_recover_workflow() -> None:
    job = workflow("up-stack.yml")["jobs"]["up"]
    assert not steps_using(job, "pulumi/actions@")  # ssh-gateway up decides the checkpoints, not the action
    up = _step(job, "up")
    assert up["run"].startswith('ssh-gateway up --ambient --stack "$STACK" -- --policy-pack policy ')
    assert up["shell"] == "bash"  # -eo pipefail: `| tee` must not hide up's exit code
    [advice] = [s for s in job["steps"] if "steps.up.outcome == 'failure'" in str(s.get("if", ""))]
    assert advice["if"] == "always() && (steps.up.outcome == 'failure' || steps.up.outcome == 'cancelled')"
    assert advice["env"] == {"OUTCOME": "${{ steps.up.outcome }}"}
    # Nothing runs recover or a second up by itself: only the recover workflow does, by hand.
    commands = [line.strip() for s in job["steps"] for line in str(s.get("run", "")).splitlines()]
    assert [c for c in commands if c.startswith("ssh-gateway ")] == [up["run"].splitlines()[0].strip()]
    converged = job["steps"][-1]
    assert converged["run"] == 'scripts/drift-check --ambient "$STACK"' and "if" not in converged


def test_recover_is_by_hand_in_the_stacks_concurrency_group_then_ups_it() -> None:
    recover = workflow("recover.yml")
    assert set(recover[True]) == {"workflow_dispatch"}
    inputs = recover[True]["workflow_dispatch"]["inputs"]
    assert inputs["stack"]["required"] is True
    assert (inputs["cancel-lock"]["default"], inputs["up"]["default"]) == (False, True)
    jobs = recover["jobs"]
    job = jobs["recover"]
    # The group of the stack's up (up-stack.yml), so a recover never runs beside an up of its stack.
    assert job["concurrency"] == workflow("up-stack.yml")["jobs"]["up"]["concurrency"]
    assert job["environment"] == "${{ needs.stack.outputs.environment }}"
    # recover reads the lock blobs with a SAS token, not the OIDC login (ssh_gateway/ops/recovery/azblob_backend.py).
    assert job["env"]["AZURE_STORAGE_SAS_TOKEN"] == "${{ secrets.AZURE_STORAGE_SAS_TOKEN }}"  # noqa: S105
    [cancel] = [s for s in job["steps"] if "pulumi cancel" in str(s.get("run", ""))]
    assert cancel["if"] == "inputs.cancel-lock"
    assert _step(job, "recover")["run"].startswith('ssh-gateway recover --ambient --stack "$STACK"')
    assert jobs["up"] == {
        "needs": ["stack", "recover"],
        "if": "inputs.up",
        "uses": "./.github/workflows/up-stack.yml",
        "with": {"stack": "${{ inputs.stack }}", "environment": "${{ needs.stack.outputs.environment }}"},
        "secrets": "inherit",
    }


def _step_outputs(name: str, job: str, step_id: str, stacks_dir: Path, env: dict[str, str]) -> dict[str, str]:
    """Runs a workflow's step as the runner would (bash, from a checkout, with `env`) with `stacks_dir` as stacks/;
    its outputs."""
    checkout = stacks_dir.parent
    shutil.copytree(
        REPO / "ssh_gateway", checkout / "ssh_gateway", ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True
    )
    output = checkout / "github_output"
    output.write_text("")
    step = _step(workflow(name)["jobs"][job], step_id)
    subprocess.run(
        ["bash", "-e", "-c", step["run"]],
        cwd=checkout,
        env={"PATH": os.environ["PATH"], "GITHUB_OUTPUT": str(output), **env},
        check=True,
    )
    return {key: value for key, _, value in (line.partition("=") for line in output.read_text().split())}


@pytest.mark.parametrize(
    ("outcome", "output", "advice"),
    [
        (
            "failure",
            "error: the stack is currently locked by 1 lock(s).",
            "prod-b is locked by an earlier run that died",
        ),
        ("cancelled", "Updating (prod-b):\n", "was cancelled or timed out mid-run. Once this job is over, run the"),
        ("failure", "error: update failed\n", "If pulumi reported an error above (a policy, a provider), fix it"),
    ],
)
def test_a_failed_up_says_which_case_it_looks_like_and_names_the_recover_workflow(
    tmp_path: Path, outcome: str, output: str, advice: str
) -> None:
    [step] = [s for s in workflow("up-stack.yml")["jobs"]["up"]["steps"] if s.get("name") == "If the up did not finish"]
    (tmp_path / "up.txt").write_text(output)
    summary = tmp_path / "summary.md"
    env = {"STACK": "prod-b", "RUNNER_TEMP": str(tmp_path), "GITHUB_STEP_SUMMARY": str(summary), "OUTCOME": outcome}
    done = subprocess.run(
        ["bash", "-e", "-c", step["run"]], env={"PATH": os.environ["PATH"], **env}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("::error title=up prod-b did not finish::") and advice in done.stdout
    assert "run the workflow 'recover' with stack=prod-b" in done.stdout
    assert advice in summary.read_text()


def _listing_outputs(name: str, job: str, stacks_dir: Path) -> dict[str, Any]:
    """A workflow's listing step's outputs, each a JSON list of {environment, stack}."""
    return {key: json.loads(value) for key, value in _step_outputs(name, job, "list", stacks_dir, {}).items()}


def test_the_workflows_list_the_shards_by_the_one_rule(tmp_path: Path) -> None:
    stacks = tmp_path / "checkout" / "stacks"
    stacks.mkdir(parents=True)
    for stack in ("dev", "local", "prod-a", "prod-b", "prod-c"):
        (stacks / f"Pulumi.{stack}.yaml").write_text("config: {}\n")
    shards = [{"environment": "prod", "stack": f"prod-{x}"} for x in "abc"]
    assert _listing_outputs("up.yml", "shards", stacks) == {
        "dev": [{"environment": "dev", "stack": "dev"}],
        "prod": shards,
    }
    for name in ("preview.yml", "drift.yml"):
        # Every shard of every environment, never `local`.
        stacks_of = _listing_outputs(name, "stacks", stacks)
        assert stacks_of == {"stacks": [{"environment": "dev", "stack": "dev"}, *shards]}, name
    # recover.yml finds the environment of the one stack it is given, by the same rule.
    assert _step_outputs("recover.yml", "stack", "find", stacks, {"STACK": "prod-b"}) == {"environment": "prod"}
    with pytest.raises(subprocess.CalledProcessError):  # a stack CI does not deploy stops the run
        _step_outputs("recover.yml", "stack", "find", stacks, {"STACK": "local"})


def test_drift_runs_on_a_schedule_and_by_hand() -> None:
    drift = workflow("drift.yml")
    assert set(drift[True]) == {"schedule", "workflow_dispatch"}
    assert drift["jobs"]["drift"]["strategy"]["matrix"]["include"] == "${{ fromJSON(needs.stacks.outputs.stacks) }}"
    run = "\n".join(str(s.get("run", "")) for s in drift["jobs"]["drift"]["steps"])
    assert 'scripts/drift-check --ambient "$STACK"' in run
    # scripts/drift-check is `preview --refresh --expect-no-changes` (tests/integration/test_drift_check.py).
    assert '"--refresh", "--expect-no-changes"' in (REPO / "ssh_gateway" / "ops" / "tools" / "drift.py").read_text()
