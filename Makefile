# boincweb: `make run` serves the project, `make test` runs the linters and the whole suite.
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: install run lint test test-long bench differential server-differential server-vs-boinc mutation clean

$(VENV)/.installed: requirements.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "boincweb needs Python 3.11 or newer")'
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -r requirements.txt
	touch $@

# The engine's compiled core (scheduling/engine/build.py): Cython and the system's C compiler.
# Without a compiler it says so and the engine runs on its pure-Python modules (same results).
ENGINE_SOURCES := $(filter-out %/__init__.py %/__main__.py %/_core.py %/build.py %/command.py,\
	$(wildcard scheduling/engine/*.py scheduling/engine/policies/*.py)) $(wildcard scheduling/engine/*.pxd scheduling/engine/policies/*.pxd)
ENGINE_CORE := scheduling/engine/_core_build.json
$(ENGINE_CORE): $(VENV)/.installed $(ENGINE_SOURCES)
	BOINCWEB_ENGINE_CORE=python $(PY) -m scheduling.engine.build

install: $(VENV)/.installed $(ENGINE_CORE)

# Migrates, loads demo data, and starts the embedded Redis (unless REDIS_URL is set), an RQ
# worker, the periodic-job runner, the web server and the live demo (world/live.py; off with
# BOINCWEB_DEMO=0); Ctrl-C stops them all.
run: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py seed_demo
	honcho start $(if $(REDIS_URL),web worker cron demo,)

# ruff (formatting, then lint) and mypy, configured in pyproject.toml, over all of the project's
# Python. mypy keeps its own cache here: one shared with runs over other paths can repeat those
# runs' errors.
LINT_PATHS ?= manage.py protocol scheduling backend world boincweb bench tests
lint: install
	$(PY) -m ruff format --check $(LINT_PATHS)
	$(PY) -m ruff check $(LINT_PATHS)
	$(PY) -m mypy --cache-dir var/mypy_cache $(LINT_PATHS)

# The linters and the suite: the suite on SQLite (on the engine's compiled core where it is
# built), then the tests whose outcome can depend on the database again on PostgreSQL when
# DATABASE_URL is set (tests/conftest.py: runs_on_postgresql), each pass on TEST_WORKERS
# processes (pytest-xdist; 1 for none). Beside the SQLite pass, at a lower CPU priority (nice 10) so
# that they take only the time its tests leave idle (a real client's polls, a browser's page
# loads, a live server's round trips), run the linters and the engine's tests again on its
# pure-Python core (BOINCWEB_ENGINE_CORE=python, on Redis databases of their own); their output
# is printed when they end. The full-size simulations are left to `make test-long`. Prints its
# own wall time at the end.
TEST_WORKERS ?= auto
PYTEST_PARALLEL = $(if $(filter 1,$(TEST_WORKERS)),-p no:xdist,-n $(TEST_WORKERS) --dist worksteal)
BESIDE := var/make-test
test: install
	@started=$$(date +%s); status=0; mkdir -p $(BESIDE); rm -f $(BESIDE)/*; \
	( nice -n 10 $(MAKE) --no-print-directory lint > $(BESIDE)/lint.log 2>&1; echo $$? > $(BESIDE)/lint.status ) & \
	( nice -n 10 env -u DATABASE_URL BOINCWEB_ENGINE_CORE=python BOINCWEB_TEST_REDIS_DB=8 \
	    $(PY) -m pytest $(PYTEST_PARALLEL) -p no:cacheprovider tests/scheduling -m "not django_db" \
	    > $(BESIDE)/engine-python.log 2>&1; echo $$? > $(BESIDE)/engine-python.status ) & \
	echo "== the linters and the engine's tests on its pure-Python core run beside this pass (output below when they end)"; \
	env -u DATABASE_URL $(PY) -m pytest $(PYTEST_PARALLEL) || status=$$?; \
	wait; \
	for part in lint engine-python; do \
	  case $$part in lint) title="the linters (make lint)";; \
	    *) title="the engine's tests again on its pure-Python core (BOINCWEB_ENGINE_CORE=python)";; esac; \
	  echo "== $$title"; cat $(BESIDE)/$$part.log; \
	  part_status=$$(cat $(BESIDE)/$$part.status 2>/dev/null || echo 1); \
	  if [ "$$part_status" != 0 ]; then echo "== $$title failed (exit status $$part_status)"; status=1; fi; \
	done; \
	if [ $$status = 0 ] && [ -n "$$DATABASE_URL" ]; then \
	  echo "== the tests whose outcome can depend on the database, again on $$DATABASE_URL"; \
	  BOINCWEB_TEST_ONLY_DATABASE=1 $(PY) -m pytest $(PYTEST_PARALLEL) || status=$$?; fi; \
	echo "make test: $$(( $$(date +%s) - started )) s wall, load average $$(cut -d' ' -f1-3 /proc/loadavg)"; \
	exit $$status

# The full-size simulations (marked `long`), on SQLite and, when DATABASE_URL is set, on PostgreSQL
# those that can depend on it; CI runs them after `make test`.
test-long: install
	@started=$$(date +%s); status=0; \
	{ BOINCWEB_TEST_LONG=1 env -u DATABASE_URL $(PY) -m pytest $(PYTEST_PARALLEL) && \
	  if [ -n "$$DATABASE_URL" ]; then echo "== the long tests that can depend on the database, on $$DATABASE_URL"; \
	    BOINCWEB_TEST_LONG=1 BOINCWEB_TEST_ONLY_DATABASE=1 $(PY) -m pytest $(PYTEST_PARALLEL); fi; } || status=$$?; \
	echo "make test-long: $$(( $$(date +%s) - started )) s wall, load average $$(cut -d' ' -f1-3 /proc/loadavg)"; \
	exit $$status

# The benchmarks that need nothing but boincweb; the differential harnesses and the throughput
# comparison need BOINC's own programs built outside the repository (`make differential`,
# `make server-differential`, `make server-vs-boinc`; bench/boinc_server.py is their module), and
# the mutation score takes an hour or more (`make mutation`).
BENCH_APART := bench/differential.py bench/server_differential.py bench/server_vs_boinc.py \
	bench/boinc_server.py bench/mutation.py
bench: install
	@for script in $(filter-out $(BENCH_APART),$(wildcard bench/*.py)); do \
		echo "== $$script"; $(PY) $$script || exit 1; done

# The client engine against BOINC's emulator on random hosts: BCE_SIM=/path/to/boinc/client/sim
# (bench/differential.py says how to build it); CASES, SEED and DAYS as in its --help.
differential: install
	$(PY) bench/differential.py --cases $(or $(CASES),100) --seed $(or $(SEED),1) --days $(or $(DAYS),10)

# boincweb's daemons side by side with BOINC's (BOINC_SERVER: a built BOINC server tree).
server-differential: install
	$(PY) bench/server_differential.py --cases $(or $(CASES),300) --seed $(or $(SEED),1)

# The same quorum-2 workunits through BOINC's daemons (MariaDB, BOINC_DB) and boincweb's
# (DATABASE_URL): results per second of each and their ratio; WORKUNITS as in its --help.
server-vs-boinc: install
	$(PY) bench/server_vs_boinc.py --workunits $(or $(WORKUNITS),10000)

# The mutation score of the daemons and locality scheduling (bench/mutation.py): SAMPLE mutants
# (all of them when unset) drawn with SEED, JOBS at once.
mutation: install
	$(PY) bench/mutation.py $(if $(SAMPLE),--sample $(SAMPLE) --seed $(or $(SEED),1),) --jobs $(or $(JOBS),1)

clean:
	rm -rf var/*.sqlite3 var/redis.sock var/staticfiles
