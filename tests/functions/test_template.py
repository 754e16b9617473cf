"""template.yaml (and infra/app/template.yaml, which `tickq init` writes): valid for
CloudFormation, every handler it names exists, every route is an API event, and every
function's failures, logs and permissions are where an operator finds them."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from cfnlint.api import lint_file

from tickq.infra.local.invoke import load_template, resolve_handler

from .conftest import EVENTS

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
TEMPLATES = {"reference": TEMPLATE, "app": ROOT / "infra" / "app" / "template.yaml"}
SPEC_FUNCTIONS = {
    "TickFunction",
    "ApiFunction",
    "EnqueueFunction",
    "MaintenanceFunction",
    "MigrateFunction",
    "SchedulerFunction",
}


@pytest.fixture(scope="module")
def template() -> Any:
    return load_template(TEMPLATE)


def functions(template: Any) -> dict[str, Any]:
    return {
        name: resource.get("Properties") or {}
        for name, resource in template["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
    }


@pytest.fixture(scope="module", params=sorted(TEMPLATES))
def each_template(request: pytest.FixtureRequest) -> Any:
    """The reference template, then the application's."""
    return load_template(TEMPLATES[request.param])


@pytest.mark.parametrize("path", TEMPLATES.values(), ids=TEMPLATES.keys())
def test_cfn_lint_passes(path: Path) -> None:
    problems = [str(match) for match in lint_file(path)]
    assert problems == []


def test_every_handler_resolves_to_an_importable_callable(template: Any) -> None:
    for name, properties in functions(template).items():
        handler = properties.get("Handler") or template["Globals"]["Function"].get("Handler")
        assert callable(resolve_handler(handler)), name


def test_the_functions_of_the_spec_are_all_there(template: Any) -> None:
    assert set(functions(template)) >= SPEC_FUNCTIONS


def test_one_runtime_and_one_architecture_everywhere(template: Any) -> None:
    defaults = template["Globals"]["Function"]
    assert defaults["Runtime"] in ("python3.12", "python3.13")
    for name, properties in functions(template).items():
        assert properties.get("Runtime", defaults["Runtime"]) == defaults["Runtime"], name
        assert (
            properties.get("Architectures", defaults["Architectures"])
            == (defaults["Architectures"])
        ), name
    layer = template["Resources"]["DependenciesLayer"]
    assert layer["Properties"]["CompatibleArchitectures"] == defaults["Architectures"]
    assert layer["Properties"]["CompatibleRuntimes"] == [defaults["Runtime"]]
    # The Makefile reads the runtime and architecture from the template (tests/artifact).
    assert layer["Metadata"]["BuildMethod"] == "makefile"
    assert layer["Metadata"]["BuildArchitecture"] == defaults["Architectures"][0]


def test_schedules_pass_explicit_json_input_and_ticks_are_never_retried(template: Any) -> None:
    for name, properties in functions(template).items():
        for event in (properties.get("Events") or {}).values():
            if event["Type"] == "ScheduleV2":
                assert isinstance(json.loads(event["Properties"]["Input"]), dict), name
    tick = functions(template)["TickFunction"]
    assert tick["EventInvokeConfig"]["MaximumRetryAttempts"] == 0
    assert tick["RecursiveLoop"] == "Allow"


def test_tick_lease_outlasts_its_timeout_plus_margin(template: Any) -> None:
    tick = functions(template)["TickFunction"]
    env = tick["Environment"]["Variables"]
    margin_seconds = int(env["TICKQ_SAFETY_MARGIN_MS"]) / 1000
    assert int(env["TICKQ_LEASE_SECONDS"]) > tick["Timeout"] + margin_seconds


def test_layer_requirements_match_the_packages_runtime_dependencies() -> None:
    def names(requirements: list[str]) -> set[str]:
        return {re.split(r"[\[<>=~ ;]", r.strip(), maxsplit=1)[0].lower() for r in requirements}

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = names(project["dependencies"]) | names(project["optional-dependencies"]["aws"])
    layer = (ROOT / "infra" / "layer" / "requirements.txt").read_text(encoding="utf-8")
    listed = names([line for line in layer.splitlines() if line and not line.startswith("#")])
    # boto3 ships with the Lambda runtime; the CLI's table renderer and pool are not needed.
    assert wanted - listed <= {"boto3", "rich", "psycopg-pool"}
    assert listed <= wanted
    assert {"cronsim", "tzdata"} <= listed  # schedules; Lambda's OS has no zone database


@pytest.mark.parametrize("path", sorted(EVENTS.glob("*.json")), ids=lambda p: p.name)
def test_sample_events_are_json_objects(path: Path) -> None:
    assert isinstance(json.loads(path.read_text(encoding="utf-8")), dict)


