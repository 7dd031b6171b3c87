"""Security: names that become paths cannot escape the lake, configuration YAML cannot
run code, nothing is unpickled, and the SQL endpoint stays on loopback unless told.
(The read-only guard of `perflake sql` is specified in test_sql.py, the SQL server's
refusal of a non-loopback host without --allow-remote in test_sqlserver.py.)"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pipelines.config.lake import Lake, safe_name

REPO = Path(__file__).resolve().parent.parent
OWN_CODE = ["pipelines", "kernels_bench", "schemas", "jobs", "dags"]
TRAVERSALS = ["..", "../x", "a/../../b", "/etc", "a/b", ".hidden", "", "a\x00b", "x" * 200]


@pytest.mark.parametrize("bad", TRAVERSALS)
def test_names_that_would_leave_their_directory_are_refused(bad):
    with pytest.raises(ValueError, match="not a valid name"):
        safe_name(bad, "pool")


@pytest.mark.parametrize("field", ["kind", "pool", "run_id"])
def test_every_name_in_a_landing_path_is_checked(tmp_path, field):
    args = {"kind": "samples", "dt": "2034-09-01", "pool": "cpu", "run_id": "r1", "shard": 0, field: "../../escape"}
    with pytest.raises(ValueError, match="not a valid name"):
        Lake(tmp_path).landing_file(**args)
    with pytest.raises(ValueError, match="not YYYY-MM-DD"):
        Lake(tmp_path).landing_file("samples", "2034-09-01/../..", "cpu", "r1", 0)


def test_a_pool_registry_with_a_path_as_pool_name_is_refused(tmp_path):
    from pipelines.config.pools import load_pools

    (tmp_path / "pools.yaml").write_text("'../../etc': {sku: cpu, device_kind: cpu, slots: 1}\n")
    with pytest.raises(ValueError, match="pool name '../../etc' is not a valid name"):
        load_pools(tmp_path / "pools.yaml")


def test_a_device_lease_for_a_path_as_pool_is_refused(tmp_path, monkeypatch):
    from pipelines.sweep import leasing

    monkeypatch.setattr(leasing, "LOCK_DIR", tmp_path / "locks")
    with pytest.raises(ValueError, match="not a valid name"):
        with leasing.lease_device("../../tmp/x", 1):
            pass
    assert not (tmp_path / "tmp").exists()


def test_a_sweep_with_a_path_as_run_id_or_suite_is_refused():
    from kernels_bench.suite import SuiteError
    from pipelines.sweep.shards import plan_shards

    with pytest.raises(ValueError, match="not a valid name"):
        plan_shards(run_id="../x", dt="2034-09-01", pool="cpu", suites=["gemm-demo"], reason="manual")
    with pytest.raises(SuiteError, match="may hold only letters"):
        plan_shards(run_id="r1", dt="2034-09-01", pool="cpu", suites=["../../etc/passwd"], reason="manual")


# --------------------------------------------------------------------------- YAML and pickles

PAYLOAD = "!!python/object/apply:os.system ['touch {marker}']"


def _loaders():
    from kernels_bench.hardware import load_catalog
    from kernels_bench.suite import load_suite
    from pipelines.config.pools import load_pools

    return {
        "pools": (load_pools, "evil: {{sku: cpu, device_kind: cpu, slots: {payload}}}\n"),
        "suite": (load_suite, "name: evil\ngroups:\n  - kernel: {payload}\n"),
        "hardware": (lambda p: load_catalog(str(p)), "EVIL:\n  name: {payload}\n  peak_tflops: {{fp32: 1}}\n"
                                                      "  memory_bandwidth_gbps: 1\n  source: x\n"),
    }


@pytest.mark.parametrize("config", ["pools", "suite", "hardware"])
def test_configuration_yaml_cannot_construct_python_objects(tmp_path, config):
    load, template = _loaders()[config]
    marker = tmp_path / "pwned"
    path = tmp_path / f"{config}.yaml"
    path.write_text(template.format(payload=PAYLOAD.format(marker=marker)))
    with pytest.raises(Exception, match=r"python/object|tag"):  # the loader refuses the tag itself
        load(path)
    assert not marker.exists()


def _calls_and_imports(path: Path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, "import " + a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield node.lineno, "import " + (node.module or "")
        elif isinstance(node, ast.Call):
            f = node.func
            name = ast.unparse(f)
            kwargs = {k.arg: ast.unparse(k.value) for k in node.keywords if k.arg}
            yield node.lineno, name + "(" + ",".join(f"{k}={v}" for k, v in kwargs.items()) + ")"


def test_no_module_unpickles_or_loads_yaml_unsafely():
    unsafe_imports = {"pickle", "cPickle", "cloudpickle", "dill", "shelve", "marshal", "joblib"}
    findings = []
    for top in OWN_CODE:
        for path in sorted((REPO / top).rglob("*.py")):
            for line, what in _calls_and_imports(path):
                name = what.split("(")[0]
                bad = (what.startswith("import ") and what.split()[1].split(".")[0] in unsafe_imports
                       or name in ("yaml.load", "yaml.unsafe_load", "yaml.full_load", "yaml.load_all",
                                   "torch.load", "pd.read_pickle", "pandas.read_pickle")
                       or name.endswith("np.load") and "allow_pickle=True" in what
                       or name.startswith("yaml.") and "Loader=" in what)
                if bad:
                    findings.append(f"{path.relative_to(REPO)}:{line}: {what}")
    assert findings == []


# --------------------------------------------------------------------------- the SQL endpoint

def test_the_sql_server_binds_loopback_by_default(tmp_path):
    import inspect

    from pipelines.query import server as sqlserver

    assert sqlserver.DEFAULT_HOST == "127.0.0.1"
    assert inspect.signature(sqlserver.start).parameters["host"].default == sqlserver.DEFAULT_HOST
    cmd = sqlserver.server_command(Lake(tmp_path), sqlserver.DEFAULT_HOST, 10000)
    assert "hive.server2.thrift.bind.host=127.0.0.1" in cmd


def test_the_sql_servers_settings_are_not_on_its_command_line(tmp_path):
    from pipelines.query import server as sqlserver

    lake = Lake(tmp_path)
    cmd = sqlserver.server_command(lake, sqlserver.DEFAULT_HOST, 10000)
    assert "--conf" not in cmd and str(sqlserver.properties_file(lake)) in cmd
    conf = sqlserver.server_conf(lake, auth=True)
    assert conf["spark.sql.extensions"] == "perflake.gate.Extension"
    assert conf["spark.sql.runSQLOnFiles"] == "false"
    assert conf["spark.sql.thriftserver.scheduler.pool"] == sqlserver.POOL
    assert "perflake.auth.passwd.file" in conf["spark.driver.extraJavaOptions"]


def test_a_non_loopback_sql_server_needs_users(tmp_path):
    from pipelines.query import server as sqlserver

    with pytest.raises(ValueError, match="no users to authenticate"):
        sqlserver.start(Lake(tmp_path), host="0.0.0.0", port=1)


def test_sql_server_passwords_are_stored_as_salted_hashes_readable_by_the_owner_only(tmp_path):
    from pipelines.query import users

    lake = Lake(tmp_path)
    users.add_user(lake, "alice", "same password")
    users.add_user(lake, "bob", "same password")
    text = users.password_file(lake).read_text()
    assert "same password" not in text
    hashes = [ln.split(":", 2)[2] for ln in text.splitlines()]
    assert len(set(hashes)) == 2  # salted: the same password hashes differently
    assert users.check_password(lake, "alice", "same password")
    assert not users.check_password(lake, "alice", "other password")
    assert oct(users.password_file(lake).stat().st_mode & 0o777) == "0o600"
    assert users.remove_user(lake, "bob") and users.users(lake) == ["alice"]
    with pytest.raises(ValueError, match="not a valid name"):
        users.add_user(lake, "eve:admin", "long enough")
    with pytest.raises(ValueError, match="shorter than 8"):
        users.add_user(lake, "carol", "short")


def test_the_gate_is_built_from_source_by_make_setup():
    makefile = (REPO / "Makefile").read_text()
    assert "$(GATE_JAR)" in makefile.split("\nsetup:", 1)[1].splitlines()[0]
    assert (REPO / "pipelines" / "query" / "gate" / "src" / "perflake" / "gate" / "Gate.java").exists()
    assert "pipelines/query/gate/build/" in (REPO / ".gitignore").read_text()
