"""Issue 35's rows for pods: instances `from: pods` on the cluster that acts, the reconciler a process of its own.

    .venv/bin/python -m benchmarks.cluster_pods              # a shard of 250, a burst of 50; a fleet of 40 x 250
    .venv/bin/python -m benchmarks.cluster_pods --shard 30 --burst 10 --fleet-shards 3 --fleet-size 30  # development
    .venv/bin/python -m benchmarks.cluster_pods --fleet-shards 0   # the shard's rows only

The cluster is the tests' (ssh_gateway/local/control_plane.py): etcd, kube-apiserver, the controllers, the scheduler
and kwok's nodes. Pods are created through the API; the scheduler binds them against the nodes' capacity (a GPU pod
asks for `nvidia.com/gpu`) and kwok turns them Running and Ready with an IP. Each stack has `ssh-gateway:discovery`
`from: pods` and makes the Service `ssh-<instance>` for each labelled pod: ClusterIP, as the NodePort range holds
2,768 Services and the fleet needs 10,000. Host identity on, real stacks' settings (pulumi-kubernetes' await logic
runs). kwok's pods run nothing, so an instance counts once its endpoint is in the status ConfigMap, where a platform
reads it; the one pod's path goes on to the Service's EndpointSlice holding the pod's IP.

The shard: one stack of `--shard` pods, the first 16 on the cluster's 16 GPUs.
- the +1 baseline: one pod more, then `ssh-gateway up` by hand (with its preview), timed whole, `--plus-ones` times;
- from then on `ssh-gateway reconcile --skip-preview`, as the Deployment runs it;
- one pod created -> its endpoint in the status ConfigMap, `--rounds` times, the path step by step;
- 10 GPU pods Pending (no GPU free), then one pod that fits (it asks for no GPU), `--rounds` times; then GPUs
  arrive (a node of 10), the 10 run, and the same again: the same instances without the Pending ones;
- a burst of `--burst` pods -> every endpoint; the reconciler's `up`s; ports bound twice in the emulator.

The fleet (a cluster and emulator of its own): `--fleet-shards` shards of `--fleet-size` pods, a namespace and a stack
each, one status namespace, one reconciler with a `--stack` per shard.
- the pods first, then the reconciler: its start until /readyz (every namespace listed completely);
- the reconciler starts every stack's first pass at once (a worker each, nothing bounds them): 40 `up`s of 250 at
  once, more memory than this machine has. So the benchmark holds every stack's Lease, as a second replica would,
  and lets them go one at a time; each shard's first pass (recover, its first `up`) is timed;
- the reconciler's own RSS (/proc) after each shard, and the peak RSS of it with the `up`s it ran;
- `--quiet` seconds with no change in the cluster: the reconciler's own CPU watching every pod, and the CPU of the
  passes it runs meanwhile (each stack's resync, every `--resync` 600 s as the Deployment runs it);
- complete listings by the program's reader: every shard's pods, one shard's, the stacks' status ConfigMaps;
- a new pod in the last shard -> its endpoint, `--rounds` times, against the shard's one pod (a fleet of 250),
  with the other stacks' `up`s that ran beside each round counted.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx

from pangolin_emulator.harness import EmulatorHandle, running_emulator
from ssh_gateway.core.names import DiscoverFrom, reconcile_lease_name, stack_label
from ssh_gateway.kube import api_client, list_selected, read_statuses
from ssh_gateway.local.cluster_nodes import GPU, SimulatedNode
from ssh_gateway.local.control_plane import DEFAULT_NODES, ControlPlane, start_control_plane, stop_control_plane
from ssh_gateway.ops.reconcile.lease import StackLease
from ssh_gateway.ops.reconcile.reconciler import stack_target
from ssh_gateway.plumbing.loopback import free_ports

from .cluster import (
    EXPOSE,
    NAMESPACE,
    Cluster,
    OnePath,
    discovery_config,
    endpoint_ports,
    reconciler,
    reconciler_runs,
    settle,
    timed_up,
    wait_until,
)
from .process_usage import CpuByRole, Usage, sampled, tree_rss, usage
from .stacks import FIRST_PORT, instance_names, log, open_program

NAME_LABEL: Final = "ssh-gateway.io/instance"
PENDING: Final = 10
"""GPU pods left Pending by the pods-before-them's holding every GPU."""
GPUS: Final = sum(node.gpus for node in DEFAULT_NODES)
NODE_PODS: Final = 250
"""Pods a fleet node holds (kubelet's default is 110; kwok's nodes take what they are given)."""
GRACE: Final = 600
CREATES_AT_ONCE: Final = 4


