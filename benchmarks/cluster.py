"""Every row of issue 28's table in one run: instances that follow the cluster, end to end on this machine.

    .venv/bin/python -m benchmarks.cluster                     # a shard of 250, a burst of 50
    .venv/bin/python -m benchmarks.cluster --shard 30 --burst 10   # for development
    .venv/bin/python -m benchmarks.cluster --skip-preview      # the reconciler runs `up --skip-preview`

The parts are real: kube-apiserver + etcd (no kubelet: the platform's NodePort Services are created through the
API, as Seed A's platform makes one per instance), the Pangolin emulator, a real Traefik on the stack's entry
points with its routers from the emulator's Traefik endpoint, one real sshd per measured instance listening on
its Service's nodePort (standing in for the pod, as `scripts/demo` does) and the real `ssh` client, which
counts an instance reachable once `ssh -p <its port> 127.0.0.1 true` logs in through Traefik. The shard's stack
has `ssh-gateway:discovery` (`from: services`) and host identity on; `ssh-gateway reconcile` runs as a process
of its own and starts `ssh-gateway up` as the platform would.

- the +1 baseline: one Service more, then `ssh-gateway up` by hand, timed whole (what a user waited before);
- one Service created with the reconciler running -> ssh through its port works;
- a burst of `--burst` Services created within 1 s -> the last one reachable; the reconciler's `up` runs counted
  from its log; ports bound twice counted in the emulator;
- a Service deleted -> its port passes nothing and is free in Pangolin (goal: grace + 1.5x the +1);
- a Service deleted and recreated within the grace period -> same port, same host key, Pangolin writes counted;
- Seed A's controller (benchmarks/seed_a.py, run by kopf) against a fresh emulator, the same burst: its time and
  its ports bound twice.
Times are ratios to the +1 of the same run. Under the table, the one pod's path step by step, in seconds since its
Service was created: the reconciler's JSON log (the watch's change, the worker's `up`, that `up`'s `pulumi up`) and
what the benchmark polls (the status ConfigMap's endpoint, Traefik's router, the first ssh login).
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from pangolin_emulator.harness import EmulatorHandle, running_emulator
from ssh_gateway.core.log_events import LogEvent
from ssh_gateway.core.names import entry_point_name, status_config_map_name
from ssh_gateway.local.control_plane import ControlPlane, start_control_plane, stop_control_plane
from ssh_gateway.local.sshd import ClientKey, LocalSshd, ensure_client_keypair, login_user
from ssh_gateway.local.traefik import TraefikProcess
from ssh_gateway.plumbing.toolchain import REPO, pulumi_env

from .stacks import open_program

NAMESPACE = "gpu"
EXPOSE = {"ssh-gateway.io/expose": "true"}
FIRST_NODE_PORT = 30000
MEASURED_NODE_PORT = 31000
"""Services measured end to end start here, each with an sshd on its nodePort."""
SSH = shutil.which("ssh") or "/usr/bin/ssh"
SEED_NAMESPACE = "gpu-seed"
SEED_CONTROLLER = Path(__file__).with_name("seed_a.py")
LOGINS_AT_ONCE = 10
"""ssh logins tried concurrently while polling a burst: each member counts from when it became reachable."""
POLL_SECONDS = 0.1


def log(message: str) -> None:
    print(f"... {message}", file=sys.stderr, flush=True)


def service(name: str, node_port: int) -> dict[str, Any]:
    """A NodePort Service as Seed A's platform makes one per instance (`ssh-<instance>`)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"ssh-{name}", "labels": EXPOSE},
        "spec": {
            "type": "NodePort",
            "selector": {"app": name},
            "ports": [{"name": "ssh", "port": 22, "targetPort": 22, "nodePort": node_port}],
        },
    }


