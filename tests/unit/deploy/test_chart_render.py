"""The chart rendered by the real helm: lint, offline validation of every manifest against the Kubernetes
schemas, and what each object must say (one Deployment per service from one template, probes, env, Services,
PDBs, HPAs, partitions, secrets, the provisioning hook)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from tests.unit.deploy.helmrun import (
    CHART,
    KUBE_VERSION,
    PRODUCTION,
    container,
    env_of,
    find,
    full,
    helm,
    one,
    render,
    template,
    values,
)

DEFAULTS = CHART / "values.yaml"
VALUES_FILES = {"default": (), "production": (PRODUCTION,)}
WORKERS = ("frontier", "fetcher", "parser", "dedup", "recrawl", "warc")
#: Custom resources: not in the Kubernetes schemas; their shape is checked by test_service_monitor_*.
CRD_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor")}
SHARED = {"STREAMCRAWL_KAFKA_BOOTSTRAP", "STREAMCRAWL_CASSANDRA_HOSTS", "STREAMCRAWL_CASSANDRA_PORT",
          "STREAMCRAWL_CASSANDRA_KEYSPACE", "STREAMCRAWL_CASSANDRA_REPLICATION", "STREAMCRAWL_S3_ENDPOINT",
          "STREAMCRAWL_S3_SECURE", "STREAMCRAWL_S3_REGION", "STREAMCRAWL_S3_BUCKET", "STREAMCRAWL_MIN_DELAY_S",
          "STREAMCRAWL_DELAY_FACTOR", "STREAMCRAWL_CRAWL_DELAY_CAP_S", "STREAMCRAWL_BACKOFF_BASE_S",
          "STREAMCRAWL_BACKOFF_CAP_S", "STREAMCRAWL_PARTITIONS",
          "STREAMCRAWL_KAFKA_REPLICATION_FACTOR", "STREAMCRAWL_KAFKA_MIN_INSYNC_REPLICAS",
          "STREAMCRAWL_CASSANDRA_SERIAL_CONSISTENCY",
          *(f"STREAMCRAWL_CASSANDRA_CONSISTENCY_{c}" for c in ("LEASES", "CLAIMS", "STATE", "CONTROL", "STATS"))}


@pytest.fixture(scope="module", params=sorted(VALUES_FILES))
def rendered(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]]]:
    return request.param, render(*VALUES_FILES[request.param])


@pytest.mark.parametrize("name", sorted(VALUES_FILES))
def test_helm_lint_strict(name: str) -> None:
    args = ["lint", "--strict", str(CHART)]
    for f in VALUES_FILES[name]:
        args += ["-f", str(f)]
    res = helm(*args)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "0 chart(s) failed" in res.stdout


def test_every_manifest_validates_against_the_kubernetes_schemas(rendered) -> None:
    _, docs = rendered
    assert len(docs) >= 15
    for doc in docs:
        if (doc["apiVersion"], doc["kind"]) in CRD_KINDS:
            continue
        kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)  # raises on any violation


def test_the_validator_catches_a_bad_manifest(rendered) -> None:
    """The offline validation above would notice a broken manifest (a check that cannot fail proves nothing)."""
    _, docs = rendered
    dep = find(docs, "Deployment")[0]
    container(dep)["probes"] = {"typo": True}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(dep, KUBE_VERSION, strict=True)


def test_one_deployment_per_enabled_service_from_one_template(rendered) -> None:
    _, docs = rendered
    deployments = find(docs, "Deployment")
    assert {d["metadata"]["name"] for d in deployments} == {full(n) for n in (*WORKERS, "control")}
    sources = {n: (CHART / "templates" / n).read_text() for n in ("workers.yaml", "control.yaml")}
    assert len(re.findall(r"^kind: Deployment$", sources["workers.yaml"], re.M)) == 1
    assert not any((CHART / "templates").glob("deployment-*.yaml"))


@pytest.mark.parametrize("name", sorted(VALUES_FILES))
def test_worker_deployment_env_ports_probes_and_resources(name: str) -> None:
    vals = values(*VALUES_FILES[name])
    docs = render(*VALUES_FILES[name])
    for worker in WORKERS:
        w = vals["workers"][worker]
        dep = one(docs, "Deployment", full(worker))
        c = container(dep)
        assert c["command"] == [f"streamcrawl-{worker}"]
        assert c["ports"] == [{"name": "metrics", "containerPort": w["metricsPort"], "protocol": "TCP"}]
        assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
        assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
        assert c["resources"] == w["resources"]
        prefix = f"STREAMCRAWL_{worker.upper()}_"
        env = env_of(dep)
        assert env[f"{prefix}GROUP_ID"] == f"streamcrawl-{worker}"
        assert env[f"{prefix}METRICS_PORT"] == str(w["metricsPort"])
        assert env[f"{prefix}METRICS_BIND"] == "0.0.0.0"
        assert env[f"{prefix}LOG_LEVEL"] == "INFO"
        for key, value in w["env"].items():
            assert env[key] == str(value)
        assert env["STREAMCRAWL_S3_ACCESS_KEY"]["secretKeyRef"]["key"] == "accessKey"
        assert c["envFrom"] == [{"configMapRef": {"name": full("shared")}}]
        # Service-specific settings carry the service's own prefix (issue 9's per-service settings).
        for key in env:
            assert key in SHARED | {"STREAMCRAWL_S3_ACCESS_KEY", "STREAMCRAWL_S3_SECRET_KEY"} \
                or key.startswith(prefix), f"{worker}: {key}"
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        assert {"name": "tmp", "mountPath": "/tmp"} in c["volumeMounts"]
        assert "STREAMCRAWL_FETCHER_ALLOWED_NETWORKS" not in env  # the SSRF guard's default stands


def test_control_plane_listens_on_its_port_with_the_api_token(rendered) -> None:
    _, docs = rendered
    dep = one(docs, "Deployment", full("control"))
    c, env = container(dep), env_of(dep)
    assert c["ports"][0] == {"name": "http", "containerPort": 8080, "protocol": "TCP"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert env["STREAMCRAWL_CONTROL_LISTEN_HOST"] == "0.0.0.0"
    assert env["STREAMCRAWL_CONTROL_LISTEN_PORT"] == "8080"
    assert env["STREAMCRAWL_CONTROL_API_TOKEN"]["secretKeyRef"]["key"] == "apiToken"


def test_control_plane_scrapes_every_replica_of_every_worker(rendered) -> None:
    """Stats sum all replicas: each enabled worker's metrics Service is headless (its name resolves to every
    ready pod) and the control plane's targets name each of them as dns+http on its metrics port."""
    _, docs = rendered
    env = env_of(one(docs, "Deployment", full("control")))
    targets = env["STREAMCRAWL_CONTROL_METRICS_TARGETS"].split(",")
    services = {s["metadata"]["name"]: s for s in find(docs, "Service")}
    named = set()
    for t in targets:
        m = re.fullmatch(r"dns\+http://([a-z0-9-]+)\.([a-z0-9-]+)\.svc:(\d+)/metrics", t)
        assert m, t
        svc = services[m.group(1)]
        assert svc["spec"]["clusterIP"] == "None", f"{m.group(1)} must be headless"
        assert int(m.group(3)) in {p["port"] for p in svc["spec"]["ports"]}
        named.add(m.group(1))
    assert named == {full(w) for w in WORKERS}