def pod(name: str, *, gpus: int = 0) -> dict[str, Any]:
    """A dev instance's pod as a platform makes it, labelled for the stack; `gpus` GPUs asked for."""
    resources = {"limits": {GPU: str(gpus)}} if gpus else {}
    container = {"name": "sshd", "image": "example.test/sshd:1", "resources": resources}
    metadata = {"name": f"{name}-0", "labels": {**EXPOSE, NAME_LABEL: name}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": [container]}}


@dataclass(frozen=True)
class Shard:
    """One stack and the namespace its pods are in."""

    cluster: Cluster
    stack: str
    namespace: str

    def endpoints(self) -> dict[str, int]:
        return endpoint_ports(self.cluster.status(self.stack))

    def create(self, bodies: Sequence[dict[str, Any]]) -> None:
        """Creates the pods, `CREATES_AT_ONCE` at a time."""
        with ThreadPoolExecutor(CREATES_AT_ONCE) as pool:
            list(pool.map(lambda body: self.cluster.create(self.namespace, body), bodies))

    def get(self, path: str) -> dict[str, Any]:
        with self.cluster.plane.client() as api:
            answer = api.get(f"/api/v1/namespaces/{self.namespace}/{path}")
        answer.raise_for_status()
        result: dict[str, Any] = answer.json()
        return result

    def pod_ready(self, name: str) -> bool:
        conditions = self.get(f"pods/{name}-0").get("status", {}).get("conditions") or []
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)

    def unschedulable(self, name: str) -> bool:
        """Pending, and the scheduler has said why: no node has what it asks for."""
        found = self.get(f"pods/{name}-0")
        conditions = found.get("status", {}).get("conditions") or []
        return found["status"].get("phase") == "Pending" and any(
            c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conditions
        )

    def pod_in_endpoints(self, name: str) -> bool:
        """The instance's Service's EndpointSlice holds a ready address: the Service reaches the pod."""
        with self.cluster.plane.client() as api:
            answer = api.get(
                f"/apis/discovery.k8s.io/v1/namespaces/{self.namespace}/endpointslices",
                params={"labelSelector": f"kubernetes.io/service-name=ssh-{name}"},
            )
        answer.raise_for_status()
        ends = [e for s in answer.json()["items"] for e in s.get("endpoints") or ()]
        return any(e.get("addresses") and (e.get("conditions") or {}).get("ready") for e in ends)


def wait_running(cluster: Cluster) -> float:
    """Seconds until no selected pod of the cluster is other than Running (pods asking for more than the nodes
    have would never be: none is made before this)."""

    def all_running() -> bool:
        with cluster.plane.client() as api:
            answer = api.get(
                "/api/v1/pods",
                params={"labelSelector": "ssh-gateway.io/expose=true", "fieldSelector": "status.phase!=Running"},
            )
        answer.raise_for_status()
        return not answer.json()["items"]

    return wait_until("the pods Running", all_running, 900, every=1.0)


@dataclass(frozen=True)
class OnePod:
    began: float
    """When it was created (seconds since the epoch)."""
    seconds: float
    """From its create until the status ConfigMap shows its endpoint."""
    path: list[tuple[str, float]]
    cpu: dict[str, float]
    """CPU seconds of the reconciler and what it ran meanwhile, by role."""


@dataclass(frozen=True)
class Running:
    """The reconciler under measurement: its JSON log and its process id."""

    log: Path
    pid: int