@dataclass
class Cluster:
    """The API server and the one namespace the platform makes its Services in."""

    plane: ControlPlane

    def create(self, namespace: str, body: Mapping[str, Any]) -> None:
        """Creates `body`, a core object (a Service, a Pod), in `namespace`."""
        with self.plane.client() as api:
            api.post(f"/api/v1/namespaces/{namespace}/{body['kind'].lower()}s", json=body).raise_for_status()

    def delete(self, namespace: str, name: str) -> None:
        with self.plane.client() as api:
            api.delete(f"/api/v1/namespaces/{namespace}/services/{name}").raise_for_status()

    def status(self, stack: str, namespace: str = NAMESPACE) -> dict[str, Any]:
        """The stack's status ConfigMap, each key's JSON decoded ({} before the first up wrote it)."""
        with self.plane.client() as api:
            answer = api.get(f"/api/v1/namespaces/{namespace}/configmaps/{status_config_map_name(stack)}")
        if answer.status_code == 404:
            return {}
        answer.raise_for_status()
        return {key: json.loads(value) for key, value in (answer.json().get("data") or {}).items()}


def endpoint_ports(status: Mapping[str, Any]) -> dict[str, int]:
    """Each instance's port in a decoded status ConfigMap, once its endpoint is there (not while it is gone)."""
    found: dict[str, int] = {}
    for key, entry in status.items():
        endpoint = entry.get("endpoint") or {}
        if key.startswith("instance.") and "port" in endpoint and not entry.get("missingSince"):
            found[key.removeprefix("instance.").removesuffix(".json")] = int(endpoint["port"])
    return found


def discovery_config(
    emulator: EmulatorHandle,
    plane: ControlPlane,
    ports: tuple[int, int],
    discovery: Mapping[str, Any],
    *,
    max_removals: int,
    node_ip: str | None,
) -> dict[str, Any]:
    """A shard's stack: no instances in its file, `discovery` (with the `EXPOSE` selector) on the plane, its status
    in `NAMESPACE`; NodePort Services at `node_ip`, else ClusterIP ones."""
    kubernetes = {"namespace": NAMESPACE, "kubeconfig": str(plane.kubeconfig)}
    return {
        "ssh-gateway:pangolin": {"url": emulator.url, "orgId": emulator.org_id, "siteId": emulator.site_id},
        "ssh-gateway:ports": {"range": f"{ports[0]}-{ports[1]}"},
        "ssh-gateway:gateway": {"hostTemplate": "127.0.0.1"},
        "ssh-gateway:firewall": {"enabled": False},
        "ssh-gateway:instances": [],
        "ssh-gateway:kubernetes": kubernetes | ({"nodeIp": node_ip} if node_ip else {}),
        "ssh-gateway:discovery": {"selector": EXPOSE, "maxRemovals": max_removals, **discovery},
    }


def wait_until(what: str, check: Callable[[], bool], timeout: float, every: float = 0.1) -> float:
    """Seconds until `check()` holds, polling; fails the benchmark after `timeout`."""
    began = time.perf_counter()
    while not check():
        if time.perf_counter() - began > timeout:
            raise SystemExit(f"benchmark: {what} did not happen within {timeout:.0f} s")
        time.sleep(every)
    return time.perf_counter() - began


def ssh_works(port: int, client: ClientKey) -> bool:
    """A real login through Traefik's entry point: the instance is reachable for its user."""
    result = subprocess.run(  # noqa: S603 - the system's ssh client with fixed arguments
        [
            SSH, "-p", str(port), "-i", str(client.private), "-o", "BatchMode=yes", "-o", "ConnectTimeout=3",
            # The host key check is the demo's and the doctor's job (the stack's @cert-authority line); here the
            # sshds stand in with a key of their own, and what is measured is the path.
            "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
            f"{login_user()}@127.0.0.1", "true",
        ],
        capture_output=True,
        timeout=15,
        check=False,
    )  # fmt: skip
    return result.returncode == 0


