"""deploy/k8s/: the Kubernetes manifests, validated offline against the Kubernetes schemas and held
to docker-compose.yml, which stays the one source of the command lines, ports, images and checks.

No cluster runs here (nor in CI), so nothing was applied. Each variant (base: compose's cpu
profile; gpu: its gpu profile) is built from its kustomization.yaml by `_build`, which does the
little of kustomize these files use, and each resource is validated strictly (an unknown key is
an error) against the schemas kubernetes-validate ships for the oldest and newest Kubernetes it
knows, without network. Then the variants are compared with their compose profile: the same
commands (parsed by the real parsers into valid settings), environment, images, ports, health
checks and mount points, and the env server's and the arena's keys read from a Secret where
compose mounts its secret; and checked for what only Kubernetes has: a headless Service over the
planner replicas, an autoscaler on them, the arena reaching the env server through its Service,
the Dockerfile's user, GPUs in the gpu variant only, and a Secret that no file here holds (the
command that makes it is documented).
Where kubectl is installed, its own kustomize builds the same resources (offline too).
"""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
import urllib.parse
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from rtplan.arena.__main__ import _parser as arena_parser
from rtplan.arena._routes_health import router as arena_health_routes
from rtplan.arena.envs import EnvServers
from rtplan.arena.settings import ArenaSettings
from rtplan.cli import build_parser as rtplan_parser
from rtplan.commands.health import TIMEOUT_S
from rtplan.planner_service.__main__ import build_parser as planner_parser
from rtplan.planner_service.settings import PlannerServiceSettings
from rtplan.server.__main__ import _parser as server_parser
from rtplan.server._routes_sessions import router as server_routes
from rtplan.server.settings import Settings
from support import (
    compose_file,
    compose_profile,
    compose_seconds,
    compose_services,
    gpu_ids,
    service_settings,
)

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
#: Each variant (a folder of deploy/k8s/ to `kubectl apply -k`) and the compose profile it mirrors.
VARIANTS = {"base": "cpu", "gpu": "gpu"}
#: The oldest and newest Kubernetes whose schemas kubernetes-validate (1.37.0) ships.
SCHEMA_VERSIONS = ("1.25", "1.37")
PLANNER, ENV_SERVER, ARENA = "rtplan-planner", "rtplan-env-server", "rtplan-arena"
#: Each Deployment and the command of the compose service it mirrors.
COMPOSE_KIND = {PLANNER: "planner-service", ENV_SERVER: "env-server", ARENA: "arena"}
GPU = "nvidia.com/gpu"
#: The Secret of the env server's API keys (made with kubectl, never committed) and its key.
KEYS_SECRET, KEYS_ITEM = "rtplan-api-keys", "api_keys"

Resources = dict[tuple[str, str], dict]


# Building a variant: the few kustomize features its files use ---------------------------------


def _pointer_step(node: Any, token: str) -> Any:
    return node[int(token)] if isinstance(node, list) else node[token]


def _json_patch(doc: dict, ops: list[dict]) -> None:
    """Applies RFC 6902 operations `test`, `add` and `replace` to `doc` in place."""
    for op in ops:
        *parents, last = [
            t.replace("~1", "/").replace("~0", "~") for t in op["path"].split("/")[1:]
        ]
        node = doc
        for token in parents:
            node = _pointer_step(node, token)
        if op["op"] == "test":
            assert _pointer_step(node, last) == op["value"], op
        elif op["op"] == "add" and isinstance(node, list):
            node.insert(len(node) if last == "-" else int(last), op["value"])
        elif op["op"] in ("add", "replace"):
            if op["op"] == "replace":
                _pointer_step(node, last)  # must exist
            node[int(last) if isinstance(node, list) else last] = op["value"]
        else:
            raise AssertionError(f"unsupported JSON patch operation: {op}")


def _containers(docs: list[dict]) -> list[dict]:
    return [
        c
        for d in docs
        if d["kind"] == "Deployment"
        for c in d["spec"]["template"]["spec"]["containers"]
    ]