def test_shared_settings_configmap_and_partitions(rendered) -> None:
    _, docs = rendered
    data = one(docs, "ConfigMap", full("shared"))["data"]
    assert set(data) == SHARED
    assert data["STREAMCRAWL_PARTITIONS"] == "64"
    job_env = env_of(one(docs, "Job", full("provision")))
    assert {k: job_env[k] for k in SHARED} == data, "the provisioning Job must see the workers' settings"


def test_partitions_come_from_values() -> None:
    docs = render(sets=("partitions=128", "workers.frontier.replicas=100"))
    assert one(docs, "ConfigMap", full("shared"))["data"]["STREAMCRAWL_PARTITIONS"] == "128"
    assert env_of(one(docs, "Job", full("provision")))["STREAMCRAWL_PARTITIONS"] == "128"
    assert one(docs, "Deployment", full("frontier"))["spec"]["replicas"] == 100


@pytest.mark.parametrize("worker", WORKERS)
def test_replicas_above_partitions_are_refused(worker: str) -> None:
    ok = template(sets=("partitions=16", f"workers.{worker}.replicas=16"))
    assert ok.returncode == 0, ok.stderr
    res = template(sets=("partitions=16", f"workers.{worker}.replicas=17"))
    assert res.returncode != 0
    assert f"workers.{worker}.replicas is 17 but partitions is 16" in res.stderr


def test_hpa_max_replicas_above_partitions_is_refused() -> None:
    res = template(PRODUCTION, sets=("partitions=24",))
    assert res.returncode != 0
    assert "workers.fetcher.autoscaling.maxReplicas is 32 but partitions is 24" in res.stderr


def test_production_has_hpa_for_fetcher_and_parser_only() -> None:
    docs = render(PRODUCTION)
    hpas = {h["metadata"]["name"]: h for h in find(docs, "HorizontalPodAutoscaler")}
    assert set(hpas) == {full("fetcher"), full("parser")}
    for name, hpa in hpas.items():
        assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
        assert hpa["spec"]["minReplicas"] == 4 and hpa["spec"]["maxReplicas"] == 32
        assert "replicas" not in one(docs, "Deployment", name)["spec"], "the HPA owns the replica count"
    assert one(docs, "Deployment", full("frontier"))["spec"]["replicas"] == 4
    assert not find(render(), "HorizontalPodAutoscaler"), "HPAs are off by default"


