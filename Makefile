# perflake: two commands on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
export PERFLAKE_HOME ?= $(CURDIR)/data
# Airflow's settings (home, DAG folder, database) come from pipelines/orchestration/airflow_env.py:
# SQLite under the lake (embedded) or the services' PostgreSQL after `make up`.

.PHONY: setup demo test test-full sql sql-server sql-server-stop report pools airflow web up down status lock clean help

help:
	@echo "make demo | make demo-history | make test | make test-full | make sql Q='SELECT ...' | make sql-server | make sql-server-stop"
	@echo "make report [DATE=YYYY-MM-DD] [SERVE=1] | make web [PORT=8080] | make pools | make airflow [PORT=8080] | make clean"
	@echo "make up [NO_AIRFLOW=1] | make status | make down   (the shared services: PostgreSQL, Spark SQL service, Airflow; docs/deploy.md)"
	@echo "everything else: .venv/bin/perflake --help (e.g. perflake airflow dags list: any airflow command on the lake's Airflow)"

# The venv is built from the lock (constraints.txt) once; the stamp marks it complete.
# --no-compile: Python compiles a module when it is first imported, instead of pip
# compiling every file of every package up front (3 min 22 s -> 2 min 5 s here).
$(VENV)/.installed: pyproject.toml constraints.txt
	python3.11 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade "pip==26.3"
	$(PY) -m pip install --quiet --no-compile -c constraints.txt -e .
	touch $@

# The SQL gate (pipelines/query/gate: Spark extension, JDBC authentication, audit) is
# compiled from source with javac against pyspark's own jars; nothing is downloaded.
GATE_JAR := pipelines/query/gate/build/perflake-gate.jar
$(GATE_JAR): $(VENV)/.installed $(wildcard pipelines/query/gate/src/perflake/gate/*.java) pipelines/query/gate/__init__.py
	$(PY) -m pipelines.query.gate

setup: $(VENV)/.installed $(GATE_JAR)

# One night of the real nightly_sweep DAG on this CPU; V=1 shows every log line.
demo: setup
	$(VENV)/bin/perflake demo $(if $(V),-v)

# Weeks of SIMULATED nights on the simulated GPU pools sim-h100 and sim-h200 (a torch
# upgrade, a driver change, a flaky case, failures, a new GPU backfilled), landed and
# mined: regressions, triage, compare, report, project and `make web` show them.
.PHONY: demo-history
demo-history: setup
	$(VENV)/bin/perflake demo-history $(if $(NIGHTS),--nights $(NIGHTS)) $(if $(V),-v)

# The fast tier (minutes; one test on each real component), then the end-to-end tier
# (whole DAG runs, scenario histories, a Spark cluster). CI runs both; tests/conftest.py
# says which module is in which. ARGS passes options to pytest (e.g. ARGS="--lf").
test: setup
	$(PY) -m pytest tests -m "not slow" --durations=15 $(ARGS)

test-full: setup
	$(PY) -m pytest tests -m slow --durations=15 $(ARGS)

sql: setup
	@test -n "$(Q)" || (echo 'usage: make sql Q="SELECT ..." [ENGINE=duckdb]'; exit 2)
	$(VENV)/bin/perflake sql --engine $(or $(ENGINE),spark) "$(Q)"

sql-server: setup
	$(VENV)/bin/perflake sql-server start

sql-server-stop: setup
	$(VENV)/bin/perflake sql-server stop

# The newest night's HTML report (DATE=YYYY-MM-DD for another night); prints its path.
# SERVE=1 also serves the reports folder on http://127.0.0.1:8000/ (loopback only).
report: setup
	@path=$$($(VENV)/bin/perflake report $(if $(DATE),--date $(DATE))) && echo "report: $$path" && \
	if [ -n "$(SERVE)" ]; then echo "serving http://127.0.0.1:8000/$$(basename $$path) (Ctrl-C to stop)"; \
	  $(PY) -m http.server 8000 --bind 127.0.0.1 --directory "$$(dirname $$path)"; fi

pools: setup
	$(VENV)/bin/perflake pools

# The shared services of the lake, on 127.0.0.1 only (docs/deploy.md): PostgreSQL 15 (Hive
# metastore, Airflow's metadata), one Spark SQL service (JDBC and Spark Connect, read-only)
# and Airflow (scheduler, dag-processor, triggerer, API server). From the first `make up`
# on, every perflake command on this lake uses them; `make down` stops what `up` started.
# NO_AIRFLOW=1 leaves Airflow out (the metastore and the SQL service only).
up: setup
	$(VENV)/bin/perflake services up $(if $(NO_AIRFLOW),--no-airflow) $(if $(V),-v)

down: setup
	$(VENV)/bin/perflake services down $(if $(V),-v)

status: setup
	$(VENV)/bin/perflake services status

# Airflow on its own, embedded (SQLite; for trying DAGs without `make up`). `airflow
# standalone` starts its parts as `airflow` from PATH: put the venv first. The API server
# (UI) listens on loopback only; PORT picks its port (default 8080). It runs in a process
# group of its own that Ctrl-C stops whole (run_foreground): on its own, its scheduler
# and workers outlive a Ctrl-C.
airflow: setup
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" AIRFLOW_HOME=$(PERFLAKE_HOME)/airflow AIRFLOW__CORE__DAGS_FOLDER=$(CURDIR)/dags \
	  AIRFLOW__CORE__LOAD_EXAMPLES=False AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=sqlite:///$(PERFLAKE_HOME)/airflow/airflow.db \
	  AIRFLOW__API__HOST=127.0.0.1 AIRFLOW__API__PORT=$(or $(PORT),8080) \
	  AIRFLOW__CORE__EXECUTION_API_SERVER_URL=http://127.0.0.1:$(or $(PORT),8080)/execution/ \
	  $(PY) -c 'import sys; from pipelines.config.processes import run_foreground; from pipelines.orchestration.airflow_env import private_passwords; private_passwords(); sys.exit(run_foreground(sys.argv[1:]))' \
	  $(VENV)/bin/airflow standalone

# The dashboard on http://127.0.0.1:$(PORT)/ (default 8080; loopback only, docs/web.md).
.PHONY: web
web: setup
	$(VENV)/bin/perflake web --port $(or $(PORT),8080)

# Regenerate the lock from the current, tested venv.
lock:
	$(PY) -m pip freeze --exclude-editable | grep -v '^perflake' > constraints.txt

# The default lake (./data) and Spark's strays; what still runs on that lake (the shared
# services, the SQL server) is stopped first, not orphaned.
clean:
	@if [ -x $(VENV)/bin/perflake ] && [ -d data ]; then \
	  PERFLAKE_HOME=$(CURDIR)/data $(VENV)/bin/perflake sql-server stop; \
	  PERFLAKE_HOME=$(CURDIR)/data $(VENV)/bin/perflake services down; fi
	rm -rf data spark-warehouse metastore_db derby.log