def port_passes(port: int) -> bool:
    """Whether anything answers behind the port: an SSH banner within a second."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.settimeout(1)
            return sock.recv(8).startswith(b"SSH-")
    except OSError:
        return False


@dataclass
class Rig:
    """Everything one run measures against."""

    tmp: Path
    cluster: Cluster
    emulator: EmulatorHandle
    stack: str
    client: ClientKey
    sshds: dict[str, LocalSshd]

    def serve(self, name: str, node_port: int) -> None:
        """An sshd standing in for the instance's pod, on its Service's nodePort."""
        sshd = LocalSshd(self.tmp / "sshd" / name, port=node_port, authorized_keys=[self.client.public_key])
        sshd.start()
        self.sshds[name] = sshd

    def ports(self) -> dict[str, int]:
        return endpoint_ports(self.cluster.status(self.stack))

    def port_of(self, name: str) -> int | None:
        return self.ports().get(name)

    def reachable(self, name: str) -> bool:
        port = self.port_of(name)
        return port is not None and ssh_works(port, self.client)

    def reach_all(self, names: Iterable[str], what: str, timeout: float) -> dict[str, float]:
        """Seconds (from now) until each of `names` was reachable: each round reads the status once, then tries
        the logins of those with a port, `LOGINS_AT_ONCE` at a time, each timed by when its own login succeeded."""
        began = time.perf_counter()
        pending, reached = set(names), {}

        def login(member: tuple[str, int]) -> float | None:
            return time.perf_counter() - began if ssh_works(member[1], self.client) else None

        with ThreadPoolExecutor(LOGINS_AT_ONCE) as pool:

            def all_reached() -> bool:
                ports = self.ports()
                tried = [(name, ports[name]) for name in sorted(pending) if name in ports]
                for (name, _), at in zip(tried, pool.map(login, tried), strict=True):
                    if at is not None:
                        reached[name] = at
                        pending.discard(name)
                return not pending

            wait_until(what, all_reached, timeout)
        return reached

    def pangolin_writes(self) -> int:
        return sum(n for route, n in self.emulator.counters().items() if not route.startswith("GET "))

    def stop(self) -> None:
        for sshd in self.sshds.values():
            sshd.stop()


def ssh_gateway(*args: str, log_file: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(  # noqa: S603 - this interpreter, the project's own modules
        [sys.executable, "-m", *args], cwd=REPO, env=pulumi_env(), stdout=log_file.open("a"), stderr=subprocess.STDOUT
    )


def timed_up(stack: str, log_file: Path) -> float:
    began = time.perf_counter()
    process = ssh_gateway("ssh_gateway.ops", "up", "--stack", stack, log_file=log_file)
    try:
        code = process.wait()
    except BaseException:  # the benchmark stopped (SIGTERM, Ctrl-C): the up ends too, and ends what pulumi runs
        process.terminate()
        process.wait(timeout=120)
        raise
    if code != 0:
        raise SystemExit(f"benchmark: ssh-gateway up --stack {stack} failed ({code}); see {log_file}")
    return time.perf_counter() - began


def stack_output(stack: str, key: str) -> Any:
    result = subprocess.run(  # noqa: S603 - the offline toolchain's pulumi
        [str(REPO / "scripts" / "pulumi"), "stack", "output", key, "--json", "--show-secrets", "--stack", stack],
        cwd=REPO,
        env=pulumi_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout)


def reconciler_events(log_file: Path) -> list[dict[str, Any]]:
    """The reconciler's JSON log lines (its steps' among them), each with `at`: its `ts` in seconds since the epoch.
    A line may follow pulumi's output on the same line (its progress dots end without a newline, and several `up`s
    write into one log), so each is looked for anywhere in a line."""
    events, decoder = [], json.JSONDecoder()
    for line in log_file.read_text(errors="replace").splitlines() if log_file.exists() else ():
        start = line.find('{"ts"')
        if start < 0:
            continue
        try:
            event, _ = decoder.raw_decode(line, start)
        except ValueError:
            continue
        if isinstance(event, dict) and "event" in event and "ts" in event:
            events.append({**event, "at": datetime.fromisoformat(event["ts"]).timestamp()})
    return events


def reconciler_runs(log_file: Path) -> list[dict[str, Any]]:
    """The reconciler's finished `up`s, from its JSON log lines."""
    return [e for e in reconciler_events(log_file) if e["event"] == LogEvent.UP]


