"""The Python language host (`pulumi-language-python`) for a CLI built from Go modules.

Upstream's host lives in its own Go module (`sdk/python/cmd/pulumi-language-python/v3`), which has no tags
and which the module proxy reachable here refuses at every version, so it cannot be built from modules.
This host speaks the same gRPC protocol (`pulumirpc.LanguageRuntime`, from the pulumi SDK's generated
stubs) and runs programs exactly as upstream does: through upstream's own `pulumi-language-python-exec`
shim, taken from the sdk/v3 module at build time, inside the virtualenv that Pulumi.yaml names.

Implemented: Handshake, GetPluginInfo, GetRequiredPackages/Plugins (from the `pulumi-plugin.json` files of
the installed distributions, as upstream reads them), Run, RunPlugin (policy packs), InstallDependencies,
About, GetProgramDependencies, Cancel. Code generation RPCs are not (they need the Go codegen).
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
from pulumi.runtime.proto import language_pb2, language_pb2_grpc, plugin_pb2

HERE = Path(__file__).resolve().parent
EXEC_SHIM = HERE / "pulumi-language-python-exec"
# Exit code with which the exec shim says "the error was already shown to the user".
BAIL_EXIT_CODE = 32

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
        self._lock = threading.Lock()

    # --- lifecycle -------------------------------------------------------------------------------
    def Handshake(self, request: Any, _context: Any) -> Any:
        self.engine_address = request.engine_address or self.engine_address
        return language_pb2.LanguageHandshakeResponse()

    def GetPluginInfo(self, _request: Any, _context: Any) -> Any:
        return plugin_pb2.PluginInfo(version=self.version)

    def Cancel(self, _request: Any, _context: Any) -> Any:
        with self._lock:
            for child in self._children:
                child.send_signal(signal.SIGINT)
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

    def RunPlugin(self, request: Any, _context: Any) -> Any:
        """Runs a Python plugin (a policy pack since CLI 3.221) and streams its output back."""
        python, env = _python_for(request.info)
        env.update(item.split("=", 1) for item in request.env if "=" in item)
        program = request.info.entry_point or request.program or "."
        argv = (
            [python, "-u", "-m", "pulumi_policy.main", program, *request.args]
            if request.kind == "analyzer"
            else [python, "-u", program, *request.args]
        )
        child = subprocess.Popen(  # noqa: S603
            argv, env=env, cwd=request.pwd or None, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        with self._lock:
            self._children.add(child)
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
                self._children.discard(child)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plugin-version", default="v0.0.0")
    parser.add_argument("engine", nargs="?", default="")
    args, _unknown = parser.parse_known_args()
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=8),
        options=[("grpc.max_receive_message_length", 400 * 1024 * 1024)],
    )
    language_pb2_grpc.add_LanguageRuntimeServicer_to_server(LanguageHost(args.engine, args.plugin_version), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    # The engine stops plugins with SIGINT when it is done with them: a normal end, not an error.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: server.stop(grace=None))
    # The engine reads our port from the first line of stdout.
    print(port, flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
