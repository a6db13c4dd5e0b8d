"""ssh-gateway's guardrails as a Pulumi policy pack (`pulumi preview --policy-pack policy`).

The rules live in `rules.py`; this file reads the stack's config and hands the rules what the engine sends.
The stack's config reaches a Python pack as `pulumi.Config` (through PULUMI_CONFIG, which the language host
sets from the engine's ConfigureStack: see scripts/toolchain/langhost.py, `_PolicyProxy`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

# The rules use the project's domain core (ssh_gateway.core), one directory up from the pack.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pulumi
import rules  # type: ignore[import-not-found, unused-ignore]  # a sibling module: the pack runs from its own directory
from pulumi_policy import (
    EnforcementLevel,
    PolicyPack,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)


def _resource(resource: Any) -> rules.Resource:
    return rules.Resource(
        urn=resource.urn,
        type=resource.resource_type,
        props=resource.props,
        parent=resource.parent.urn if resource.parent is not None else None,
    )


def _report(violations: list[rules.Violation], report_violation: ReportViolation) -> None:
    for violation in violations:
        report_violation(violation.message, violation.urn)


def _no_world_open_nsg_rule(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    production = pulumi.Config("ssh-gateway").get_bool("production") or False
    resource = rules.Resource(urn=args.urn, type=args.resource_type, props=args.props)
    for violation in rules.nsg_open_to_world(resource, production=production):
        report_violation(violation.message)


def _ports_in_range(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    resources = [_resource(r) for r in args.resources]
    port_range = rules.stack_range(pulumi.Config("ssh-gateway").get_object("ports"), resources)
    _report(rules.ports_outside_range(resources, port_range), report_violation)


def _ports_held_once(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    _report(rules.shared_ports(_resource(r) for r in args.resources), report_violation)


def _no_load_balancer(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    resource = rules.Resource(urn=args.urn, type=args.resource_type, props=args.props)
    for violation in rules.load_balancer_from_component(resource):
        report_violation(violation.message)


PolicyPack(
    name="ssh-gateway-guardrails",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=[
        ResourceValidationPolicy(
            name="nsg-not-open-to-world-in-production",
            description="In stacks with ssh-gateway:production, no inbound NSG rule allows 0.0.0.0/0, *, Internet "
            "or Any.",
            validate=_no_world_open_nsg_rule,
        ),
        StackValidationPolicy(
            name="pangolin-port-in-range",
            description="Every Pangolin proxyPort is inside the stack's ssh-gateway:ports.range.",
            validate=_ports_in_range,
        ),
        StackValidationPolicy(
            name="port-held-once",
            description="No two instances' resources (Pangolin resources, inbound NSG rules) on the same port.",
            validate=_ports_held_once,
        ),
        ResourceValidationPolicy(
            name="no-load-balancer-service",
            description="SshInstance never creates a Service of type LoadBalancer.",
            validate=_no_load_balancer,
        ),
    ],
)