def _selects(selector: dict[str, str], pod_labels: dict[str, str]) -> bool:
    return all(pod_labels.get(k) == v for k, v in selector.items())


def test_a_service_and_a_pdb_select_every_deployment(rendered) -> None:
    _, docs = rendered
    services = find(docs, "Service")
    pdbs = find(docs, "PodDisruptionBudget")
    for dep in find(docs, "Deployment"):
        labels = dep["spec"]["template"]["metadata"]["labels"]
        port_names = {p["name"] for p in container(dep)["ports"]}
        svc = [s for s in services if _selects(s["spec"]["selector"], labels)]
        assert len(svc) == 1, dep["metadata"]["name"]
        assert {p["targetPort"] for p in svc[0]["spec"]["ports"]} <= port_names
        assert svc[0]["metadata"]["labels"]["streamcrawl.io/metrics"] == "true"
        pdb = [p for p in pdbs if _selects(p["spec"]["selector"]["matchLabels"], labels)]
        assert len(pdb) == 1 and pdb[0]["spec"]["maxUnavailable"] == 1, dep["metadata"]["name"]
        # A selector that matched other components' pods would mix services behind one Service.
        others = [d for d in find(docs, "Deployment") if d is not dep]
        assert not any(_selects(svc[0]["spec"]["selector"], o["spec"]["template"]["metadata"]["labels"])
                       for o in others)


def test_service_monitor_scrapes_every_metrics_service() -> None:
    assert not find(render(), "ServiceMonitor"), "off by default"
    docs = render(PRODUCTION)
    sm = one(docs, "ServiceMonitor", "crawl-streamcrawl")
    assert sm["metadata"]["labels"]["release"] == "prometheus"
    endpoint_ports = {e["port"] for e in sm["spec"]["endpoints"]}
    assert all(e["path"] == "/metrics" for e in sm["spec"]["endpoints"])
    scraped = [s for s in find(docs, "Service") if _selects(sm["spec"]["selector"]["matchLabels"],
                                                           s["metadata"]["labels"])]
    assert len(scraped) == len(find(docs, "Deployment"))
    for svc in scraped:
        assert {p["name"] for p in svc["spec"]["ports"]} & endpoint_ports, svc["metadata"]["name"]


def test_fetcher_network_policy_denies_cluster_ranges() -> None:
    assert not find(render(), "NetworkPolicy"), "off by default"
    docs = render(PRODUCTION, sets=("networkPolicy.internetCidrs={0.0.0.0/0,::/0}",
                                    "networkPolicy.extraDeniedCidrs={169.254.0.0/16,fd00::/8}"))
    pol = one(docs, "NetworkPolicy", full("fetcher-egress"))
    fetcher_labels = one(docs, "Deployment", full("fetcher"))["spec"]["template"]["metadata"]["labels"]
    assert _selects(pol["spec"]["podSelector"]["matchLabels"], fetcher_labels)
    assert not _selects(pol["spec"]["podSelector"]["matchLabels"],
                        one(docs, "Deployment", full("parser"))["spec"]["template"]["metadata"]["labels"])
    assert pol["spec"]["policyTypes"] == ["Egress"]
    internet, dns, kafka, cassandra = pol["spec"]["egress"]
    blocks = {b["ipBlock"]["cidr"]: b["ipBlock"]["except"] for b in internet["to"]}
    assert blocks == {"0.0.0.0/0": ["10.244.0.0/16", "10.96.0.0/12", "169.254.0.0/16"], "::/0": ["fd00::/8"]}
    assert {p["port"] for p in dns["ports"]} == {53}
    assert kafka["ports"] == [{"protocol": "TCP", "port": 9092}]
    assert cassandra["ports"] == [{"protocol": "TCP", "port": 9042}]