# Functions something invokes asynchronously: the schedules (Tick, Maintenance, Scheduler),
# kicks and fan-out (Tick), other functions' `InvocationType=Event` (Enqueue) and
# CloudFormation's custom resource requests (Migrate). ApiFunction alone answers in line.
ASYNC_FUNCTIONS = {
    "TickFunction",
    "EnqueueFunction",
    "MaintenanceFunction",
    "SchedulerFunction",
    "MigrateFunction",
}
ALARM_ACTIONS = {"Fn::If": ["HasAlarmTopic", [{"Ref": "AlarmTopicArn"}], {"Ref": "AWS::NoValue"}]}


def target(value: Any) -> str:
    """The logical id a `!Ref X` or `!GetAtt X.Attribute` points at."""
    if isinstance(value, dict) and set(value) == {"Ref"}:
        return str(value["Ref"])
    if isinstance(value, dict) and set(value) == {"Fn::GetAtt"}:
        return str(value["Fn::GetAtt"][0])
    raise AssertionError(f"not a reference: {value!r}")


def resources_of(template: Any, kind: str) -> dict[str, Any]:
    return {
        name: resource.get("Properties") or {}
        for name, resource in template["Resources"].items()
        if resource["Type"] == kind
    }


def route_shape(method: str, path: str) -> tuple[str, str]:
    """A route as method and path, its parameters unnamed: /jobs/<job_id> is /jobs/{id}."""
    return method.upper(), re.sub(r"<[^>]+>|\{[^}]+\}", "{}", path)


def served_routes() -> set[tuple[str, str]]:
    """Every route of ApiFunction's resolver, from its route table (the routers included)."""
    from tickq.functions.api import app

    routes = [*app._static_routes, *app._dynamic_routes]
    assert routes, "the resolver's route table moved: find where Powertools keeps it"
    return {route_shape(route.method, route.path) for route in routes}


def test_every_served_route_is_an_api_event_and_every_api_event_a_served_route(
    each_template: Any,
) -> None:
    events: set[tuple[str, str]] = set()
    for name, properties in functions(each_template).items():
        for event in (properties.get("Events") or {}).values():
            if event["Type"] == "HttpApi":
                assert name == "ApiFunction", name
                events.add(route_shape(event["Properties"]["Method"], event["Properties"]["Path"]))
    served = served_routes()
    assert ("GET", "/admin/outbox") in served
    assert served - events == set(), "routes the API serves but API Gateway never forwards"
    assert events - served == set(), "API events no route of the function answers"


def test_schedule_names_are_the_stacks_own(each_template: Any) -> None:
    schedules = [
        event["Properties"]
        for properties in functions(each_template).values()
        for event in (properties.get("Events") or {}).values()
        if event["Type"] == "ScheduleV2"
    ]
    assert len(schedules) == 3
    for schedule in schedules:
        # SAM names a schedule by its event's logical id unless told otherwise: a second
        # stack in the account and region would then fail on the same name.
        name = schedule.get("Name")
        assert schedule.get("OmitName") is True or (
            isinstance(name, dict) and "${AWS::StackName}" in str(name.get("Fn::Sub"))
        ), schedule


def test_asynchronous_invocations_that_fail_land_in_an_alarmed_queue(each_template: Any) -> None:
    resources = each_template["Resources"]
    scheduled = {
        name
        for name, properties in functions(each_template).items()
        if any(e["Type"] == "ScheduleV2" for e in (properties.get("Events") or {}).values())
    }
    assert scheduled <= ASYNC_FUNCTIONS
    alarmed = {
        target(alarm["Dimensions"][0]["Value"]): alarm
        for alarm in resources_of(each_template, "AWS::CloudWatch::Alarm").values()
        if alarm.get("MetricName") == "ApproximateNumberOfMessagesVisible"
    }
    for name in sorted(ASYNC_FUNCTIONS):
        properties = functions(each_template)[name]
        on_failure = (
            ((properties.get("EventInvokeConfig") or {}).get("DestinationConfig") or {}).get(
                "OnFailure"
            )
        ) or {}
        dead_letters = properties.get("DeadLetterQueue") or {}
        if on_failure:
            assert on_failure["Type"] == "SQS", name
            queue = target(on_failure["Destination"])
        else:
            assert dead_letters.get("Type") == "SQS", f"{name} loses its failed invocations"
            queue = target(dead_letters["TargetArn"])
        assert resources[queue]["Type"] == "AWS::SQS::Queue", name
        assert queue in alarmed, f"no alarm on the depth of {queue}"
        alarm = alarmed[queue]
        assert alarm["Namespace"] == "AWS/SQS"
        assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0, "GreaterThanThreshold")
        assert alarm["AlarmActions"] == ALARM_ACTIONS
        # The function's own role sends there (SAM adds that only to roles it generates).
        statements = resources[target(properties["Role"])]["Properties"]["Policies"][0]
        assert {
            "Effect": "Allow",
            "Action": "sqs:SendMessage",
            "Resource": {"Fn::GetAtt": [queue, "Arn"]},
        } in statements["PolicyDocument"]["Statement"], name