@dataclass
class OnePath:
    """When each step of one object's path happened (seconds since the epoch): what the benchmark sees from
    outside, polled; the reconciler's own steps come from its log."""

    subject: str
    """The object's name as the reconciler's reasons give it (`ssh-r0000`, a pod's `r0000-0`)."""
    created: float
    seen: dict[str, float] = field(default_factory=dict)
    STEPS: ClassVar[Mapping[str, str]] = {
        "status": "the status ConfigMap shows the endpoint",
        "traefik": "Traefik holds the router on its entry point",
        "ssh-try": "the ssh login that succeeds starts",
        "ssh": "it has logged in through Traefik: reachable",
        "pod-ready": "kwok has the pod Running and Ready",
        "pod-endpoint": "the Service's EndpointSlice holds the pod's IP, ready",
    }
    """What `first` may record, as the breakdown names it."""

    def first(self, step: str) -> None:
        self.seen.setdefault(step, time.time())

    def check(self, rig: Rig, traefik: TraefikProcess, name: str) -> bool:
        """One poll: the status ConfigMap's endpoint, Traefik's router on its entry point, a login through it."""
        port = rig.port_of(name)
        if port is None:
            return False
        self.first("status")
        if "traefik" not in self.seen and any(
            entry_point_name(port) in (r.get("entryPoints") or ()) for r in traefik.tcp_routers()
        ):
            self.first("traefik")
        trying = time.time()
        if not ssh_works(port, rig.client):
            return False
        self.seen["ssh-try"] = trying
        self.first("ssh")
        return True

    def breakdown(self, log_file: Path) -> list[tuple[str, float]]:
        """Each step and its seconds since the object was created, in order."""
        found = [(self.STEPS[k], at) for k, at in self.seen.items()]
        events = [e for e in reconciler_events(log_file) if e["at"] >= self.created - 1]
        changes = (e for e in events if e["event"] == LogEvent.CHANGE and self.subject in str(e.get("reason")))
        change = next(changes, None)
        if change is not None:
            found.append(("the reconciler's watch delivers the change", change["at"]))
        # The worker's `up` that took it (its reason names the object), and that `up`'s own phases after it: its
        # stack's, as a reconciler of several stacks logs their `up`s into one log.
        ups = (e for e in events if e["event"] == LogEvent.UP_START and self.subject in str(e.get("reason")))
        up = next(ups, None)
        if up is not None:
            found.append(("the worker starts ssh-gateway up (after its debounce and the Lease)", up["at"]))
            events = [e for e in events if e.get("stack") == up.get("stack")]
            wanted = [
                (LogEvent.STACK_EXPORT, "ssh-gateway up's pulumi stack export ends"),
                (LogEvent.PULUMI_UP_START, "its pulumi up starts"),
                (LogEvent.PULUMI_UP, "its pulumi up ends"),
                (LogEvent.UP, "ssh-gateway up ends"),
            ]
            for event, text in wanted:
                hit = next((e for e in events if e["event"] == event and e["at"] >= up["at"]), None)
                if hit is not None:
                    found.append((text, hit["at"]))
        return [(text, round(at - self.created, 2)) for text, at in sorted(found, key=lambda f: f[1])]


@contextmanager
def reconciler(
    stacks: Iterable[str], log_file: Path, *, skip_preview: bool, extra: Iterable[str] = ()
) -> Iterator[subprocess.Popen[bytes]]:
    """`ssh-gateway reconcile` of `stacks`, a process of its own, stopped (SIGTERM) on the way out."""
    options = [*(a for stack in stacks for a in ("--stack", stack)), "--resync", "600", *extra]
    options += ["--skip-preview"] if skip_preview else []
    process = ssh_gateway("ssh_gateway.ops", "reconcile", *options, log_file=log_file)
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()


