# `sam build` calls build-<Function> for each function (BuildMethod: makefile in
# template.yaml): a function's package holds only the code the functions import, the
# functions/ and queue_core/ packages, never tests, benchmarks, docs or tooling.
# Their dependencies come from DependenciesLayer (infra/layer), boto3 from the runtime.
FUNCTIONS := TickFunction ApiFunction EnqueueFunction MaintenanceFunction SchedulerFunction \
	MigrateFunction

$(addprefix build-,$(FUNCTIONS)):
	mkdir -p "$(ARTIFACTS_DIR)"
	cp -R functions queue_core "$(ARTIFACTS_DIR)/"
	find "$(ARTIFACTS_DIR)" -name __pycache__ -type d -prune -exec rm -rf {} +

.PHONY: $(addprefix build-,$(FUNCTIONS))