def test_every_function_logs_to_its_own_group_kept_log_retention_days(each_template: Any) -> None:
    parameter = each_template["Parameters"]["LogRetentionDays"]
    assert parameter["Default"] == 30 and 30 in parameter["AllowedValues"]
    groups = resources_of(each_template, "AWS::Logs::LogGroup")
    used = []
    for name, properties in functions(each_template).items():
        group = target(properties["LoggingConfig"]["LogGroup"])
        assert groups[group]["RetentionInDays"] == {"Ref": "LogRetentionDays"}, name
        used.append(group)
    assert sorted(used) == sorted(set(used)) == sorted(groups)


def test_errors_throttles_and_api_5xx_alarm_to_the_alarm_topic(each_template: Any) -> None:
    assert each_template["Parameters"]["AlarmTopicArn"]["Default"] == ""
    alarms = resources_of(each_template, "AWS::CloudWatch::Alarm")
    for name, alarm in alarms.items():
        assert alarm["AlarmActions"] == ALARM_ACTIONS, name
    every_function = set(functions(each_template))
    for metric in ("Errors", "Throttles"):
        watched = {
            target(m["MetricStat"]["Metric"]["Dimensions"][0]["Value"])
            for alarm in alarms.values()
            for m in alarm.get("Metrics") or []
            if "MetricStat" in m
            and m["MetricStat"]["Metric"]["Namespace"] == "AWS/Lambda"
            and m["MetricStat"]["Metric"]["MetricName"] == metric
        }
        assert watched == every_function, metric
    assert any(
        alarm.get("Namespace") == "AWS/ApiGateway"
        and alarm.get("MetricName") == "5xx"
        and alarm["Dimensions"] == [{"Name": "ApiId", "Value": {"Ref": "HttpApi"}}]
        for alarm in alarms.values()
    )


def test_xray_and_vpc_policies_only_when_tracing_and_subnets_ask_for_them(
    each_template: Any,
) -> None:
    def managed(name: str) -> dict[str, str]:
        return {"Fn::Sub": f"arn:${{AWS::Partition}}:iam::aws:policy/{name}"}

    resources = each_template["Resources"]
    for name, properties in functions(each_template).items():
        # Roles of SAM's making would carry both policies whatever the parameters.
        assert "Policies" not in properties, name
        role = resources[target(properties["Role"])]
        assert role["Type"] == "AWS::IAM::Role", name
        assert role["Properties"]["ManagedPolicyArns"] == [
            managed("service-role/AWSLambdaBasicExecutionRole"),
            {"Fn::If": ["TracingOn", managed("AWSXrayWriteOnlyAccess"), {"Ref": "AWS::NoValue"}]},
            {
                "Fn::If": [
                    "InVpc",
                    managed("service-role/AWSLambdaVPCAccessExecutionRole"),
                    {"Ref": "AWS::NoValue"},
                ]
            },
        ], name
    conditions = each_template["Conditions"]
    assert {"Fn::Equals": [{"Ref": "Tracing"}, "Active"]} in conditions["TracingOn"]["Fn::Or"]
    rule = each_template["Rules"]["SecurityGroupsWithSubnets"]
    assert rule["RuleCondition"] == {
        "Fn::Not": [{"Fn::EachMemberEquals": [{"Ref": "SubnetIds"}, ""]}]
    }
    assert rule["Assertions"][0]["Assert"] == {
        "Fn::Not": [{"Fn::EachMemberEquals": [{"Ref": "SecurityGroupIds"}, ""]}]
    }


def test_the_schema_resource_times_out_soon_after_its_function(each_template: Any) -> None:
    schema = each_template["Resources"]["Schema"]["Properties"]
    migrate = functions(each_template)["MigrateFunction"]
    assert migrate["Timeout"] < schema["ServiceTimeout"] <= 600


def test_functions_learn_the_database_location_a_managed_secret_lacks(each_template: Any) -> None:
    variables = each_template["Globals"]["Function"]["Environment"]["Variables"]
    assert variables["TICKQ_DB_HOST"] == {"Ref": "DatabaseHost"}
    assert variables["TICKQ_DB_PORT"] == {"Ref": "DatabasePort"}
    assert variables["TICKQ_DB_NAME"] == {"Ref": "DatabaseName"}
    parameters = each_template["Parameters"]
    assert parameters["DatabaseHost"]["Default"] == parameters["DatabaseName"]["Default"] == ""
    assert parameters["DatabasePort"]["Default"] == 5432
