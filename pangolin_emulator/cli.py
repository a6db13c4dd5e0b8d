"""Command line: parse flags, seed the store, serve until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from pangolin_emulator.auth import ORG_ACTIONS, ROOT_ACTIONS
from pangolin_emulator.context import Settings
from pangolin_emulator.dataplane import DataPlane, DataPlaneLimits
from pangolin_emulator.faults import DEFAULT_FAULT_KINDS, FaultConfig, FaultInjector, parse_kinds
from pangolin_emulator.internal import InternalServer
from pangolin_emulator.keys import generate_api_key, hash_secret, split_token
from pangolin_emulator.routes import Router
from pangolin_emulator.server import App, EmulatorServer
from pangolin_emulator.store import Store
from pangolin_emulator.versions import Features, parse_version

__all__ = ["build_parser", "main"]

SEED_DOMAIN_ID = "domain1"

DESCRIPTION = """\
Local emulator of the Pangolin Integration API (/v1) for raw TCP/UDP resources, their
targets, sites, domains and orgs, written from the ssh-gateway contract
(shared/reference/pangolin-api.md). A test double, not Pangolin.

On start it prints one JSON line to stdout:
  {"url": ".../v1", "admin": ".../__emulator", "org_id": ..., "site_id": ..., "domain_id": ...}
