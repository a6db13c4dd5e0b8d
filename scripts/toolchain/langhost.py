"""The Python language host (`pulumi-language-python`) for a CLI built from Go modules.

Upstream's host lives in its own Go module (`sdk/python/cmd/pulumi-language-python/v3`), which has no tags
and which the module proxy reachable here refuses at every version, so it cannot be built from modules.
This host speaks the same gRPC protocol (`pulumirpc.LanguageRuntime`, from the pulumi SDK's generated
stubs) and runs programs exactly as upstream does: through upstream's own `pulumi-language-python-exec`
shim, taken from the sdk/v3 module at build time, inside the virtualenv that Pulumi.yaml names.

Implemented: Handshake, GetPluginInfo, GetRequiredPackages/Plugins (from the `pulumi-plugin.json` files of
the installed distributions, as upstream reads them), Run, RunPlugin (policy packs), InstallDependencies,
About, GetProgramDependencies, Cancel. Code generation RPCs are not (they need the Go codegen).
Policy packs run through RunPlugin behind a small Analyzer proxy that hands them their stack (`_PolicyProxy`).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import threading
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import empty_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc, language_pb2, language_pb2_grpc, plugin_pb2

HERE = Path(__file__).resolve().parent
EXEC_SHIM = HERE / "pulumi-language-python-exec"
# Exit code with which the exec shim says "the error was already shown to the user".
BAIL_EXIT_CODE = 32
# Resource and stack analyses carry whole property maps.
_GRPC_OPTIONS = [
    ("grpc.max_receive_message_length", 400 * 1024 * 1024),
    ("grpc.max_send_message_length", 400 * 1024 * 1024),
]

# Lists the Pulumi packages installed in the program's interpreter, as upstream's host does with
# `pip list` + pulumi-plugin.json, but in one process.
LIST_PACKAGES = """
import importlib.metadata as md, json
out = []
for dist in md.distributions():
    for f in dist.files or ():
        if f.name == "pulumi-plugin.json":
            meta = json.loads(f.read_text())
            if meta.get("resource"):
                out.append({"name": meta.get("name") or dist.metadata["Name"],
                            "version": meta.get("version") or dist.version,
                            "server": meta.get("server", "")})
print(json.dumps(out))
"""


def _options(info: Any) -> dict[str, Any]:
    return dict(info.options.items()) if info is not None and info.HasField("options") else {}


def _python_for(info: Any) -> tuple[str, dict[str, str]]:
    """The interpreter and environment for a program: Pulumi.yaml's `virtualenv`, else PULUMI_PYTHON_CMD."""
    env = dict(os.environ)
    venv = _options(info).get("virtualenv")
    if venv:
        root = Path(info.root_directory or ".")
        path = (root / venv).resolve()
        python = path / "bin" / "python"
        if not python.exists():
            raise RuntimeError(
                f"The 'virtualenv' option in Pulumi.yaml is set to {venv!r}, but {path} has no bin/python. "
                "Create it with scripts/bootstrap (or python3 -m venv and pip install -e '.[dev]')."
            )
        env["VIRTUAL_ENV"] = str(path)
        env["PATH"] = f"{path / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env.pop("PYTHONHOME", None)
        return str(python), env
    return env.get("PULUMI_PYTHON_CMD", "python3"), env


