# `sam build` calls build-<Function> for each function and build-DependenciesLayer for the
# layer (BuildMethod: makefile in template.yaml). A function's package holds only the code
# the functions import, laid out as installed (functions/ as tickq/functions, where the
# Handler strings point, and queue_core/), never tests, benchmarks, docs or tooling.
# `tickq` stays a namespace package (no __init__.py), as in the wheel. Their dependencies
# come from DependenciesLayer (infra/layer/requirements.txt), boto3 and botocore from the
# runtime. Both are compiled to bytecode for the runtime's Python (infra/lambda_build.py
# says how and why).
FUNCTIONS := TickFunction ApiFunction EnqueueFunction MaintenanceFunction SchedulerFunction \
	MigrateFunction

HERE := $(dir $(abspath $(lastword $(MAKEFILE_LIST))))
# The runtime and architecture of template.yaml's functions (override: make PYTHON=...
# LAMBDA_ARCH=arm64|x86_64): the bytecode is the runtime's, the wheels its platform's,
# whatever machine builds.
LAMBDA_PYTHON := $(shell sed -n 's/^[[:space:]]*Runtime:[[:space:]]*python\([0-9.]*\).*/\1/p' \
	"$(HERE)template.yaml" | head -n 1)
LAMBDA_ARCH ?= $(shell sed -n \
	's/^[[:space:]]*Architectures:[[:space:]]*\[[[:space:]]*\([a-z0-9_]*\).*/\1/p' \
	"$(HERE)template.yaml" | head -n 1)
PYTHON := python$(LAMBDA_PYTHON)
WHEEL_ARCH = $(if $(filter arm64,$(LAMBDA_ARCH)),aarch64,$(if $(filter x86_64,$(LAMBDA_ARCH)),x86_64,$(error \
	template.yaml names no Architectures [arm64] or [x86_64]: set LAMBDA_ARCH)))
# Lambda's Linux for python3.12 and later has glibc 2.34: wheels for it, never built here.
PIP_PLATFORM = $(foreach tag,manylinux2014 manylinux_2_17 manylinux_2_28 manylinux_2_34, \
	--platform $(tag)_$(WHEEL_ARCH)) --implementation cp --python-version $(LAMBDA_PYTHON) \
	--only-binary=:all:
LAMBDA_BUILD = $(PYTHON) -I "$(HERE)infra/lambda_build.py"

$(addprefix build-,$(FUNCTIONS)):
	mkdir -p "$(ARTIFACTS_DIR)/tickq"
	cp -R functions "$(ARTIFACTS_DIR)/tickq/"
	cp -R queue_core "$(ARTIFACTS_DIR)/"
	find "$(ARTIFACTS_DIR)" -name __pycache__ -type d -prune -exec rm -rf {} +
	$(LAMBDA_BUILD) compile "$(ARTIFACTS_DIR)"

# The layer's python/ folder: what infra/layer/requirements.txt installs, less what the
# functions never import (lambda_build.py layer: botocore, which the X-Ray SDK requires
# and the runtime provides, and what only it needed).
build-DependenciesLayer:
	$(PYTHON) -m pip install --quiet --disable-pip-version-check --no-compile $(PIP_PLATFORM) \
		--target "$(ARTIFACTS_DIR)/python" --report "$(ARTIFACTS_DIR)/pip-report.json" \
		-r infra/layer/requirements.txt
	$(LAMBDA_BUILD) layer "$(ARTIFACTS_DIR)"

.PHONY: $(addprefix build-,$(FUNCTIONS)) build-DependenciesLayer
