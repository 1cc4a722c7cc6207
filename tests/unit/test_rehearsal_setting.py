"""LAUNCHBAY_REHEARSE_INTERRUPTIONS: what it accepts, and errors naming it, the value and what is accepted."""

from __future__ import annotations

import pytest

from launchbay.backends.local import rehearsal
from launchbay.backends.plan import JobFields
from launchbay.errors import ConfigurationError

SETTING = "LAUNCHBAY_REHEARSE_INTERRUPTIONS"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", ()),
        ("60s,120s", (("spot", 60.0, None), ("spot", 120.0, None))),
        ("90", (("spot", 90.0, None),)),
        ("spot:1.5m", (("spot", 90.0, None),)),
        ("host-loss:30s", (("host-loss", 30.0, None),)),
        (" host-loss:1h@algo-1 , 2s", (("host-loss", 3600.0, "algo-1"), ("spot", 2.0, None))),
    ],
)
def test_the_setting_lists_one_event_per_attempt(value, expected):
    events = rehearsal.parse(value)
    assert tuple((e.kind, e.seconds, e.host) for e in events) == expected


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("soon", "'soon' is not an item"),
        ("60s,", "'' is not an item"),
        ("0s", "is not a time after the start"),
        ("preempt:60s", "'preempt' is not a kind"),
        ("60s@algo-1", "only a host loss names a host"),
        ("-5s", "is not an item"),
    ],
)
def test_a_bad_value_is_refused_naming_the_setting_the_value_and_what_is_accepted(value, why):
    with pytest.raises(ConfigurationError) as info:
        rehearsal.parse(value)
    message = str(info.value)
    assert message.startswith(f"Invalid {SETTING}={value!r}."), message
    assert why in message
    assert "Accepted: a comma-separated list, one item per attempt" in message
    assert info.value.argument == SETTING


def fields(environment, spot):
    return JobFields(environment=environment, spot=spot)


def test_spot_interruptions_need_a_spot_job_and_host_losses_a_host_of_the_job(monkeypatch):
    monkeypatch.delenv(SETTING, raising=False)
    with pytest.raises(ConfigurationError) as info:
        rehearsal.check(fields({SETTING: "60s"}, spot=False), ["algo-1"])
    assert f"environment[{SETTING!r}]='60s'" in str(info.value)
    assert "use_spot_instances=True" in str(info.value)
    rehearsal.check(fields({SETTING: "60s"}, spot=True), ["algo-1"])
    rehearsal.check(fields({SETTING: "host-loss:5s"}, spot=False), ["algo-1"])
    with pytest.raises(ConfigurationError, match="one of this job's hosts: algo-1, algo-2"):
        rehearsal.check(fields({SETTING: "host-loss:5s@algo-3"}, spot=False), ["algo-1", "algo-2"])


def test_the_callers_environment_is_read_when_the_job_has_none(monkeypatch):
    monkeypatch.setenv(SETTING, "7s")
    assert [e.seconds for e in rehearsal.rehearsed(fields({}, spot=True))] == [7.0]
    assert [e.seconds for e in rehearsal.rehearsed(fields({SETTING: "3s"}, spot=True))] == [3.0]
    with pytest.raises(ConfigurationError, match=f"^Invalid {SETTING}='7s'"):
        rehearsal.check(fields({}, spot=False), ["algo-1"])


def test_a_rehearsed_spot_job_gets_sagemakers_120_s_unless_a_grace_period_is_set(monkeypatch):
    monkeypatch.delenv("LAUNCHBAY_GRACE_SECONDS", raising=False)
    monkeypatch.delenv(SETTING, raising=False)
    spot = fields({SETTING: "60s"}, spot=True)
    assert rehearsal.interruption_grace(spot, None) == 120.0
    assert rehearsal.interruption_grace(spot, 3.0) is None
    assert rehearsal.interruption_grace(fields({}, spot=True), None) is None
    given = fields({SETTING: "60s", "LAUNCHBAY_GRACE_SECONDS": "4"}, spot=True)
    assert rehearsal.interruption_grace(given, None) is None
