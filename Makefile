# `sam build` calls build-<Function> for each function (BuildMethod: makefile in
# template.yaml): a function's package holds only the code the functions import, laid out
# as installed (functions/ as tickq/functions, where the Handler strings point, and
# queue_core/), never tests, benchmarks, docs or tooling. `tickq` stays a namespace
# package (no __init__.py), as in the wheel. Their dependencies come from
# DependenciesLayer (infra/layer), boto3 from the runtime.
FUNCTIONS := TickFunction ApiFunction EnqueueFunction MaintenanceFunction SchedulerFunction \
	MigrateFunction

$(addprefix build-,$(FUNCTIONS)):
	mkdir -p "$(ARTIFACTS_DIR)/tickq"
	cp -R functions "$(ARTIFACTS_DIR)/tickq/"
	cp -R queue_core "$(ARTIFACTS_DIR)/"
	find "$(ARTIFACTS_DIR)" -name __pycache__ -type d -prune -exec rm -rf {} +

.PHONY: $(addprefix build-,$(FUNCTIONS))