def settle(log_file: Path, quiet: float = 3.0, timeout: float = 300) -> None:
    """Until the reconciler has finished its first pass, started no `up` for `quiet` seconds and none runs. (The
    first pass's `recover` writes its line only when it ends: a quiet log alone would not tell it runs.)"""

    def calm() -> bool:
        events = reconciler_events(log_file)
        started = sum(1 for e in events if e["event"] == LogEvent.UP_START)
        finished = sum(1 for e in events if e["event"] == LogEvent.UP)
        return 0 < finished == started and time.time() - log_file.stat().st_mtime > quiet

    wait_until("the reconciler settling", calm, timeout, every=0.5)


def seed_a(tmp: Path, cluster: Cluster, burst: int, node_ip: str = "127.0.0.1") -> tuple[float, int]:
    """Seed A's controller against a fresh emulator: seconds until every Service of a burst has its resource and
    target, and the ports bound twice."""
    cluster.plane.create_namespace(SEED_NAMESPACE)
    with running_emulator(tmp / "seed-emulator") as emulator:
        env = {
            **pulumi_env(),
            "KUBECONFIG": str(cluster.plane.kubeconfig),
            "PANGOLIN_URL": emulator.url,
            "PANGOLIN_API_KEY": emulator.api_key,
            "PANGOLIN_ORG": emulator.org_id,
            "PANGOLIN_SITE": str(emulator.site_id),
            "NODE_IP": node_ip,
            "SSH_PROXY_PORT_RANGE": "40000-40400",
        }
        log_file = tmp / "seed-a.log"
        kopf = subprocess.Popen(  # noqa: S603 - kopf from this venv, the seed's controller module
            [sys.executable, "-m", "kopf", "run", "--standalone", "--namespace", SEED_NAMESPACE, str(SEED_CONTROLLER)],
            cwd=REPO,
            env=env,
            stdout=log_file.open("w"),
            stderr=subprocess.STDOUT,
        )
        try:
            time.sleep(5)  # kopf's first listing
            began = time.perf_counter()
            for n in range(burst):
                cluster.create(SEED_NAMESPACE, service(f"s{n:04d}", 32000 + n))

            def done() -> bool:
                state = emulator.state()
                with_target = {t["resourceId"] for t in state["targets"]}
                return sum(1 for r in state["resources"] if r["resourceId"] in with_target) >= burst

            wait_until("Seed A's controller mirroring the burst", done, 300, every=0.2)
            elapsed = time.perf_counter() - began
            shared = len(emulator.doubly_bound_ports())
        finally:
            kopf.terminate()
            kopf.wait(timeout=30)
    return elapsed, shared