class LanguageHost(language_pb2_grpc.LanguageRuntimeServicer):
    def __init__(self, engine_address: str, version: str) -> None:
        self.engine_address = engine_address
        self.version = version
        self._children: set[subprocess.Popen[bytes]] = set()
        # Started by RunPlugin (policy packs): they serve until told to stop.
        self._plugins: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.Lock()

    # --- lifecycle -------------------------------------------------------------------------------
    def Handshake(self, request: Any, _context: Any) -> Any:
        self.engine_address = request.engine_address or self.engine_address
        return language_pb2.LanguageHandshakeResponse()

    def GetPluginInfo(self, _request: Any, _context: Any) -> Any:
        return plugin_pb2.PluginInfo(version=self.version)

    def Cancel(self, _request: Any, _context: Any) -> Any:
        # The engine cancels when the deployment already failed (a policy violation, say), and has shown
        # why: end the program with SIGTERM, quietly, not with a KeyboardInterrupt traceback.
        with self._lock:
            for child in self._children:
                child.terminate()
        return empty_pb2.Empty()

    # --- dependencies ----------------------------------------------------------------------------
    def _packages(self, info: Any) -> list[dict[str, str]]:
        python, env = _python_for(info)
        out = subprocess.run(  # noqa: S603 - the interpreter named by Pulumi.yaml
            [python, "-c", LIST_PACKAGES], env=env, capture_output=True, text=True, check=True
        ).stdout
        return list(json.loads(out))

    def GetRequiredPackages(self, request: Any, _context: Any) -> Any:
        packages = [
            plugin_pb2.PackageDependency(kind="resource", name=p["name"], version=p["version"], server=p["server"])
            for p in self._packages(request.info)
        ]
        return language_pb2.GetRequiredPackagesResponse(packages=packages)

    def GetRequiredPlugins(self, request: Any, _context: Any) -> Any:
        plugins = [
            plugin_pb2.PluginDependency(kind="resource", name=p["name"], version=p["version"], server=p["server"])
            for p in self._packages(request.info)
        ]
        return language_pb2.GetRequiredPluginsResponse(plugins=plugins)

    def GetProgramDependencies(self, request: Any, _context: Any) -> Any:
        python, env = _python_for(request.info)
        out = subprocess.run(  # noqa: S603
            [python, "-m", "pip", "list", "--format", "json"], env=env, capture_output=True, text=True, check=True
        ).stdout
        deps = [language_pb2.DependencyInfo(name=d["name"], version=d["version"]) for d in json.loads(out)]
        return language_pb2.GetProgramDependenciesResponse(dependencies=deps)

    def About(self, request: Any, _context: Any) -> Any:
        python, env = _python_for(request.info)
        version = subprocess.run(  # noqa: S603
            [python, "--version"], env=env, capture_output=True, text=True, check=True
        ).stdout.split()[-1]
        return language_pb2.AboutResponse(executable=python, version=version)

    def InstallDependencies(self, request: Any, _context: Any) -> Any:
        # The virtualenv is made by scripts/bootstrap; nothing is downloaded here (offline by design).
        _python_for(request.info)
        yield language_pb2.InstallDependenciesResponse(stdout=b"dependencies are installed by scripts/bootstrap\n")

    # --- running ---------------------------------------------------------------------------------
    def _spawn(self, argv: list[str], env: dict[str, str], cwd: str | None, **kw: Any) -> tuple[int, Any, Any]:
        child = subprocess.Popen(argv, env=env, cwd=cwd, **kw)  # noqa: S603
        with self._lock:
            self._children.add(child)
        try:
            out, err = child.communicate()
        finally:
            with self._lock:
                self._children.discard(child)
        return child.returncode, out, err

    def Run(self, request: Any, _context: Any) -> Any:
        info = request.info
        try:
            python, env = _python_for(info)
        except RuntimeError as exc:
            return language_pb2.RunResponse(error=str(exc))
        env["PULUMI_CONFIG"] = json.dumps(dict(request.config))
        env["PULUMI_CONFIG_SECRET_KEYS"] = json.dumps(list(request.configSecretKeys))
        pwd = info.program_directory or request.pwd or None
        argv = [python, "-u", str(EXEC_SHIM)]
        for flag, value in (
            ("monitor", request.monitor_address),
            ("engine", self.engine_address),
            ("project", request.project),
            ("stack", request.stack),
            ("pwd", pwd),
            ("dry_run", "true" if request.dryRun else "false"),
            ("parallel", str(request.parallel)),
            ("organization", request.organization),
            ("root_directory", info.root_directory),
        ):
            if value:
                argv += [f"--{flag}", value]
        argv += [info.entry_point or request.program or ".", *request.args]
        # The program's stdout/stderr are ours, which the engine shows as the program's output.
        code, _, _ = self._spawn(argv, env, pwd)
        if code == 0:
            return language_pb2.RunResponse()
        if code == BAIL_EXIT_CODE:
            return language_pb2.RunResponse(bail=True)
        return language_pb2.RunResponse(error=f"Program exited with non-zero exit code: {code}")

    def RunPlugin(self, request: Any, context: Any) -> Any:
        """Runs a Python plugin and streams its output back: a policy pack (kind "analyzer", the way CLI
        3.221+ starts `--policy-pack` directories) through `_PolicyProxy`, anything else directly."""
        python, env = _python_for(request.info)
        env.update(item.split("=", 1) for item in request.env if "=" in item)
        program = request.info.entry_point or request.program or "."
        if request.kind != "analyzer":
            child = self._start([python, "-u", program, *request.args], env, request.pwd or None, context)
            yield from self._relay(child)
            return
        # A policy pack runs in its own directory (it imports its sibling modules from there), as the
        # pre-RunPlugin `pulumi-analyzer-policy-python` shim ran it.
        pack_dir = request.info.program_directory or request.info.root_directory or request.pwd or None
        proxy = _PolicyProxy()
        try:
            # The engine dials the first line of our stdout: the proxy, not the pack.
            yield language_pb2.RunPluginResponse(stdout=f"{proxy.port}\n".encode())
            stack = proxy.wait_for_stack(context.is_active)
            if stack is None and not context.is_active():
                return
            env.update(_policy_env(stack))
            engine = request.args[0] if request.args else self.engine_address
            child = self._start([python, "-u", "-m", "pulumi.policy", engine, program], env, pack_dir, context)
            # pulumi-policy prints the port of its Analyzer server first; everything after is output.
            first = child.stdout.readline() if child.stdout else b""
            try:
                proxy.attach(int(first))
            except (ValueError, grpc.RpcError) as exc:
                proxy.fail(f"the policy pack in {pack_dir} did not start an Analyzer ({exc}); first line: {first!r}")
                if first:
                    yield language_pb2.RunPluginResponse(stdout=first)
            yield from self._relay(child)
        finally:
            proxy.stop()

    def _start(self, argv: list[str], env: dict[str, str], cwd: str | None, context: Any) -> Any:
        child = subprocess.Popen(  # noqa: S603 - the plugin's interpreter, from its PulumiPlugin/Policy.yaml
            argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        with self._lock:
            self._plugins.add(child)
        # The engine ends a plugin by cancelling this stream; the child must not outlive it.
        context.add_callback(lambda: threading.Thread(target=_stop, args=(child,), daemon=True).start())
        return child

    def _relay(self, child: Any) -> Any:
        """Streams the child's stdout and stderr as they come, then its exit code."""
        try:
            queue: list[Any] = []
            cond = threading.Condition()

            def pump(stream: Any, field: str) -> None:
                for chunk in iter(lambda: stream.read1(65536), b""):
                    with cond:
                        queue.append(language_pb2.RunPluginResponse(**{field: chunk}))
                        cond.notify()
                with cond:
                    queue.append(None)
                    cond.notify()

            pumps = [
                threading.Thread(target=pump, args=(child.stdout, "stdout"), daemon=True),
                threading.Thread(target=pump, args=(child.stderr, "stderr"), daemon=True),
            ]
            for t in pumps:
                t.start()
            finished = 0
            while finished < len(pumps):
                with cond:
                    while not queue:
                        cond.wait()
                    item = queue.pop(0)
                if item is None:
                    finished += 1
                else:
                    yield item
            yield language_pb2.RunPluginResponse(exitcode=child.wait())
        finally:
            with self._lock:
                self._plugins.discard(child)

    def stop_plugins(self) -> None:
        """Ends the plugins still running (the engine is stopping us)."""
        with self._lock:
            plugins = list(self._plugins)
        for child in plugins:
            _stop(child)


def _stop(child: Any) -> None:
    """SIGINT (pulumi-policy and the exec shim end cleanly on it), then SIGKILL if it lingers."""
    if child.poll() is not None:
        return
    child.send_signal(signal.SIGINT)
    try:
        child.wait(timeout=5)
    except subprocess.TimeoutExpired:
        child.kill()


def _policy_env(stack: Any) -> dict[str, str]:
    """The variables pulumi-policy reads its stack from (`pulumi.Config`, `get_stack()`, `is_dry_run()`)."""
    if stack is None:
        return {}
    env = {
        "PULUMI_CONFIG": json.dumps(dict(stack.config)),
        "PULUMI_CONFIG_SECRET_KEYS": json.dumps(list(stack.config_secret_keys)),
        "PULUMI_ORGANIZATION": stack.organization,
        "PULUMI_PROJECT": stack.project,
        "PULUMI_STACK": stack.stack,
        "PULUMI_DRY_RUN": "true" if stack.dry_run else "false",
    }
    return {key: value for key, value in env.items() if value}


class _PolicyProxy(analyzer_pb2_grpc.AnalyzerServicer):
    """The engine's Analyzer until the policy pack runs, then a relay to the pack's own Analyzer.

    The engine (3.221+) starts a policy pack through RunPlugin and sends its stack (config, project, stack name,
    dry run) afterwards, in ConfigureStack. pulumi-policy (1.21) ignores that call's config and reads the stack
    from PULUMI_CONFIG/PULUMI_STACK/... at start-up, as the old shim passed it. So, as upstream's language hosts
    do (pulumi/pulumi#21684, `PolicyProxy` in the sdk/v3 module), we answer Handshake and ConfigureStack here,
    start the pack with those variables, hand it the same ConfigureStack (for the stack tags), and forward
    every other call. A call that comes before ConfigureStack (e.g. `pulumi policy publish`) starts the pack
    with no stack.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._configured = threading.Event()
        self._stack: Any = None
        self._attached = threading.Event()
        self._client: Any = None
        self._channel: Any = None
        self._error = "it has not started"
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=_GRPC_OPTIONS)
        analyzer_pb2_grpc.add_AnalyzerServicer_to_server(self, self._server)
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        self._server.start()

    def wait_for_stack(self, active: Any) -> Any:
        """The ConfigureStack request (None if another call came first, or the engine went away)."""
        while not self._configured.wait(0.2):
            if not active():
                return None
        return self._stack

    def attach(self, port: int) -> None:
        self._channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=_GRPC_OPTIONS)
        client = analyzer_pb2_grpc.AnalyzerStub(self._channel)
        if self._stack is not None:
            try:
                client.ConfigureStack(self._stack)
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.UNIMPLEMENTED:  # older packs don't implement it
                    raise
        self._client = client
        self._attached.set()

    def fail(self, message: str) -> None:
        self._error = message
        self._attached.set()

    def stop(self) -> None:
        self.fail("it has stopped")
        self._server.stop(grace=None)
        if self._channel is not None:
            self._channel.close()

    def _set_stack(self, request: Any) -> None:
        with self._lock:
            if not self._configured.is_set():
                self._stack = request
                self._configured.set()

    def _pack(self, context: Any) -> Any:
        self._set_stack(None)
        self._attached.wait()
        if self._client is None:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"policy pack not started: {self._error}")
        return self._client

    def Handshake(self, _request: Any, _context: Any) -> Any:
        return analyzer_pb2.AnalyzerHandshakeResponse()

    def ConfigureStack(self, request: Any, _context: Any) -> Any:
        self._set_stack(request)
        return analyzer_pb2.AnalyzerStackConfigureResponse()

    def Analyze(self, request: Any, context: Any) -> Any:
        return self._pack(context).Analyze(request)

    def AnalyzeStack(self, request: Any, context: Any) -> Any:
        return self._pack(context).AnalyzeStack(request)

    def Remediate(self, request: Any, context: Any) -> Any:
        return self._pack(context).Remediate(request)

    def GetAnalyzerInfo(self, request: Any, context: Any) -> Any:
        return self._pack(context).GetAnalyzerInfo(request)

    def GetPluginInfo(self, request: Any, context: Any) -> Any:
        return self._pack(context).GetPluginInfo(request)

    def Configure(self, request: Any, context: Any) -> Any:
        return self._pack(context).Configure(request)

    def Cancel(self, request: Any, context: Any) -> Any:
        return self._pack(context).Cancel(request)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plugin-version", default="v0.0.0")
    parser.add_argument("engine", nargs="?", default="")
    args, _unknown = parser.parse_known_args()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), options=_GRPC_OPTIONS)
    host = LanguageHost(args.engine, args.plugin_version)
    language_pb2_grpc.add_LanguageRuntimeServicer_to_server(host, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()

    # The engine stops plugins with SIGINT when it is done with them: a normal end, not an error. Plugins we
    # started (policy packs) go with us.
    def stop(*_: Any) -> None:
        host.stop_plugins()
        server.stop(grace=None)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)
    # The engine reads our port from the first line of stdout.
    print(port, flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
