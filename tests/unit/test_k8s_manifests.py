"""serve/k8s/: every manifest is valid against the Kubernetes schemas (kubernetes-validate's
bundled copies, offline, strict: an unknown field fails), the pieces fit together, and they are
what a platform team applies: non-root pods without privileges, requests and limits, network
policies (default deny), pinned images, a hash-checked router install, the model cache on a
claim, the metrics off the client Service, and a disruption budget for every Deployment."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from langchain_specreason.serving.replicas import DEFAULT_POLICY, FAILOVER_FLAGS

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "serve" / "k8s"
KUBERNETES = "1.33.0"
"""The Kubernetes version the manifests are checked against (pinned: schemas differ)."""
FILES = sorted(K8S.glob("*.yaml"))


def _docs(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


DOCS = [doc for path in FILES for doc in _docs(path)]


def _kind(kind: str) -> dict[str, dict]:
    return {doc["metadata"]["name"]: doc for doc in DOCS if doc["kind"] == kind}


def _container(deployment: dict) -> dict:
    return deployment["spec"]["template"]["spec"]["containers"][0]


def _pod(deployment: dict) -> dict:
    return deployment["spec"]["template"]["spec"]


def _containers(deployment: dict) -> list[dict]:
    """The init containers and the containers of the pod."""
    pod = _pod(deployment)
    return [*pod.get("initContainers", []), *pod["containers"]]


def _labels(deployment: dict) -> dict[str, str]:
    return deployment["spec"]["template"]["metadata"]["labels"]


def _selects(selector: dict, labels: dict[str, str]) -> bool:
    """Whether a label selector selects ``labels`` (matchLabels only: any matchExpressions
    count as not selecting, so a test cannot pass on an expression it does not read)."""
    if selector.get("matchExpressions"):
        return False
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def _env(container: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


def _volume(deployment: dict, mount: dict) -> dict:
    (volume,) = [v for v in _pod(deployment)["volumes"] if v["name"] == mount["name"]]
    return volume


def _mount_of(deployment: dict, container: dict, path: str) -> dict:
    """The mount of ``container`` that holds ``path`` (the longest mount path above it)."""
    mounts = [
        m
        for m in container.get("volumeMounts", [])
        if path == m["mountPath"] or path.startswith(m["mountPath"].rstrip("/") + "/")
    ]
    assert mounts, f"{container['name']}: nothing mounted at {path}"
    return max(mounts, key=lambda m: len(m["mountPath"]))


_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def _quantity(value: str | int) -> float:
    """A Kubernetes quantity of the forms used here: 500m, 2, 256Mi, 24Gi."""
    text = str(value)
    if text.endswith("m"):
        return float(text[:-1]) / 1000
    for suffix, factor in _BINARY.items():
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * factor
    return float(text)


def _is_sha256(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)


def _flag(args: list[str], flag: str) -> list[str]:
    """The values after ``flag`` up to the next flag."""
    i = args.index(flag) + 1
    out = []
    while i < len(args) and not args[i].startswith("--"):
        out.append(args[i])
        i += 1
    return out


def test_the_folder_has_the_manifests():
    assert [p.name for p in FILES] == [
        "00-namespace.yaml",
        "05-network-policies.yaml",
        "10-router-rbac.yaml",
        "12-router-requirements.yaml",
        "15-model-cache.yaml",
        "20-draft.yaml",
        "21-base.yaml",
        "30-router-draft.yaml",
        "31-router-base.yaml",
        "50-disruption-budgets.yaml",
    ]
    assert sorted((d["kind"], d["metadata"]["name"]) for d in DOCS) == [
        ("ConfigMap", "specreason-router-requirements"),
        ("Deployment", "specreason-base"),
        ("Deployment", "specreason-base-router"),
        ("Deployment", "specreason-draft"),
        ("Deployment", "specreason-draft-router"),
        ("Namespace", "specreason"),
        ("NetworkPolicy", "default-deny-ingress"),
        ("NetworkPolicy", "specreason-base"),
        ("NetworkPolicy", "specreason-base-router"),
        ("NetworkPolicy", "specreason-draft"),
        ("NetworkPolicy", "specreason-draft-router"),
        ("PersistentVolumeClaim", "specreason-models-base"),
        ("PersistentVolumeClaim", "specreason-models-draft"),
        ("PodDisruptionBudget", "specreason-base"),
        ("PodDisruptionBudget", "specreason-base-router"),
        ("PodDisruptionBudget", "specreason-draft"),
        ("PodDisruptionBudget", "specreason-draft-router"),
        ("Role", "specreason-router-pod-reader"),
        ("RoleBinding", "specreason-router-pod-reader"),
        ("Service", "specreason-base"),
        ("Service", "specreason-base-metrics"),
        ("Service", "specreason-base-pool"),
        ("Service", "specreason-draft"),
        ("Service", "specreason-draft-metrics"),
        ("Service", "specreason-draft-pool"),
        ("ServiceAccount", "specreason-router"),
    ]
    assert {d["metadata"].get("namespace", "specreason") for d in DOCS} == {"specreason"}


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_each_manifest_is_valid_against_the_pinned_kubernetes_schemas(doc):
    assert kubernetes_validate.validate(doc, KUBERNETES, strict=True) == "1.33"


def _broken(mutate) -> dict:
    doc = copy.deepcopy(_kind("Deployment")["specreason-base"])
    mutate(doc)
    return doc


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d["spec"].__setitem__("replicas", "two"),  # wrong type
        lambda d: _container(d).__setitem__("readinesProbe", {}),  # a misspelt field (strict)
        lambda d: d["spec"].pop("selector"),  # a required field
        lambda d: _container(d)["env"][0]["valueFrom"]["secretKeyRef"].pop("key"),
    ],
    ids=["replicas-type", "misspelt-field", "no-selector", "secret-without-key"],
)
def test_a_broken_manifest_fails_validation(mutate):
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(_broken(mutate), KUBERNETES, strict=True)


@pytest.mark.parametrize("role", ["draft", "base"])
def test_each_router_discovers_its_own_pool(role):
    pool = _kind("Deployment")[f"specreason-{role}"]
    router = _kind("Deployment")[f"specreason-{role}-router"]
    args = _container(router)["args"]
    assert "--service-discovery" in args
    selector = dict(item.split("=", 1) for item in _flag(args, "--selector"))
    assert selector == pool["spec"]["template"]["metadata"]["labels"]
    assert selector == pool["spec"]["selector"]["matchLabels"]
    assert _flag(args, "--service-discovery-namespace") == [pool["metadata"]["namespace"]]
    port = _container(pool)["ports"][0]["containerPort"]
    assert _flag(args, "--service-discovery-port") == [str(port)]
    assert _flag(args, "--policy") == [DEFAULT_POLICY]
    # the same failover settings as `specreason serve --replicas`
    shown = args[args.index("--retry-max-retries") :]
    assert shown == list(FAILOVER_FLAGS)
    # the router's Service selects the router, not the pool
    service = _kind("Service")[f"specreason-{role}"]
    assert service["spec"]["selector"] == router["spec"]["selector"]["matchLabels"]
    assert service["spec"]["selector"] != pool["spec"]["selector"]["matchLabels"]


def test_the_routers_may_list_and_watch_pods_of_their_namespace_only():
    (account,) = _kind("ServiceAccount")
    role = _kind("Role")["specreason-router-pod-reader"]
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}
    ]
    binding = _kind("RoleBinding")["specreason-router-pod-reader"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account, "namespace": "specreason"}
    ]
    for name in ("specreason-draft-router", "specreason-base-router"):
        assert (
            _kind("Deployment")[name]["spec"]["template"]["spec"]["serviceAccountName"] == account
        )
    assert not _kind("ClusterRole")  # nothing cluster-wide


def test_every_container_is_ready_on_health_and_servers_take_the_key_from_a_secret():
    for name, deployment in _kind("Deployment").items():
        container = _container(deployment)
        assert deployment["metadata"]["namespace"] == "specreason"
        if name.endswith("-router"):
            # the key guard answers 401 on /health without the key: a TCP probe
            assert container["readinessProbe"]["tcpSocket"]["port"] == "http", name
            assert "VLLM_API_KEY" not in {e["name"] for e in container.get("env", [])}
            continue
        assert container["readinessProbe"]["httpGet"]["path"] == "/health", name
        (key,) = [e for e in container["env"] if e["name"] == "VLLM_API_KEY"]
        assert key["valueFrom"] == {
            "secretKeyRef": {"name": "specreason-api-key", "key": "api-key"}
        }
        assert "--api-key" not in container["args"]


def _configmap_file(deployment: dict, container: dict, path: str) -> str:
    """The text of file ``path`` as ``container`` sees it: a key of the ConfigMap mounted there."""
    mount = _mount_of(deployment, container, path)
    config = _volume(deployment, mount)["configMap"]
    data = _kind("ConfigMap")[config["name"]]["data"]
    return data[path[len(mount["mountPath"]) :].lstrip("/")]


def _requirements(router: dict) -> list[str]:
    """The requirement lines the router's init container installs (``-r`` of its command,
    read from the ConfigMap mounted there), without comments and blank lines."""
    (init,) = _pod(router)["initContainers"]
    command = init["command"]
    text = _configmap_file(router, init, command[command.index("-r") + 1])
    return [
        line.split(" #")[0].strip()
        for line in text.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]


def test_the_router_version_is_the_scale_extras():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    (pinned,) = extras["scale"]
    for name in ("specreason-draft-router", "specreason-base-router"):
        router = _kind("Deployment")[name]
        assert pinned in [line.split()[0] for line in _requirements(router)]


@pytest.mark.parametrize("role", ["draft", "base"])
def test_the_router_installs_only_hash_pinned_wheels(role):
    router = _kind("Deployment")[f"specreason-{role}-router"]
    (init,) = _pod(router)["initContainers"]
    command = init["command"]
    assert command[:2] == ["pip", "install"]
    # nothing resolved at install time: every file named and hashed, no dependency added
    assert {"--require-hashes", "--no-deps", "--only-binary=:all:"} <= set(command)
    assert not [arg for arg in command if "==" in arg]  # no requirement outside the file
    lines = _requirements(router)
    names = []
    for line in lines:
        requirement, *options = line.split()
        name, _, version = requirement.partition("==")
        assert name and version and "," not in version, line  # one exact version
        assert len(options) == 1 and options[0].startswith("--hash=sha256:"), line
        assert _is_sha256(options[0].removeprefix("--hash=sha256:")), line
        names.append(name)
    assert len(names) == len(set(names))
    # vllm-router's own dependencies (its wheel's Requires-Dist) are there too
    assert {
        "vllm-router",
        "setproctitle",
        "aiohttp",
        "orjson",
        "uvicorn",
        "fastapi",
        "requests",
    } <= set(names)


@pytest.mark.parametrize("role", ["draft", "base"])
def test_the_router_checks_the_pools_key_on_every_route(role):
    from langchain_specreason.serving import router_main

    router = _kind("Deployment")[f"specreason-{role}-router"]
    container = _container(router)
    command = container["command"]
    assert command[0] == "python"
    # the script is the package's own guard, byte for byte
    shipped = _configmap_file(router, container, command[1])
    assert shipped == Path(router_main.__file__).read_text()
    urls, rest = router_main.split_validation_urls(command[2:])
    assert rest == []
    # the key is checked against the router's own pool (a Service of its pool's pods)
    (pool,) = [
        svc
        for svc in _kind("Service").values()
        if svc["spec"]["selector"]
        == {"app.kubernetes.io/part-of": "specreason", "app.kubernetes.io/component": role}
    ]
    port = pool["spec"]["ports"][0]["port"]
    assert urls == [f"http://{pool['metadata']['name']}.specreason.svc:{port}/v1/models"]


@pytest.mark.parametrize("role", ["draft", "base"])
def test_the_router_arguments_parse_with_the_routers_own_parser(role):
    from vllm_router.launch_router import parse_router_args

    router = _kind("Deployment")[f"specreason-{role}-router"]
    parsed = parse_router_args(_container(router)["args"])
    parsed._validate_router_args()
    assert parsed.service_discovery and parsed.service_discovery_namespace == "specreason"
    assert parsed.selector == {
        "app.kubernetes.io/part-of": "specreason",
        "app.kubernetes.io/component": role,
    }
    assert (parsed.policy, parsed.port, parsed.service_discovery_port) == (
        "consistent_hash",
        8000,
        8000,
    )


# -- what a platform team applies ---------------------------------------------------------


def test_the_namespace_enforces_the_restricted_pod_security_standard():
    labels = _kind("Namespace")["specreason"]["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"


@pytest.mark.parametrize("name", sorted(_kind("Deployment")))
def test_every_pod_runs_as_non_root_without_privileges(name):
    deployment = _kind("Deployment")[name]
    pod = _pod(deployment)
    context = pod["securityContext"]
    assert context["runAsNonRoot"] is True
    assert context["runAsUser"] > 0 and context["runAsGroup"] > 0
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    for container in _containers(deployment):
        own = container["securityContext"]
        assert own["allowPrivilegeEscalation"] is False, container["name"]
        assert own["capabilities"] == {"drop": ["ALL"]}, container["name"]
        assert own["readOnlyRootFilesystem"] is True, container["name"]
        assert not own.get("privileged"), container["name"]
        assert own.get("runAsUser", context["runAsUser"]) > 0
        assert own.get("runAsNonRoot", True) is True
        # with a read-only root: HOME and /tmp are writable emptyDirs
        assert _env(container)["HOME"] == "/tmp", container["name"]
        tmp = _mount_of(deployment, container, "/tmp")
        assert "emptyDir" in _volume(deployment, tmp), container["name"]
        assert not tmp.get("readOnly")


def test_only_the_routers_get_a_service_account_token():
    for name, deployment in _kind("Deployment").items():
        pod = _pod(deployment)
        if name.endswith("-router"):  # service discovery calls the Kubernetes API
            assert pod["serviceAccountName"] == "specreason-router"
            assert pod.get("automountServiceAccountToken", True) is True
        else:
            assert pod["automountServiceAccountToken"] is False
            assert "serviceAccountName" not in pod


@pytest.mark.parametrize("name", sorted(_kind("Deployment")))
def test_every_container_has_requests_and_limits(name):
    deployment = _kind("Deployment")[name]
    for container in _containers(deployment):
        resources = container["resources"]
        for resource in ("cpu", "memory"):
            request = _quantity(resources["requests"][resource])
            limit = _quantity(resources["limits"][resource])
            assert 0 < request <= limit, (container["name"], resource)
    if not name.endswith("-router"):  # the servers: one GPU each, requested = limited
        resources = _container(deployment)["resources"]
        assert resources["requests"]["nvidia.com/gpu"] == 1
        assert resources["limits"]["nvidia.com/gpu"] == 1
        # memory not overcommitted on a GPU node
        assert resources["requests"]["memory"] == resources["limits"]["memory"]


def _is_pinned(image: str) -> bool:
    """Pinned by digest, or tagged with an explicit release (major.minor.patch, optionally v-
    prefixed and suffixed: v0.11.0, 3.11.14-slim-bookworm); never latest, never untagged."""
    _, at, digest = image.partition("@")
    if at:
        return digest.startswith("sha256:") and _is_sha256(digest.removeprefix("sha256:"))
    _, colon, tag = image.rsplit("/", 1)[-1].partition(":")
    version = tag.removeprefix("v").split("-", 1)[0].split(".")
    return bool(colon) and len(version) == 3 and all(part.isdigit() for part in version)


@pytest.mark.parametrize(
    ("image", "pinned"),
    [
        ("vllm/vllm-openai:v0.11.0", True),
        ("python:3.11.14-slim-bookworm", True),
        ("vllm/vllm-openai@sha256:" + "0" * 64, True),
        ("python:3.11.14-slim@sha256:" + "ab" * 32, True),
        ("vllm/vllm-openai", False),
        ("vllm/vllm-openai:latest", False),
        ("python:3.11-slim", False),  # moves with every 3.11 patch release
        ("python:3-slim", False),
        ("registry.local:5000/vllm-openai", False),  # the colon is the registry's port
        ("vllm/vllm-openai@sha256:abc", False),
    ],
)
def test_the_image_pin_check(image, pinned):
    assert _is_pinned(image) is pinned


def test_every_image_is_pinned():
    for name, deployment in _kind("Deployment").items():
        for container in _containers(deployment):
            assert _is_pinned(container["image"]), (name, container["image"])


def _policies_of(deployment: dict) -> list[dict]:
    """The NetworkPolicies that select the pods of ``deployment`` by their labels (not the
    namespace-wide default)."""
    return [
        policy
        for policy in _kind("NetworkPolicy").values()
        if policy["spec"]["podSelector"]
        and _selects(policy["spec"]["podSelector"], _labels(deployment))
    ]


def _rules(deployment: dict, direction: str) -> list[dict]:
    return [
        rule
        for policy in _policies_of(deployment)
        if direction.capitalize() in policy["spec"]["policyTypes"]
        for rule in policy["spec"].get(direction, [])
    ]


def _ports(rule: dict) -> set[tuple[str, int]]:
    assert rule.get("ports"), f"a rule for every port: {rule}"
    return {(p.get("protocol", "TCP"), p["port"]) for p in rule["ports"]}


def test_ingress_is_denied_by_default():
    defaults = [
        policy for policy in _kind("NetworkPolicy").values() if policy["spec"]["podSelector"] == {}
    ]
    assert defaults, "no namespace-wide policy"
    assert any(
        "Ingress" in p["spec"]["policyTypes"] and not p["spec"].get("ingress") for p in defaults
    )
    # and no policy opens everything again
    for policy in _kind("NetworkPolicy").values():
        for rule in policy["spec"].get("ingress", []):
            assert rule.get("from"), policy["metadata"]["name"]
            assert {} not in rule["from"], policy["metadata"]["name"]


@pytest.mark.parametrize("name", sorted(_kind("Deployment")))
def test_each_deployment_has_its_ingress_and_egress_policy(name):
    deployment = _kind("Deployment")[name]
    policies = _policies_of(deployment)
    assert policies, f"no NetworkPolicy selects the pods of {name}"
    assert _rules(deployment, "ingress")
    assert any("Egress" in p["spec"]["policyTypes"] for p in policies)
    # the pods listen where the policy lets traffic in
    listening = {p["containerPort"] for p in _container(deployment)["ports"]}
    allowed = {port for rule in _rules(deployment, "ingress") for _, port in _ports(rule)}
    assert allowed <= listening


@pytest.mark.parametrize("role", ["draft", "base"])
def test_a_pool_takes_connections_from_its_own_routers_only(role):
    deployments = _kind("Deployment")
    pool = deployments[f"specreason-{role}"]
    router = deployments[f"specreason-{role}-router"]
    other = deployments[f"specreason-{'base' if role == 'draft' else 'draft'}-router"]
    rules = _rules(pool, "ingress")
    assert rules
    for rule in rules:
        assert _ports(rule) == {("TCP", 8000)}
        for peer in rule["from"]:
            assert set(peer) == {"podSelector"}, peer  # same namespace, by pod label
            assert _selects(peer["podSelector"], _labels(router))
            assert not _selects(peer["podSelector"], _labels(other))
            assert not _selects(peer["podSelector"], {"specreason.io/client": "true"})


@pytest.mark.parametrize("role", ["draft", "base"])
def test_a_router_takes_clients_on_its_api_and_monitoring_on_its_metrics(role):
    router = _kind("Deployment")[f"specreason-{role}-router"]
    args = _container(router)["args"]
    metrics = int(_flag(args, "--prometheus-port")[0])
    api = int(_flag(args, "--port")[0])
    client = {"specreason.io/client": "true"}
    monitoring = {"specreason.io/monitoring": "true"}
    seen = set()
    for rule in _rules(router, "ingress"):
        ports = {port for _, port in _ports(rule)}
        seen |= ports
        for peer in rule["from"]:
            assert "ipBlock" not in peer
            namespaces = peer.get("namespaceSelector")
            pods = peer.get("podSelector")
            if ports == {metrics}:  # monitoring namespaces only
                assert namespaces == {"matchLabels": monitoring} and pods is None, peer
            else:
                assert ports == {api}, rule
                # a labelled client namespace, or labelled client pods of this namespace
                selector = namespaces if namespaces is not None else pods
                assert selector == {"matchLabels": client}, peer
    assert seen == {api, metrics}


@pytest.mark.parametrize("role", ["draft", "base"])
def test_a_router_reaches_its_pool_dns_and_the_kubernetes_api(role):
    pool = _kind("Deployment")[f"specreason-{role}"]
    router = _kind("Deployment")[f"specreason-{role}-router"]
    rules = _rules(router, "egress")
    to_pool = [
        rule
        for rule in rules
        if any(
            set(peer) == {"podSelector"} and _selects(peer["podSelector"], _labels(pool))
            for peer in rule.get("to", [])
        )
    ]
    assert to_pool and all(_ports(rule) == {("TCP", 8000)} for rule in to_pool)
    ports = set().union(*(_ports(rule) for rule in rules))
    assert {("UDP", 53), ("TCP", 53), ("TCP", 443), ("TCP", 6443)} <= ports


@pytest.mark.parametrize("role", ["draft", "base"])
def test_a_pool_reaches_dns_and_the_model_download_only(role):
    pool = _kind("Deployment")[f"specreason-{role}"]
    rules = _rules(pool, "egress")
    assert rules
    assert set().union(*(_ports(rule) for rule in rules)) == {
        ("UDP", 53),
        ("TCP", 53),
        ("TCP", 443),
    }


@pytest.mark.parametrize("role", ["draft", "base"])
def test_the_metrics_port_is_not_on_the_client_service(role):
    router = _kind("Deployment")[f"specreason-{role}-router"]
    metrics = int(_flag(_container(router)["args"], "--prometheus-port")[0])
    services = _kind("Service")
    client = services[f"specreason-{role}"]
    assert [(p["port"], p["targetPort"]) for p in client["spec"]["ports"]] == [(8000, "http")]
    scraped = services[f"specreason-{role}-metrics"]
    assert scraped["spec"]["selector"] == router["spec"]["selector"]["matchLabels"]
    (port,) = scraped["spec"]["ports"]
    named = {p["name"]: p["containerPort"] for p in _container(router)["ports"]}
    assert named[port["targetPort"]] == metrics


def _hub_cache(container: dict) -> str:
    """Where huggingface_hub keeps its downloads in ``container`` (HF_HUB_CACHE, else
    $HF_HOME/hub, else ~/.cache/huggingface/hub)."""
    env = _env(container)
    if "HF_HUB_CACHE" in env:
        return env["HF_HUB_CACHE"]
    home = env.get("HF_HOME", env.get("HOME", "/root") + "/.cache/huggingface")
    return home + "/hub"


@pytest.mark.parametrize("role", ["draft", "base"])
def test_the_model_cache_is_a_claim_filled_before_the_server_starts(role):
    pool = _kind("Deployment")[f"specreason-{role}"]
    server = _container(pool)
    model = server["args"][0]
    cache = _hub_cache(server)
    # the server reads the model from a PersistentVolumeClaim, read-only, offline
    mount = _mount_of(pool, server, cache)
    assert mount.get("readOnly") is True
    claim = _volume(pool, mount)["persistentVolumeClaim"]["claimName"]
    pvc = _kind("PersistentVolumeClaim")[claim]
    # all replicas share the claim: it must be mountable by several nodes
    assert pool["spec"]["replicas"] > 1 and pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    assert _env(server)["HF_HUB_OFFLINE"] == "1"
    # an init container downloads the served model into the same cache on that claim
    (init,) = _pod(pool)["initContainers"]
    assert _hub_cache(init) == cache
    init_mount = _mount_of(pool, init, cache)
    assert init_mount["name"] == mount["name"] and not init_mount.get("readOnly")
    script = " ".join(init["command"])
    assert "snapshot_download" in script and f'"{model}"' in script
    assert "HF_HUB_OFFLINE" not in _env(init)
    # and no emptyDir holds a model: none is mounted where a cache is
    for container in _containers(pool):
        volume = _volume(pool, _mount_of(pool, container, _hub_cache(container)))
        assert "emptyDir" not in volume, container["name"]


@pytest.mark.parametrize("name", sorted(_kind("Deployment")))
def test_each_deployment_has_a_disruption_budget_that_lets_a_drain_through(name):
    deployment = _kind("Deployment")[name]
    replicas = deployment["spec"]["replicas"]
    (budget,) = [
        pdb
        for pdb in _kind("PodDisruptionBudget").values()
        if _selects(pdb["spec"]["selector"], _labels(deployment))
    ]
    spec = budget["spec"]
    # one pod may go at a time, and one always stays
    assert replicas >= 2, "one replica: every drain is an outage (or blocked by the budget)"
    if "minAvailable" in spec:
        assert 1 <= spec["minAvailable"] < replicas
    else:
        assert 1 <= spec["maxUnavailable"] < replicas