def test_secrets_from_the_chart_or_existing() -> None:
    # Defaults: S3 credentials from the existing Secret `streamcrawl-s3`, a generated API token.
    docs = render()
    secrets = {s["metadata"]["name"]: s for s in find(docs, "Secret")}
    assert set(secrets) == {full("control")}
    assert len(secrets[full("control")]["stringData"]["apiToken"]) == 40
    assert env_of(one(docs, "Deployment", full("fetcher")))["STREAMCRAWL_S3_SECRET_KEY"]["secretKeyRef"]["name"] \
        == "streamcrawl-s3"
    # Production: both from existing Secrets, none created.
    docs = render(PRODUCTION)
    assert not find(docs, "Secret")
    env = env_of(one(docs, "Deployment", full("control")))
    assert env["STREAMCRAWL_CONTROL_API_TOKEN"]["secretKeyRef"]["name"] == "crawl-control-token"
    assert env["STREAMCRAWL_S3_ACCESS_KEY"]["secretKeyRef"]["name"] == "crawl-s3"
    # Chart-owned S3 credentials: the release's Secret for the workers, a hook copy for the provisioning Job.
    docs = render(sets=("s3Credentials.create=true", "s3Credentials.accessKey=ak", "s3Credentials.secretKey=sk",
                        "controlApiToken.value=tok"))
    secrets = {s["metadata"]["name"]: s for s in find(docs, "Secret")}
    assert secrets[full("s3")]["stringData"] == {"accessKey": "ak", "secretKey": "sk"}
    assert secrets[full("control")]["stringData"] == {"apiToken": "tok"}
    hook = secrets[full("provision-s3")]
    assert hook["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert int(hook["metadata"]["annotations"]["helm.sh/hook-weight"]) < 0
    assert env_of(one(docs, "Job", full("provision")))["STREAMCRAWL_S3_ACCESS_KEY"]["secretKeyRef"]["name"] \
        == full("provision-s3")
    assert env_of(one(docs, "Deployment", full("dedup")))["STREAMCRAWL_S3_ACCESS_KEY"]["secretKeyRef"]["name"] \
        == full("s3")


def test_provisioning_job_runs_before_the_workers() -> None:
    job = one(render(), "Job", full("provision"))
    notes = job["metadata"]["annotations"]
    assert notes["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert "envFrom" not in container(job), "hooks run before the release's ConfigMap exists"
    assert container(job)["command"] == ["streamcrawl-provision"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"


def test_a_new_worker_is_one_values_entry(tmp_path: Path) -> None:
    """The worker template is generic: an `exporter` entry (refused by the values schema until its name is
    added there, as `warc` was) renders its own Deployment, Service and PDB with STREAMCRAWL_EXPORTER_*."""
    extra = tmp_path / "exporter.yaml"
    extra.write_text("workers:\n  exporter:\n    enabled: true\n    command: [streamcrawl-exporter]\n"
                     "    replicas: 2\n    metricsPort: 9107\n    env: {STREAMCRAWL_EXPORTER_MAX_BYTES: 1000000000}\n"
                     "    resources: {requests: {cpu: 250m}}\n")
    refused = template(extra)
    assert refused.returncode != 0 and "additional properties 'exporter' not allowed" in refused.stderr
    docs = render(extra, extra=("--skip-schema-validation",))
    dep = one(docs, "Deployment", full("exporter"))
    env = env_of(dep)
    assert env["STREAMCRAWL_EXPORTER_METRICS_PORT"] == "9107"
    assert env["STREAMCRAWL_EXPORTER_GROUP_ID"] == "streamcrawl-exporter"
    assert env["STREAMCRAWL_EXPORTER_MAX_BYTES"] == "1000000000"
    assert one(docs, "Service", full("exporter"))["spec"]["ports"][0]["port"] == 9107
    assert one(docs, "PodDisruptionBudget", full("exporter"))


def test_the_warc_writer_is_a_default_worker() -> None:
    docs = render()
    env = env_of(one(docs, "Deployment", full("warc")))
    assert env["STREAMCRAWL_WARC_METRICS_PORT"] == "9106" and env["STREAMCRAWL_WARC_GROUP_ID"] == "streamcrawl-warc"


def test_notes_show_seeds_and_page_fetched(tmp_path: Path) -> None:
    """NOTES.txt is rendered only by install/upgrade, which need a cluster; here helm renders it through
    `tpl` in a copy of the chart (templates/ is not readable with .Files, so the copy puts it beside)."""
    chart = tmp_path / "streamcrawl"
    shutil.copytree(CHART, chart)
    shutil.copy(chart / "templates" / "NOTES.txt", chart / "notes-under-test.txt")
    (chart / "templates" / "zz-notes.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\n"
        'data:\n  notes: {{ tpl (.Files.Get "notes-under-test.txt") . | quote }}\n')
    res = helm("template", "crawl", str(chart), "-n", "crawl", "--show-only", "templates/zz-notes.yaml")
    assert res.returncode == 0, res.stderr
    notes = res.docs[0]["data"]["notes"]
    assert """echo '{"url":"https://example.com/"}' | kcat -P -b kafka:9092 -t streamcrawl.seeds""" in notes
    assert "from confluent_kafka import Producer" in notes
    assert "kcat -C -b kafka:9092 -G my-indexer page_fetched" in notes
    assert "keep every worker's replicas <= 64" in notes
    assert "kubectl -n crawl create secret generic streamcrawl-s3" in notes