def _build(folder: Path, read: set[Path] | None = None) -> list[dict]:
    """The resources `kubectl apply -k folder` applies, for what these kustomizations use
    (resources, images' new tags, JSON patches on a kind and name); any other field fails.
    Adds every file read to `read`."""
    read = set() if read is None else read
    path = folder / "kustomization.yaml"
    read.add(path)
    k = yaml.safe_load(path.read_text())
    assert k.pop("apiVersion") == "kustomize.config.k8s.io/v1beta1"
    assert k.pop("kind") == "Kustomization"
    assert set(k) <= {"resources", "images", "patches"}, set(k)
    docs: list[dict] = []
    for entry in k.get("resources", []):
        source = (folder / entry).resolve()
        if source.is_dir():
            docs += _build(source, read)
        else:
            read.add(source)
            docs += [d for d in yaml.safe_load_all(source.read_text()) if d]
    for image in k.get("images", []):
        assert set(image) == {"name", "newTag"}, image
        for c in _containers(docs):
            if c["image"].partition(":")[0] == image["name"]:
                c["image"] = f"{image['name']}:{image['newTag']}"
    for patch in k.get("patches", []):
        target = patch["target"]
        assert set(target) == {"kind", "name"}, target
        (doc,) = [
            d
            for d in docs
            if (d["kind"], d["metadata"]["name"]) == (target["kind"], target["name"])
        ]
        _json_patch(doc, yaml.safe_load(patch["patch"]))
    return docs


def _resources(variant: str) -> Resources:
    docs = _build(K8S / variant)
    out = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    assert len(out) == len(docs), "two resources share a kind and name"
    return out


def _pod(resources: Resources, name: str) -> tuple[dict, dict]:
    """The Deployment `name`'s pod spec and its one container."""
    pod = resources["Deployment", name]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return pod, container