and serves until SIGTERM or SIGINT (exit 0). Like Pangolin 1.17+, GET /v1/openapi.json (and
.yaml) need no key; the document lists the routes this emulator serves. The test-only admin
API under /__emulator has no auth: GET counters, POST counters/reset, GET doubly-bound, GET doubly-routed,
GET|POST faults, GET|POST gate, POST gate/open, GET state. With --internal-port, the ready line also has
"internal" (the internal API's base URL) and GET /api/v1/traefik-config there serves Traefik's dynamic
configuration.
"""


def _version(text: str) -> Features:
    try:
        return Features(parse_version(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _kinds(text: str) -> tuple[str, ...]:
    try:
        return parse_kinds(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _key(text: str) -> str:
    key_id, secret = split_token(text)
    if not key_id or not secret:
        raise argparse.ArgumentTypeError("an API key must look like ID.SECRET")
    return text


def _api_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the API listens, the Pangolin version it emulates, its state and its flags."""
    api = parser.add_argument_group("API server")
    api.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    api.add_argument(
        "--port", type=int, default=3003, help="port to listen on; 0 picks a free one (default: %(default)s)"
    )
    api.add_argument(
        "--version",
        type=_version,
        default=_version("1.22.0"),
        metavar="X.Y.Z",
        help="Pangolin version whose behaviour to emulate, 1.13.0 to 1.22.x: request dialects, "
        "pagination, strict queries, response shapes (default: 1.22.0)",
    )
    api.add_argument(
        "--db",
        type=Path,
        required=True,
        metavar="PATH",
        help="SQLite file holding all state; reusing it after a restart keeps every object and id",
    )
    api.add_argument(
        "--allow-raw-resources",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Pangolin's flags.allow_raw_resources; when off, raw creates answer 400 \"Raw resources "
        'are not allowed" and updates of proxyPort are rejected (default: on)',
    )
    api.add_argument("--log-requests", action="store_true", help="log every request to stderr")
    api.add_argument(
        "--internal-port",
        type=int,
        metavar="PORT",
        help="serve Pangolin's internal API (no auth) on this port, on --host: GET /api/v1/traefik-config, the "
        "dynamic configuration Traefik's HTTP provider polls; 0 picks a free one (default: off)",
    )


def _seed_arguments(parser: argparse.ArgumentParser) -> None:
    """The org, keys and domain created when missing."""
    seed = parser.add_argument_group("seed data (created when missing, kept across restarts)")
    seed.add_argument(
        "--seed-org",
        default="acme",
        help="org to create with one local site and one domain (default: %(default)s)",
    )
    seed.add_argument(
        "--seed-key",
        type=_key,
        metavar="ID.SECRET",
        help="org API key with every resource/target/site/domain action on the seed org; "
        "generated and printed to stderr when omitted",
    )
    seed.add_argument(
        "--seed-root-key",
        type=_key,
        metavar="ID.SECRET",
        help="root API key (all orgs) with every action, root-only ones included",
    )
    seed.add_argument(
        "--seed-base-domain",
        default="example.com",
        help=f"base domain of the seeded domain {SEED_DOMAIN_ID!r} (default: %(default)s)",
    )


def _fault_arguments(parser: argparse.ArgumentParser) -> None:
    """The seeded, reproducible faults of /v1 calls."""
    faults = parser.add_argument_group("fault injection (seeded, reproducible; /v1 only, never the health route)")
    faults.add_argument("--fault-rate", type=float, default=0.0, help="share of /v1 calls to fault, 0..1 (default: 0)")
    faults.add_argument("--fault-seed", type=int, default=0, help="random seed for the fault sequence (default: 0)")
    faults.add_argument(
        "--fault-kinds",
        type=_kinds,
        default=DEFAULT_FAULT_KINDS,
        metavar="K1,K2",
        help="comma-separated kinds: 500 (error envelope), 429 (with Retry-After: 1), timeout "
        "(sleep --fault-delay then 500), reset (TCP RST, no response); none of these applies "
        "the request. timeout-after-write applies it (a create commits), then holds the "
        "connection --fault-delay seconds and resets it with no answer: the ambiguous write "
        "(default: 500,429,timeout,reset)",
    )
    faults.add_argument(
        "--fault-delay",
        type=float,
        default=3.0,
        help="seconds the timeout and timeout-after-write faults hold a request (default: 3)",
    )


def _plane_arguments(parser: argparse.ArgumentParser) -> None:
    """The data plane standing in for Gerbil, Traefik and Newt."""
    plane = parser.add_argument_group("data plane (stands in for Gerbil + Traefik + Newt)")
    plane.add_argument(
        "--data-plane",
        action="store_true",
        help="forward TCP: listen on proxyPort of every enabled TCP resource with an enabled "
        "target and pipe bytes to the target ip:port; follows changes within a second",
    )
    plane.add_argument(
        "--data-plane-host", default="127.0.0.1", help="address the listeners bind (default: %(default)s)"
    )
    plane.add_argument(
        "--data-plane-max-conns",
        type=int,
        default=64,
        help="concurrent connections per listener (default: %(default)s)",
    )
    plane.add_argument(
        "--data-plane-idle-timeout",
        type=float,
        default=300.0,
        help="seconds without traffic before a connection is closed (default: %(default)s)",
    )
    plane.add_argument(
        "--data-plane-connect-timeout",
        type=float,
        default=5.0,
        help="seconds to connect to a target (default: %(default)s)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pangolin_emulator",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for add in (_api_arguments, _seed_arguments, _fault_arguments, _plane_arguments):
        add(parser)
    return parser


def _seed(store: Store, args: argparse.Namespace) -> tuple[int, str]:
    org_id: str = args.seed_org
    store.ensure_org(org_id)
    site_id = store.ensure_local_site(org_id, f"{org_id}-local")
    store.ensure_domain(org_id, SEED_DOMAIN_ID, args.seed_base_domain)
    org_key: str | None = args.seed_key
    if org_key is None and store.list_org_keys(org_id) == []:
        org_key = generate_api_key()
        print(f"pangolin-emulator: generated org API key {org_key}", file=sys.stderr, flush=True)
    if org_key is not None:
        key_id, secret = split_token(org_key)
        store.put_key(key_id, hash_secret(secret or ""), is_root=False, org_id=org_id, actions=ORG_ACTIONS)
    if args.seed_root_key is not None:
        key_id, secret = split_token(args.seed_root_key)
        store.put_key(key_id, hash_secret(secret or ""), is_root=True, org_id=None, actions=ROOT_ACTIONS)
    return site_id, SEED_DOMAIN_ID


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        fault_config = FaultConfig(args.fault_rate, args.fault_seed, args.fault_kinds, args.fault_delay)
    except ValueError as exc:
        build_parser().error(str(exc))
    store = Store(args.db)
    site_id, domain_id = _seed(store, args)
    settings = Settings(features=args.version, allow_raw_resources=args.allow_raw_resources)
    app = App(store, settings, Router(settings.features), FaultInjector(fault_config), args.log_requests)
    server = EmulatorServer((args.host, args.port), app)
    plane: DataPlane | None = None
    if args.data_plane:
        limits = DataPlaneLimits(
            args.data_plane_max_conns, args.data_plane_idle_timeout, args.data_plane_connect_timeout
        )
        plane = DataPlane(store, args.data_plane_host, limits)
        store.on_change(plane.nudge)
        plane.start()

    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    serving = threading.Thread(target=server.serve_forever, args=(0.1,), name="http", daemon=True)
    serving.start()
    internal: InternalServer | None = None
    if args.internal_port is not None:
        internal = InternalServer((args.host, args.internal_port), store)
        threading.Thread(target=internal.serve_forever, args=(0.1,), name="internal", daemon=True).start()
    base = f"http://{args.host}:{server.server_address[1]}"
    ready = {
        "url": f"{base}/v1",
        "admin": f"{base}/__emulator",
        "org_id": args.seed_org,
        "site_id": site_id,
        "domain_id": domain_id,
    }
    if internal is not None:
        ready["internal"] = f"http://{args.host}:{internal.server_address[1]}"
    print(json.dumps(ready), flush=True)
    while not stop.wait(timeout=0.5):
        pass
    server.shutdown()
    server.server_close()
    if internal is not None:
        internal.shutdown()
        internal.server_close()
    if plane is not None:
        plane.stop()
    store.close()
    return 0