def run(args: argparse.Namespace) -> dict[str, Any]:
    # The directory last out: the callbacks stop sshds and Traefik by the pid files in it.
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp_name, ExitStack() as stack:
        tmp = Path(tmp_name)
        plane = start_control_plane(tmp / "kube")
        stack.callback(stop_control_plane, plane, remove_data=True)
        cluster = Cluster(plane)
        plane.create_namespace(NAMESPACE)
        emulator = stack.enter_context(running_emulator(tmp / "emulator"))
        name = f"bench-cluster-{int(time.time())}"
        discovery = {"from": "services", "namespaces": [NAMESPACE], "gracePeriod": args.grace}
        ports = (20000, 20000 + args.shard + args.burst + 40)
        config = discovery_config(emulator, plane, ports, discovery, max_removals=args.burst + 5, node_ip="127.0.0.1")
        bench = open_program(name, emulator, config)
        stack.callback(bench.discard)
        client = ensure_client_keypair(tmp / "client" / "id_ed25519", "bench-cluster")
        rig = Rig(tmp, cluster, emulator, name, client, {})
        stack.callback(rig.stop)
        up_log = tmp / "up.log"

        log(f"{args.shard} platform Services, then the shard's first ssh-gateway up")
        for n in range(args.shard):
            cluster.create(NAMESPACE, service(f"i{n:05d}", FIRST_NODE_PORT + n))
        first = timed_up(name, up_log)
        log(f"first up of {args.shard}: {first:.1f} s")

        entry_points = stack_output(name, "gateway")["traefikEntryPoints"]
        traefik = TraefikProcess(tmp / "traefik", entry_points, emulator.traefik_config_url)
        traefik.start()
        stack.callback(traefik.stop)

        node_port = iter(range(MEASURED_NODE_PORT, MEASURED_NODE_PORT + 1000))
        rig.serve("b0000", next(node_port))
        cluster.create(NAMESPACE, service("b0000", rig.sshds["b0000"].port))
        plus_one = timed_up(name, up_log)
        wait_until("the +1 reachable", lambda: rig.reachable("b0000"), 30)
        log(f"+1 by hand (ssh-gateway up): {plus_one:.1f} s")

        rec_log = tmp / "reconcile.log"
        rows: dict[str, Any] = {"shard": args.shard, "burst": args.burst, "grace": args.grace, "first_up": first}
        rows["plus_one"] = plus_one
        with reconciler([name], rec_log, skip_preview=args.skip_preview):
            settle(rec_log)
            runs_before = len(reconciler_runs(rec_log))

            rig.serve("r0000", next(node_port))
            one = OnePath("ssh-r0000", created=time.time())
            began = time.perf_counter()
            cluster.create(NAMESPACE, service("r0000", rig.sshds["r0000"].port))
            wait_until("one pod reachable", lambda: one.check(rig, traefik, "r0000"), 300)
            rows["one"] = time.perf_counter() - began
            log(f"one Service -> ssh works: {rows['one']:.1f} s")
            settle(rec_log)
            rows["one_breakdown"] = one.breakdown(rec_log)

            burst = [f"x{n:04d}" for n in range(args.burst)]
            for member in burst:
                rig.serve(member, next(node_port))
            runs_before = len(reconciler_runs(rec_log))
            began = time.perf_counter()
            for member in burst:
                cluster.create(NAMESPACE, service(member, rig.sshds[member].port))
            created = time.perf_counter() - began
            reached = rig.reach_all(burst, "the burst reachable", 900)
            rows["burst_last"] = created + max(reached.values())
            rows["burst_first"] = created + min(reached.values())
            rows["burst_created_within"] = created
            settle(rec_log)
            rows["burst_ups"] = len(reconciler_runs(rec_log)) - runs_before
            rows["shared_ports"] = len(emulator.doubly_bound_ports())
            log(f"burst of {args.burst}: last reachable after {rows['burst_last']:.1f} s, {rows['burst_ups']} ups")

            # Deleted: its port stops passing and is free in Pangolin.
            gone = burst[0]
            gone_port = rig.port_of(gone)
            if gone_port is None:
                raise SystemExit(f"benchmark: {gone} has no endpoint in the status ConfigMap")
            began = time.perf_counter()
            cluster.delete(NAMESPACE, f"ssh-{gone}")

            def freed() -> bool:
                bound = {int(r.get("proxyPort") or 0) for r in emulator.state()["resources"]}
                return gone_port not in bound and not port_passes(gone_port)

            wait_until("the deleted instance's port freed", freed, args.grace + 600)
            rows["delete"] = time.perf_counter() - began
            log(f"delete -> port free: {rows['delete']:.1f} s (grace {args.grace} s)")
            settle(rec_log)

            # Deleted and recreated within the grace period.
            back = burst[1]
            port_before = rig.port_of(back)
            key_before = stack_output(name, "hostKeys").get(back)
            writes_before = rig.pangolin_writes()
            cluster.delete(NAMESPACE, f"ssh-{back}")
            time.sleep(min(5.0, args.grace / 4))
            cluster.create(NAMESPACE, service(back, rig.sshds[back].port))
            wait_until("the recreated instance reachable", lambda: rig.reachable(back), 300)
            settle(rec_log)
            rows["recreate_same_port"] = rig.port_of(back) == port_before
            rows["recreate_same_key"] = stack_output(name, "hostKeys").get(back) == key_before
            rows["recreate_writes"] = rig.pangolin_writes() - writes_before
            rows["reconciler_runs"] = reconciler_runs(rec_log)

        if not args.skip_preview:
            # The option the issue asks to weigh: the reconciler's ups without pulumi's preview (the program runs
            # once per up instead of twice; the policy pack still runs). One pod again, same shard.
            fast_log = tmp / "reconcile-skip-preview.log"
            with reconciler([name], fast_log, skip_preview=True):
                settle(fast_log)
                rig.serve("f0000", next(node_port))
                began = time.perf_counter()
                cluster.create(NAMESPACE, service("f0000", rig.sshds["f0000"].port))
                wait_until("one pod reachable (skip-preview)", lambda: rig.reachable("f0000"), 300)
                rows["one_skip_preview"] = time.perf_counter() - began
                log(f"one Service -> ssh works, reconciler --skip-preview: {rows['one_skip_preview']:.1f} s")

        log("Seed A's controller, the same burst, against a fresh emulator")
        rows["seed_a"], rows["seed_a_shared"] = seed_a(tmp, cluster, args.burst)
        return rows