def _env(container: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", ())}


def _port(container: dict, name: str) -> int:
    (port,) = [p["containerPort"] for p in container["ports"] if p["name"] == name]
    return port


def _service_port(resources: Resources, name: str, container: dict) -> dict[str, int]:
    """The Service `name`'s ports by name; each targets the container's port of that name."""
    ports = {}
    for p in resources["Service", name]["spec"]["ports"]:
        assert p["targetPort"] == p["name"] and _port(container, p["name"])
        ports[p["name"]] = p["port"]
    return ports


# Schemas ---------------------------------------------------------------------------------------


def test_every_file_under_deploy_k8s_is_part_of_a_variant():
    read: set[Path] = set()
    for variant in VARIANTS:
        _build(K8S / variant, read)
    assert read == set(K8S.rglob("*.yaml")) | set(K8S.rglob("*.yml"))


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_resource_validates_against_the_kubernetes_schemas(variant):
    resources = _resources(variant)
    assert set(resources) == {
        ("Deployment", PLANNER),
        ("Service", PLANNER),
        ("HorizontalPodAutoscaler", PLANNER),
        ("PodDisruptionBudget", PLANNER),
        ("Deployment", ENV_SERVER),
        ("Service", ENV_SERVER),
        ("PersistentVolumeClaim", "rtplan-replays"),
        ("PersistentVolumeClaim", "rtplan-results"),
        ("Deployment", ARENA),
        ("Service", ARENA),
        ("PersistentVolumeClaim", "rtplan-arena"),
    }
    for version in SCHEMA_VERSIONS:
        for doc in resources.values():
            # Raises on a mismatch, and on a kind or apiVersion it has no schema for.
            assert kubernetes_validate.validate(doc, version, strict=True) == version


_DELETE = object()


def _set(path: str, value: Any):
    """A mutation: the field at the dotted `path` (list items by index) set to `value`, or
    deleted for `_DELETE`."""

    def mutate(doc: dict) -> None:
        *parents, last = path.split(".")
        node = doc
        for key in parents:
            node = _pointer_step(node, key)
        if value is _DELETE:
            del node[last]
        else:
            node[int(last) if isinstance(node, list) else last] = value

    return mutate


_CONTAINER = "spec.template.spec.containers.0"


@pytest.mark.parametrize(
    ("kind", "mutate", "where"),
    [
        ("Deployment", _set("spec.replicas", "two"), "spec.replicas"),
        (
            "Deployment",
            _set(f"{_CONTAINER}.ports.0.containerPort", "50051"),
            f"{_CONTAINER}.ports.0.containerPort",
        ),
        (
            "Deployment",
            _set(f"{_CONTAINER}.readinessProbe.periodSecond", 10),  # misspelt: strict refuses
            f"{_CONTAINER}.readinessProbe",
        ),
        ("Deployment", _set(f"{_CONTAINER}.name", _DELETE), _CONTAINER),
        ("Service", _set("spec.ports.0.port", [50051]), "spec.ports.0.port"),
        (
            "HorizontalPodAutoscaler",
            _set("spec.metrics.0.resource.target.averageUtilization", "70%"),
            "spec.metrics.0.resource.target.averageUtilization",
        ),
    ],
    ids=["replicas", "port-type", "unknown-key", "no-name", "port-list", "utilisation"],
)
def test_the_validator_refuses_a_broken_manifest(kind, mutate, where):
    """... so the test above can fail: one wrong field in a valid resource, refused at its path."""
    doc = copy.deepcopy(_resources("base")[kind, PLANNER])
    kubernetes_validate.validate(doc, SCHEMA_VERSIONS[-1], strict=True)
    mutate(doc)
    with pytest.raises(kubernetes_validate.ValidationError) as caught:
        kubernetes_validate.validate(doc, SCHEMA_VERSIONS[-1], strict=True)
    assert ".".join(map(str, caught.value.path)) == where, caught.value.message


# The same services as compose --------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_variants_run_composes_commands_images_environment_and_ports(variant, monkeypatch):
    resources = _resources(variant)
    planner_c, env_c = compose_profile(VARIANTS[variant])
    _, planner = _pod(resources, PLANNER)
    _, env = _pod(resources, ENV_SERVER)
    assert planner["image"] == planner_c["image"] and env["image"] == env_c["image"]
    assert _env(planner) == {k: str(v) for k, v in planner_c["environment"].items()}
    assert _env(env) == {k: str(v) for k, v in env_c["environment"].items()}

    # The planner's command is compose's; the env server's too, but for the planner's address.
    assert planner["command"] == planner_c["command"]
    flag = "--planner-address="
    assert [a for a in env["command"] if not a.startswith(flag)] == [
        a for a in env_c["command"] if not a.startswith(flag)
    ]

    as_service = {"command": planner["command"], "environment": _env(planner)}
    p = service_settings(PlannerServiceSettings, planner_parser, as_service, monkeypatch)
    assert p.device == {"gpu": "cuda:0", "cpu": "cpu"}[VARIANTS[variant]]
    as_service = {"command": env["command"], "environment": _env(env)}
    e = service_settings(Settings, server_parser, as_service, monkeypatch)
    assert p.host == e.host == "0.0.0.0"
    assert _port(planner, "grpc") == p.port
    assert _port(env, "http") == e.http_port and _port(env, "grpc") == e.grpc_port
    assert _service_port(resources, ENV_SERVER, env) == {"http": e.http_port, "grpc": e.grpc_port}
    # The env server finds every planner replica through the headless Service's DNS name.
    (planner_port,) = _service_port(resources, PLANNER, planner).values()
    assert e.planner_address == f"dns:///{PLANNER}:{planner_port}" and planner_port == p.port

    # The arena's command is compose's but for --env: the env server by its Service's name and
    # HTTP port (compose names its network alias, and the Env API the host publishes).
    _, arena = _pod(resources, ARENA)
    arena_c = compose_services(VARIANTS[variant])["arena"]
    assert arena["image"] == arena_c["image"]
    assert _env(arena) == {} and "environment" not in arena_c
    assert [a for a in arena["command"] if not a.startswith("--env=")] == [
        a for a in arena_c["command"] if not a.startswith("--env=")
    ]
    a = service_settings(ArenaSettings, arena_parser, {"command": arena["command"]}, monkeypatch)
    assert a.host == "0.0.0.0" and _port(arena, "http") == a.port
    assert _service_port(resources, ARENA, arena) == {"http": a.port}
    # One URL per env server (the arena places each episode on one and reads it back there).
    (server,) = EnvServers(a.env.split(",")).servers
    url = urllib.parse.urlsplit(server.url)
    assert (url.hostname, url.port) == (ENV_SERVER, e.http_port) and server.public_grpc is None


def _probe_seconds(probe: dict) -> tuple[int, int, int]:
    return probe["periodSeconds"], probe["timeoutSeconds"], probe["failureThreshold"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_probes_are_composes_health_checks(variant, monkeypatch):
    """Startup waits as long as compose's start_period, readiness checks as often and as
    patiently as its health check, and each asks what `rtplan health` asks."""
    resources = _resources(variant)
    for name, kind in COMPOSE_KIND.items():
        _, container = _pod(resources, name)
        check = compose_services(VARIANTS[variant])[kind]["healthcheck"]
        startup = container["startupProbe"]
        ready = container["readinessProbe"]
        live = container["livenessProbe"]
        assert _probe_seconds(ready) == (
            compose_seconds(check["interval"]),
            compose_seconds(check["timeout"]),
            check["retries"],
        )
        assert startup["periodSeconds"] * startup["failureThreshold"] == compose_seconds(
            check["start_period"]
        )
        for probe in (startup, ready, live):
            # The kubelet kills a probe at its timeout: `rtplan health`'s own ends first.
            assert probe["timeoutSeconds"] > TIMEOUT_S
            if name == PLANNER:
                # Exactly compose's command, which asks the port the planner binds.
                assert probe["exec"]["command"] == check["test"][1:]
                args = rtplan_parser().parse_args(probe["exec"]["command"][1:])
                assert args.command == "health"
                assert args.planner == f"127.0.0.1:{_port(container, 'grpc')}"
            else:
                # The route `rtplan health --env` (--arena) asks, on the port named http.
                which = {ENV_SERVER: "--env", ARENA: "--arena"}[name]
                assert check["test"][1:4] == ["rtplan", "health", which]
                assert probe["httpGet"] == {"path": "/healthz", "port": "http"}
        # A live service is never restarted sooner than it would be marked unready.
        assert live["periodSeconds"] * live["failureThreshold"] >= (
            ready["periodSeconds"] * ready["failureThreshold"]
        )
    for routes in (server_routes, arena_health_routes):
        assert any(r.path == "/healthz" and "GET" in r.methods for r in routes.routes), routes


# What only Kubernetes has --------------------------------------------------------------------


def _labels(resources: Resources, name: str) -> dict:
    deployment = resources["Deployment", name]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"] == {"matchLabels": labels}
    return labels


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_planner_is_replicated_behind_a_headless_service_and_autoscaled(variant):
    resources = _resources(variant)
    planner = _labels(resources, PLANNER)
    env = _labels(resources, ENV_SERVER)
    arena = _labels(resources, ARENA)
    for one, other in ((planner, env), (planner, arena), (env, arena)):
        assert not (one.items() >= other.items() or other.items() >= one.items())
    service = resources["Service", PLANNER]["spec"]
    assert service["clusterIP"] == "None"  # headless: DNS answers every ready replica
    assert service["selector"] == planner
    for name, labels in ((ENV_SERVER, env), (ARENA, arena)):
        assert resources["Service", name]["spec"]["selector"] == labels
        assert "clusterIP" not in resources["Service", name]["spec"]

    replicas = resources["Deployment", PLANNER]["spec"]["replicas"]
    hpa = resources["HorizontalPodAutoscaler", PLANNER]
    assert hpa["apiVersion"] == "autoscaling/v2" and replicas == 2
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["apiVersion"], target["kind"], target["name"]) == (
        "apps/v1",
        "Deployment",
        PLANNER,
    )
    assert hpa["spec"]["minReplicas"] == replicas < hpa["spec"]["maxReplicas"]
    (metric,) = hpa["spec"]["metrics"]
    assert metric["resource"]["name"] == "cpu"
    # Utilisation is usage over the request: every planner pod has one.
    _, container = _pod(resources, PLANNER)
    assert container["resources"]["requests"]["cpu"]
    pdb = resources["PodDisruptionBudget", PLANNER]["spec"]
    assert pdb["selector"] == {"matchLabels": planner} and 0 < pdb["minAvailable"] < replicas
    # The env server holds its sessions in memory, the arena its SQLite file on a ReadWriteOnce
    # volume: one replica each, the old pod gone before the new one starts.
    for name in (ENV_SERVER, ARENA):
        assert resources["Deployment", name]["spec"]["replicas"] == 1
        assert resources["Deployment", name]["spec"]["strategy"] == {"type": "Recreate"}


@pytest.mark.parametrize("variant", VARIANTS)
def test_pods_run_as_the_images_user_and_mount_composes_volumes(variant, monkeypatch):
    dockerfile = (ROOT / "Dockerfile").read_text()
    uid = int(re.search(r"useradd\b.*--uid (\d+)", dockerfile).group(1))
    made = set(re.search(r"mkdir -p ([^&]+)", dockerfile).group(1).split())
    resources = _resources(variant)
    compose_volumes = set(compose_file()["volumes"])
    for name, kind in COMPOSE_KIND.items():
        pod, container = _pod(resources, name)
        security = pod["securityContext"]
        assert security["runAsNonRoot"] is True
        assert security["runAsUser"] == security["runAsGroup"] == security["fsGroup"] == uid
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
        # Every compose mount point, each a folder the image made for its user (the keys'
        # Secret aside: compose mounts it as a secret, test_the_env_server_reads_its_keys...).
        compose = compose_services(VARIANTS[variant])[kind]
        want = {m.split(":")[1]: m.split(":")[0] for m in compose["volumes"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = {
            m["mountPath"]: m["name"]
            for m in container["volumeMounts"]
            if "secret" not in volumes[m["name"]]
        }
        assert mounts == want and set(mounts) <= made and set(want.values()) <= compose_volumes
        for mount, volume in want.items():
            claim = volumes[volume].get("persistentVolumeClaim")
            if claim is not None:  # replays, results and the arena's database outlive the pod
                assert ("PersistentVolumeClaim", claim["claimName"]) in resources
            else:  # the compile cache: one per pod (see planner.yaml)
                assert volumes[volume] == {"name": volume, "emptyDir": {}}, mount
    # ... and the env server's claims where its settings put replays and results.
    pod, env = _pod(resources, ENV_SERVER)
    as_service = {"command": env["command"], "environment": _env(env)}
    e = service_settings(Settings, server_parser, as_service, monkeypatch)
    claims = {
        v["name"]: v["persistentVolumeClaim"]["claimName"]
        for v in pod["volumes"]
        if "persistentVolumeClaim" in v
    }
    at = {m["mountPath"]: claims.get(m["name"]) for m in env["volumeMounts"]}
    assert at[str(e.record_dir)] == "rtplan-replays"
    assert at[str(e.results_dir)] == "rtplan-results"
    # ... and the arena's where its SQLite database is.
    pod, arena = _pod(resources, ARENA)
    a = service_settings(ArenaSettings, arena_parser, {"command": arena["command"]}, monkeypatch)
    (claim,) = [v for v in pod["volumes"] if "persistentVolumeClaim" in v]
    (mount,) = [m for m in arena["volumeMounts"] if m["name"] == claim["name"]]
    database = Path(a.database.removeprefix("sqlite:///"))
    assert a.database.startswith("sqlite:////") and mount["mountPath"] == str(database.parent)
    assert claim["persistentVolumeClaim"]["claimName"] == "rtplan-arena"


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_env_server_reads_its_keys_from_a_secret_that_no_file_holds(variant, monkeypatch):
    """The env server binds 0.0.0.0, so it needs a key: its `--api-key-file` is the file the
    Secret rtplan-api-keys puts where compose mounts its secret, in a folder mount (a subPath
    would never see the Secret's updates, so keys could not rotate without a restart), read
    by the pod's group and nobody else. The arena mounts it the same way, as its admin keys and
    the key it presents to the env server. The Secret is no resource here (no key is
    committed): the manifest and docs/services.md give the `kubectl create secret` that makes
    it."""
    resources = _resources(variant)
    pod, env = _pod(resources, ENV_SERVER)
    as_service = {"command": env["command"], "environment": _env(env)}
    e = service_settings(Settings, server_parser, as_service, monkeypatch)
    assert e.host == "0.0.0.0" and not e.open and e.api_key_file is not None
    _, compose_env = compose_profile(VARIANTS[variant])
    (secret,) = compose_env["secrets"]
    assert str(e.api_key_file) == secret["target"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    (mount,) = [m for m in env["volumeMounts"] if "secret" in volumes[m["name"]]]
    assert mount["mountPath"] == str(e.api_key_file.parent) and mount["readOnly"] is True
    assert "subPath" not in mount
    source = volumes[mount["name"]]["secret"]
    assert source["secretName"] == KEYS_SECRET
    assert source["items"] == [{"key": KEYS_ITEM, "path": e.api_key_file.name}]
    assert source["defaultMode"] == 0o440 and pod["securityContext"]["fsGroup"]
    # The arena: the same file for both of its keys, mounted the same way.
    arena_pod, arena = _pod(resources, ARENA)
    a = service_settings(ArenaSettings, arena_parser, {"command": arena["command"]}, monkeypatch)
    assert a.host == "0.0.0.0" and not a.open
    assert a.api_key_file == a.env_key_file == e.api_key_file
    arena_volumes = {v["name"]: v for v in arena_pod["volumes"]}
    (arena_mount,) = [m for m in arena["volumeMounts"] if "secret" in arena_volumes[m["name"]]]
    assert arena_mount == mount and arena_volumes[mount["name"]] == volumes[mount["name"]]
    # The planner holds none, and no file here holds a Secret.
    _, planner = _pod(resources, PLANNER)
    assert all(
        "secret" not in v
        for v in resources["Deployment", PLANNER]["spec"]["template"]["spec"]["volumes"]
    )
    assert "--api-key-file" not in str(planner["command"])
    assert not [key for key in resources if key[0] == "Secret"]
    make = f"kubectl create secret generic {KEYS_SECRET} --from-file={KEYS_ITEM}="
    manifest = (K8S / "base" / "env-server.yaml").read_text()
    docs = " ".join((ROOT / "docs" / "services.md").read_text().split())
    assert make in manifest and make in docs


@pytest.mark.parametrize("variant", VARIANTS)
def test_only_the_gpu_variant_requests_gpus_one_a_pod(variant):
    resources = _resources(variant)
    for name in (PLANNER, ENV_SERVER, ARENA):
        _, container = _pod(resources, name)
        requests, limits = container["resources"]["requests"], container["resources"]["limits"]
        assert requests["cpu"] and requests["memory"] and limits["memory"]
        assert GPU not in requests  # an extended resource's request is its limit
        # The arena imports no JAX: the variant's image, no GPU (as in compose).
        want = 1 if variant == "gpu" and name != ARENA else None
        assert limits.get(GPU) == want, name
    # As compose's profile: there, each service of the gpu profile has a GPU of its own.
    for compose in compose_profile(VARIANTS[variant]):
        assert len(gpu_ids(compose)) == (1 if variant == "gpu" else 0)


def test_the_gpu_overlay_changes_only_images_device_and_gpus():
    base, gpu = _resources("base"), _resources("gpu")
    assert set(base) == set(gpu)
    for key in base:
        if key[0] != "Deployment":
            assert gpu[key] == base[key], key
            continue
        b_rest, g_rest = copy.deepcopy(base[key]), copy.deepcopy(gpu[key])
        for doc in (b_rest, g_rest):
            (c,) = doc["spec"]["template"]["spec"]["containers"]
            for field in ("image", "env"):
                c.pop(field, None)
            c["resources"]["limits"].pop(GPU, None)
        assert g_rest == b_rest, key


# kubectl's own kustomize, where installed --------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_kubectl_kustomize_builds_the_same_resources(variant):
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    done = subprocess.run(
        [kubectl, "kustomize", str(K8S / variant)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    docs = [d for d in yaml.safe_load_all(done.stdout) if d]
    built = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    assert built == _resources(variant)