def one_pod(shard: Shard, name: str, rec: Running) -> OnePod:
    """One pod created -> its endpoint in the status; then until its Service's EndpointSlice holds it (the path
    only), and the reconciler settled."""
    one = OnePath(f"{shard.namespace}/{name}-0", created=time.time())

    def follow() -> bool:
        if "pod-ready" not in one.seen and shard.pod_ready(name):
            one.first("pod-ready")
        if "pod-endpoint" not in one.seen and shard.pod_in_endpoints(name):
            one.first("pod-endpoint")
        return "pod-endpoint" in one.seen

    def endpoint() -> bool:
        follow()
        if name not in shard.endpoints():
            return False
        one.first("status")
        return True

    cpu = CpuByRole(rec.pid)
    with sampled(cpu.sample, every=0.25):
        began = time.perf_counter()
        shard.cluster.create(shard.namespace, pod(name))
        wait_until(f"{name}'s endpoint in the status", endpoint, 600)
        seconds = time.perf_counter() - began
    wait_until(f"{name}'s EndpointSlice", follow, 120)
    settle(rec.log)
    log(f"one pod {shard.namespace}/{name} -> endpoint: {seconds:.1f} s")
    return OnePod(one.created, seconds, one.breakdown(rec.log), cpu.seconds())


class Standby:
    """A second replica: holds every stack's Lease (renewed), and lets one go when asked."""

    IDENTITY: Final = "bench-standby"

    def __init__(self, stacks: Sequence[str]) -> None:
        target = stack_target(stacks[0])
        api = api_client(target.kubeconfig, target.context)
        self._held: dict[str, tuple[StackLease, threading.Event]] = {}
        for stack in stacks:
            lease = StackLease(
                api,
                namespace=target.status_namespace,
                name=reconcile_lease_name(stack),
                identity=self.IDENTITY,
                stack_label=stack_label(target.project, stack),
            )
            lease.acquire(threading.Event())
            renewing = threading.Event()
            lease.hold(renewing, lambda why: log(f"the standby lost a lease: {why}"))
            self._held[stack] = (lease, renewing)

    def release(self, stack: str) -> None:
        lease, renewing = self._held.pop(stack)
        renewing.set()
        lease.release(None)

    def release_all(self) -> None:
        for stack in list(self._held):
            self.release(stack)