def table(rows: Mapping[str, Any]) -> str:
    base = rows["plus_one"]
    grace = rows["grace"]
    lines = [
        f"shard {rows['shard']}, burst {rows['burst']}, grace {grace} s; first up {rows['first_up']:.1f} s; "
        f"+1 by hand (ssh-gateway up) {base:.1f} s",
        "| figure | measured | goal |",
        "|---|---|---|",
        f"| one pod -> ssh works | {rows['one']:.1f} s = {rows['one'] / base:.2f}x the +1 | <= 1.5x |",
        f"| burst of {rows['burst']} (created within {rows['burst_created_within']:.2f} s) -> all reachable | first "
        f"{rows['burst_first']:.1f} s, last {rows['burst_last']:.1f} s = {rows['burst_last'] / base:.2f}x; "
        f"{rows['burst_ups']} ups; "
        f"{rows['shared_ports']} shared ports | <= 3x; <= 4 ups; 0 |",
        f"| deleted -> port passes nothing and is free | {rows['delete']:.1f} s = grace + "
        f"{(rows['delete'] - grace) / base:.2f}x | <= grace + 1.5x |",
        f"| deleted and recreated within grace | same port {rows['recreate_same_port']}, same host key "
        f"{rows['recreate_same_key']}, {rows['recreate_writes']} Pangolin writes | same, same, 0 |",
        *(
            [
                f"| one pod -> ssh works, the reconciler with --skip-preview | {rows['one_skip_preview']:.1f} s = "
                f"{rows['one_skip_preview'] / base:.2f}x the +1 | (the option weighed) |"
            ]
            if "one_skip_preview" in rows
            else []
        ),
        f"| Seed A's controller, the same {rows['burst']} | {rows['seed_a']:.1f} s, {rows['seed_a_shared']} shared "
        "ports | (reported) |",
        "",
        "one pod's path (seconds since its Service was created):",
        "| step | s |",
        "|---|---|",
        *(f"| {step} | {at:.2f} |" for step, at in rows["one_breakdown"]),
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cluster", description=__doc__.splitlines()[0])
    parser.add_argument("--shard", type=int, default=250, help="instances already in the shard (default: 250)")
    parser.add_argument("--burst", type=int, default=50, help="Services created at once (default: 50)")
    parser.add_argument(
        "--grace", type=int, default=60, help="the stack's gracePeriod in seconds, longer than an up (default: 60)"
    )
    parser.add_argument("--skip-preview", action="store_true", help="the reconciler's ups skip pulumi's preview")
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    args = parser.parse_args()
    rows = run(args)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2, default=str))
    print(table(rows))


if __name__ == "__main__":
    main()