def ready(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == httpx.codes.OK
    except httpx.HTTPError:
        return False


def passes(log_file: Path, stack: str) -> list[dict[str, Any]]:
    """The stack's finished `up`s in the reconciler's log."""
    return [e for e in reconciler_runs(log_file) if e.get("stack") == stack]


# --- the shard -----------------------------------------------------------------------------------------------


def shard_rows(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    with ExitStack() as stack:
        plane = start_control_plane(tmp / "kube")
        stack.callback(stop_control_plane, plane, remove_data=True)
        plane.create_namespace(NAMESPACE)
        emulator = stack.enter_context(running_emulator(tmp / "emulator"))
        name = f"bench-pods-{int(time.time())}"
        span = args.shard + args.plus_ones + 3 * args.rounds + PENDING + args.burst + 20
        config = discovery_config(
            emulator, plane, (FIRST_PORT, FIRST_PORT + span), pods_discovery([NAMESPACE]), max_removals=5, node_ip=None
        )
        stack.callback(open_program(name, emulator, config).discard)
        shard = Shard(Cluster(plane), name, NAMESPACE)
        rows = shard_baseline(args, shard, tmp / "up.log")
        rec_log = tmp / "reconcile.log"
        with reconciler([name], rec_log, skip_preview=True) as process:
            settle(rec_log)
            rows |= shard_measured(args, shard, emulator, Running(rec_log, process.pid))
            rows["reconciler"] = usage(process.pid)
        return rows


def pods_discovery(namespaces: list[str]) -> dict[str, Any]:
    return {"from": "pods", "namespaces": namespaces, "nameLabel": NAME_LABEL, "gracePeriod": GRACE}


def shard_baseline(args: argparse.Namespace, shard: Shard, up_log: Path) -> dict[str, Any]:
    """The shard's pods (the first `GPUS` on a GPU each), its first `up`, and the +1s by hand."""
    log(f"{args.shard} pods ({GPUS} with a GPU each), then the shard's first ssh-gateway up")
    shard.create([pod(n, gpus=1 if k < GPUS else 0) for k, n in enumerate(instance_names(args.shard))])
    rows: dict[str, Any] = {"shard": args.shard, "burst": args.burst, "running": wait_running(shard.cluster)}
    rows["first_up"] = timed_up(shard.stack, up_log)
    log(f"first up of {args.shard}: {rows['first_up']:.1f} s")
    rows["plus_ones"] = []
    for k in range(args.plus_ones):
        shard.cluster.create(shard.namespace, pod(f"b{k:04d}"))
        rows["plus_ones"].append(timed_up(shard.stack, up_log))
        log(f"+1 by hand (ssh-gateway up): {rows['plus_ones'][-1]:.1f} s")
    return rows


def shard_measured(args: argparse.Namespace, shard: Shard, emulator: EmulatorHandle, rec: Running) -> dict[str, Any]:
    rows: dict[str, Any] = {"one": [one_pod(shard, f"r{k:04d}", rec) for k in range(args.rounds)]}

    log(f"{PENDING} GPU pods with no GPU free: Pending")
    waiting = [f"w{k:04d}" for k in range(PENDING)]
    shard.create([pod(n, gpus=1) for n in waiting])
    wait_until("the GPU pods unschedulable", lambda: all(shard.unschedulable(n) for n in waiting), 120, every=0.5)
    wait_until("the Pending pods' endpoints", lambda: set(waiting) <= set(shard.endpoints()), 600, every=0.5)
    settle(rec.log)
    rows["beside_pending"] = [one_pod(shard, f"q{k:04d}", rec) for k in range(args.rounds)]
    rows["still_pending"] = sum(shard.unschedulable(n) for n in waiting)
    # The same instances without the Pending: GPUs arrive, the scheduler binds the 10, kwok runs them (pod churn,
    # which runs no `up`); the shard's size is the same but for the rounds' own pods.
    shard.cluster.plane.add_nodes([SimulatedNode("gpu-late", len(DEFAULT_NODES), gpus=PENDING)])
    wait_running(shard.cluster)
    rows["without_pending"] = [one_pod(shard, f"p{k:04d}", rec) for k in range(args.rounds)]

    log(f"a burst of {args.burst} pods")
    burst = [f"x{k:04d}" for k in range(args.burst)]
    runs_before = len(reconciler_runs(rec.log))
    first: list[float] = []

    def all_there() -> bool:
        found = set(shard.endpoints()) & set(burst)
        if found and not first:
            first.append(time.perf_counter() - began)
        return found == set(burst)

    cpu = CpuByRole(rec.pid)
    with sampled(cpu.sample, every=0.5):
        began = time.perf_counter()
        for member in burst:
            shard.cluster.create(shard.namespace, pod(member))
        rows["burst_created_within"] = time.perf_counter() - began
        wait_until("the burst's endpoints", all_there, 900)
        rows["burst_last"], rows["burst_first"] = time.perf_counter() - began, first[0]
    rows["burst_cpu"] = cpu.seconds()
    settle(rec.log)
    rows["burst_ups"] = len(reconciler_runs(rec.log)) - runs_before
    rows["shared_ports"] = len(emulator.doubly_bound_ports())
    log(f"burst of {args.burst}: last endpoint after {rows['burst_last']:.1f} s, {rows['burst_ups']} ups")
    return rows


# --- the fleet -----------------------------------------------------------------------------------------------


@dataclass
class Fleet:
    shards: int
    size: int
    pods_created: float = 0.0
    pods_running: float = 0.0
    """After the last create."""
    ready: float = 0.0
    """The reconciler's start until /readyz: every namespace listed completely."""
    listed: Usage | None = None
    """The reconciler once ready, before any pass."""
    first_passes: list[float] = field(default_factory=list)
    """Each shard's first pass, from its Lease let go until the reconciler's `up` ended."""
    after_shard: list[Usage] = field(default_factory=list)
    tree_peak: int = 0
    resyncs: list[float] = field(default_factory=list)
    """The seconds of each `up` the resync ran (every stack's, each `--resync` after its last pass) until the
    rounds began."""
    quiet: Quiet | None = None
    listings: dict[str, float] = field(default_factory=dict)
    one: list[OnePod] = field(default_factory=list)
    beside: list[int] = field(default_factory=list)
    """For each round, how many other stacks' `up`s ran at some moment of it (their resyncs)."""
    final: Usage | None = None


@dataclass(frozen=True)
class Quiet:
    """The reconciler over a window with no change in the cluster: its own CPU, and that of the passes it ran."""

    seconds: float
    own: float
    """Its own CPU, as a fraction of one core."""
    passes: float
    """The CPU of the `up`s it ran meanwhile (the resync's), in cores."""
    ups: int
    """`up`s that ended in the window."""


def quiet_window(rec: Running, seconds: float) -> Quiet:
    cpu = CpuByRole(rec.pid)
    ended_before = len(reconciler_runs(rec.log))
    began = time.perf_counter()
    with sampled(cpu.sample, every=1.0):
        time.sleep(seconds)
    took = time.perf_counter() - began
    by_role = cpu.seconds()
    own = by_role.pop("the reconciler", 0.0)
    return Quiet(took, own / took, sum(by_role.values()) / took, len(reconciler_runs(rec.log)) - ended_before)


def others_running(rec: Running, stack: str, found: OnePod) -> int:
    """Other stacks' `up`s that ran at some moment of the pod's round."""
    end = found.began + found.seconds
    ups = (e for e in reconciler_runs(rec.log) if e.get("stack") != stack)
    return sum(1 for e in ups if e["at"] - float(e.get("seconds") or 0) < end and e["at"] > found.began)


def fleet_rows(args: argparse.Namespace, tmp: Path) -> Fleet:
    fleet = Fleet(args.fleet_shards, args.fleet_size)
    with ExitStack() as stack:
        plane = start_control_plane(tmp / "fleet-kube")
        stack.callback(stop_control_plane, plane, remove_data=True)
        nodes = math.ceil((fleet.shards * fleet.size + args.rounds) / NODE_PODS)
        plane.add_nodes([SimulatedNode(f"fleet-{k}", len(DEFAULT_NODES) + k, pods=NODE_PODS) for k in range(nodes)])
        plane.create_namespace(NAMESPACE)
        emulator = stack.enter_context(running_emulator(tmp / "fleet-emulator"))
        shards = fleet_stacks(args, plane, emulator, stack)
        log(f"{fleet.shards} x {fleet.size} pods on {nodes} more nodes")
        began = time.perf_counter()
        for k, shard in enumerate(shards):
            shard.create([pod(n) for n in instance_names(fleet.size, k * fleet.size)])
        fleet.pods_created = time.perf_counter() - began
        fleet.pods_running = wait_running(shards[0].cluster)
        standby = Standby([s.stack for s in shards])
        stack.callback(standby.release_all)
        rec_log, port = tmp / "fleet-reconcile.log", free_ports(1)[0]
        began = time.perf_counter()
        process = stack.enter_context(
            reconciler(
                [s.stack for s in shards], rec_log, skip_preview=True, extra=["--metrics-address", f"127.0.0.1:{port}"]
            )
        )
        wait_until("the fleet's reconciler ready", lambda: ready(port), 900)
        fleet.ready, fleet.listed = time.perf_counter() - began, usage(process.pid)
        log(f"the reconciler of {fleet.shards} stacks ready after {fleet.ready:.1f} s")
        fleet_measured(args, fleet, shards, Running(rec_log, process.pid), standby)
    return fleet


def fleet_measured(args: argparse.Namespace, fleet: Fleet, shards: list[Shard], rec: Running, standby: Standby) -> None:
    """Each shard's first pass in turn, then the reconciler watching them all: quiet, listings, a new pod's rounds."""
    with sampled(lambda: tree_rss(rec.pid), every=1.0) as tree:
        for shard in shards:
            fleet.first_passes.append(first_pass(shard, standby, rec.log, fleet.size))
            fleet.after_shard.append(usage(rec.pid))
    fleet.tree_peak = int(max(tree, default=0))
    log(f"the reconciler watching them all: {args.quiet:.0f} s with no change")
    fleet.quiet = quiet_window(rec, args.quiet)
    fleet.listings = listings(shards[0].cluster.plane, [s.namespace for s in shards])
    fleet.resyncs = [float(e["seconds"]) for e in reconciler_runs(rec.log) if e.get("reason") == "resync"]
    fleet.one = [one_pod(shards[-1], f"n{k:04d}", rec) for k in range(args.rounds)]
    fleet.beside = [others_running(rec, shards[-1].stack, found) for found in fleet.one]
    fleet.final = usage(rec.pid)


def fleet_stacks(
    args: argparse.Namespace, plane: ControlPlane, emulator: EmulatorHandle, stack: ExitStack
) -> list[Shard]:
    """A namespace and a stack per shard: its own port sub-range, its status in `NAMESPACE` with the others'."""
    shards, stamp = [], int(time.time())
    span = args.fleet_size + args.rounds + 20
    for k in range(args.fleet_shards):
        namespace, name = f"fleet-{k:02d}", f"bench-fleet-{stamp}-{k:02d}"
        plane.create_namespace(namespace)
        first = FIRST_PORT + k * span
        discovery = pods_discovery([namespace])
        config = discovery_config(emulator, plane, (first, first + span - 1), discovery, max_removals=5, node_ip=None)
        stack.callback(open_program(name, emulator, config).discard)
        shards.append(Shard(Cluster(plane), name, namespace))
    return shards


def first_pass(shard: Shard, standby: Standby, rec_log: Path, size: int) -> float:
    """Lets the shard's Lease go: seconds until the reconciler's pass (recover, the first `up`) has ended with every
    endpoint."""
    began = time.perf_counter()
    standby.release(shard.stack)
    wait_until(f"{shard.stack}'s first pass", lambda: bool(passes(rec_log, shard.stack)), 1800, every=2.0)
    took = time.perf_counter() - began
    code = passes(rec_log, shard.stack)[0].get("code")
    if code != 0 or len(shard.endpoints()) < size:
        raise SystemExit(f"benchmark: {shard.stack}'s first pass ended {code} with {len(shard.endpoints())} endpoints")
    log(f"{shard.stack}: first pass {took:.1f} s")
    return took


def listings(plane: ControlPlane, namespaces: list[str], runs: int = 3) -> dict[str, float]:
    """Median seconds of complete listings by the program's reader (`ssh_gateway.kube`)."""
    api = api_client(str(plane.kubeconfig), None)
    reads: dict[str, Callable[[], object]] = {
        f"every shard's pods ({len(namespaces)} namespaces)": lambda: list_selected(
            api, DiscoverFrom.PODS, namespaces, EXPOSE
        ),
        "one shard's pods": lambda: list_selected(api, DiscoverFrom.PODS, namespaces[-1:], EXPOSE),
        f"the status ConfigMaps ({len(namespaces)})": lambda: read_statuses(api, NAMESPACE),
    }
    out = {}
    for what, read in reads.items():
        times = []
        for _ in range(runs):
            began = time.perf_counter()
            read()
            times.append(time.perf_counter() - began)
        out[what] = statistics.median(times)
    return out


# --- the report ----------------------------------------------------------------------------------------------


def _median(found: Sequence[OnePod]) -> float:
    return statistics.median(p.seconds for p in found)


def _each(found: Sequence[OnePod] | Sequence[float]) -> str:
    return ", ".join(f"{p.seconds if isinstance(p, OnePod) else p:.1f}" for p in found)


def _mib(n: int) -> str:
    return f"{n / 2**20:.0f} MiB"


def report(rows: dict[str, Any], fleet: Fleet | None) -> str:
    base = statistics.median(rows["plus_ones"])
    one, pending, without = _median(rows["one"]), _median(rows["beside_pending"]), _median(rows["without_pending"])
    lines = [
        f"shard {rows['shard']} pods (Running {rows['running']:.1f} s after their creates); first up "
        f"{rows['first_up']:.1f} s; +1 by hand (ssh-gateway up) {_each(rows['plus_ones'])} s, median {base:.1f} s; "
        f"the reconciler's own RSS {_mib(rows['reconciler'].rss)} (peak {_mib(rows['reconciler'].peak)})",
        "",
        "| figure | measured | goal |",
        "|---|---|---|",
        f"| one pod -> endpoint in the status (shard of {rows['shard']}) | {_each(rows['one'])} s; median {one:.1f} s"
        f" = {one / base:.2f}x the +1 | <= 1.5x |",
        f"| burst of {rows['burst']} (created within {rows['burst_created_within']:.2f} s) -> all endpoints | first "
        f"{rows['burst_first']:.1f} s, last {rows['burst_last']:.1f} s = {rows['burst_last'] / base:.2f}x; "
        f"{rows['burst_ups']} ups; {rows['shared_ports']} ports bound twice | <= 3x; <= 4; 0 |",
        f"| {PENDING} pods Pending (no GPU free), then 1 that fits | {_each(rows['beside_pending'])} s, median "
        f"{pending:.1f} s ({rows['still_pending']} still Pending after); once GPUs came and they ran: "
        f"{_each(rows['without_pending'])} s, median {without:.1f} s: **{pending / without:.2f}x** "
        f"({pending / one:.2f}x the one pod's) | <= 1.1x |",
    ]
    if fleet is not None:
        lines += fleet_rows_text(fleet, one)
    lines += _path("one pod's path in the shard", rows["one"][0])
    lines += [
        "",
        f"The burst's CPU seconds until its last endpoint (sampled every 0.5 s): {_by_role(rows['burst_cpu'])}",
    ]
    if fleet is not None:
        lines += fleet_details(fleet)
    return "\n".join(lines)


def fleet_rows_text(fleet: Fleet, one: float) -> list[str]:
    total = fleet.shards * fleet.size
    final = fleet.final or Usage(0, 0, 0.0)
    new = _median(fleet.one)
    quiet = fleet.quiet or Quiet(0.0, 0.0, 0.0, 0)
    return [
        f"| {total:,} pods in {fleet.shards} shards: the reconciler's resident memory | {_mib(final.rss)} (its peak "
        f"{_mib(final.peak)}) | <= 1 GiB |",
        f"| a new pod's endpoint (shard {fleet.shards}) | {_each(fleet.one)} s (other stacks' resync `up`s "
        f"running beside each: {', '.join(map(str, fleet.beside))}); median {new:.1f} s = {new / one:.2f}x the same "
        f"in a fleet of {fleet.size} | <= 2x |",
        f"| the reconciler's CPU watching {total:,} pods ({quiet.seconds:.0f} s, no change in the cluster) | its "
        f"own {100 * quiet.own:.1f} % of a core; the resync's `up`s it ran meanwhile ({quiet.ups} ended) "
        f"{quiet.passes:.2f} cores | (reported) |",
        f"| complete listings (the program's reader, medians of 3) | "
        f"{'; '.join(f'{what} {s:.2f} s' for what, s in fleet.listings.items())}; the reconciler's start until "
        f"/readyz (every namespace listed) {fleet.ready:.1f} s | (reported) |",
    ]


def fleet_details(fleet: Fleet) -> list[str]:
    passes_ = fleet.first_passes
    every = max(1, len(fleet.after_shard) // 8)
    grown = [(k + 1, u) for k, u in enumerate(fleet.after_shard) if (k + 1) % every == 0 or k == 0]
    return [
        "",
        f"The fleet: its pods created in {fleet.pods_created:.0f} s ({CREATES_AT_ONCE} at once), all Running "
        f"{fleet.pods_running:.0f} s after; the reconciler's start until /readyz {fleet.ready:.1f} s (its CPU "
        f"{fleet.listed.cpu if fleet.listed else 0:.1f} s); each shard's first pass (recover, "
        f"the first up) min {min(passes_):.1f}, median {statistics.median(passes_):.1f}, max {max(passes_):.1f} s, "
        f"{sum(passes_):.0f} s in all; the reconciler with its ups at most {_mib(fleet.tree_peak)}.",
        "The reconciler's RSS: listed, no pass yet "
        + (_mib(fleet.listed.rss) if fleet.listed else "?")
        + "; after shard "
        + ", ".join(f"{k}: {_mib(u.rss)}" for k, u in grown)
        + f"; CPU {fleet.after_shard[-1].cpu:.0f} s in all by then.",
        f"Resync passes (`--resync` 600, every stack) before the rounds: {len(fleet.resyncs)}, their `up`s "
        f"{sum(fleet.resyncs):.0f} s in all (median {statistics.median(fleet.resyncs or [0]):.1f} s).",
        *_path("a new pod's path in the fleet", fleet.one[0]),
    ]


def _by_role(cpu: dict[str, float]) -> str:
    shown = ", ".join(f"{role} {seconds:.1f}" for role, seconds in cpu.items() if seconds >= 0.05)
    return f"{sum(cpu.values()):.1f} in all: {shown}"


def _path(title: str, one: OnePod) -> list[str]:
    """The pod's path step by step, and the CPU of the reconciler's processes meanwhile, by role."""
    cpu = _by_role(one.cpu)
    return [
        "",
        f"{title} (seconds since its create; the first round):",
        "| step | s |",
        "|---|---|",
        *(f"| {step} | {at:.2f} |" for step, at in one.path),
        "",
        f"CPU seconds in its {one.seconds:.1f} s (sampled every 0.25 s): {cpu}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cluster_pods", description=__doc__.splitlines()[0])
    parser.add_argument("--shard", type=int, default=250, help=f"pods in the shard, at least {GPUS} (default: 250)")
    parser.add_argument("--burst", type=int, default=50, help="pods created at once (default: 50)")
    parser.add_argument("--plus-ones", type=int, default=3, help="+1s by hand, the baseline's median (default: 3)")
    parser.add_argument("--rounds", type=int, default=3, help="one-pod rounds per row, their median (default: 3)")
    parser.add_argument("--fleet-shards", type=int, default=40, help="shards of the fleet; 0: none (default: 40)")
    parser.add_argument("--fleet-size", type=int, default=250, help="pods per fleet shard (default: 250)")
    parser.add_argument("--quiet", type=float, default=120.0, help="seconds of the CPU window (default: 120)")
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    args = parser.parse_args()
    # Stopped by SIGTERM, the run still stops what it started (the reconciler, the clusters) and drops its stacks.
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(143))
    if args.shard < GPUS:
        parser.error(f"--shard {args.shard}: at least {GPUS}, so that its pods hold every GPU of the cluster")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-pods-") as tmp_name, sampled(lambda: os.getloadavg()[0], 15) as load:
        rows = shard_rows(args, Path(tmp_name))
        fleet = fleet_rows(args, Path(tmp_name)) if args.fleet_shards else None
    if args.json:
        args.json.write_text(json.dumps({"shard": rows, "fleet": fleet, "load": load}, indent=2, default=_raw))
    print(report(rows, fleet))
    spread = f"min {min(load):.1f}, median {statistics.median(load):.1f}, max {max(load):.1f}" if load else "unsampled"
    print(f"\n(run took {time.perf_counter() - started:.0f} s; load average (1 min) every 15 s: {spread})")
    sys.stdout.flush()


def _raw(value: object) -> object:
    return value.__dict__ if hasattr(value, "__dict__") else str(value)


if __name__ == "__main__":
    main()
