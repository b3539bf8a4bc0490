"""End to end through ``pldemu pytest``: pldemu's own prepared-worker programs (tests/pypto_frontend/
prepared_programs, written here in pypto's style, not collected by pldemu's own suite). Resident weights,
stacked shards and the worker's contracts pass at every rank count they take; pypto-lib #960's pattern (an
epoch restarting every dispatch on kept windows) is reported on its second dispatch with both the race and
its cause, and both fixes are clean over every dispatch, also under jitter and deferred visibility;
submitted dispatches that overlap race, and a shard sent to the wrong device is refused at its line.
SubWorkers run in this process between device rounds (1-4 ranks), with callbacks, return-style calls and
HOST intermediates; one that raises raises to the caller."""

from __future__ import annotations

from pathlib import Path

import pytest
from prefetch import Outcome, line_in, prefetched, session_outcomes

PROGRAMS = Path(__file__).resolve().parent / "prepared_programs"
FILES = ("prepared_resident.py", "prepared_epoch.py", "prepared_subworker.py")

PASSING = (
    "test_a_resident_weight_serves_three_bounded_submits", "test_a_resident_output_is_read_back_raw",
    *(f"test_stacked_weights_one_shard_per_device[{n}]" for n in range(1, 6)),
    "test_permuted_placement_follows_worker_ids", "test_the_worker_s_contracts",
    "test_what_the_ranks_cannot_hold_is_refused_before_it_is_sent",
    *(f"test_credit_retired_every_dispatch[{n}]" for n in range(2, 6)),
    *(f"test_epoch_counted_on[{n}]" for n in range(2, 6)),
    *(f"test_a_host_task_between_two_device_rounds[{n}]" for n in range(1, 5)),
    "test_a_callback_sees_this_process_and_the_device_result", "test_an_unbound_abstract_sub_worker_is_refused_at_prepare",
)
RESTARTING = tuple(f"test_epoch_restarting_every_dispatch[{n}]" for n in range(2, 6))


def _session(key: str, *flags: str) -> pytest.MarkDecorator:
    return pytest.mark.prefetch(key, "pytest", "-p", "no:cacheprovider", "--device", "0-4", "--pldemu-timeout", "15",
                                *flags, "--junitxml={tmp}/report.xml", *(str(PROGRAMS / f) for f in FILES))


@pytest.fixture(scope="class")
def outcomes(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """test name -> outcome of the class's one ``pldemu pytest`` run over every program."""
    return session_outcomes(prefetched(request, tmp_path_factory))


def _failed(outcomes: dict[str, Outcome], test: str) -> str:
    outcome, text = outcomes[test]
    assert outcome == "failed", (outcome, text)
    assert "Traceback" not in text and "pldemu/pypto/" not in text, text
    return text


def _line(text: str) -> str:
    return line_in(PROGRAMS, "prepared_epoch.py", text)


def _checks(outcomes: dict[str, Outcome]) -> None:
    for test in PASSING:
        assert outcomes[test][0] == "passed", (test, outcomes[test])
    for test in RESTARTING:
        text = _failed(outcomes, test)
        assert "(dispatch 2 of its prepared worker)" in text, text
        assert "stale-credit" in text and "in call 2 is met by what call 1 left" in text, text
        assert f"[{_line('pld.tile.remote_store')}] (call 2)" in text, text
        assert f"[{_line('y = pl.store(pl.load(buf')}] (call 2)" in text, text
    text = _failed(outcomes, "test_submitted_dispatches_overlap")
    assert "races found" in text and "(call 1) ||" in text and "(call 2): neither happens before" in text, text
    text = _failed(outcomes, "test_a_shard_on_the_wrong_device_is_refused")
    assert "w[0] is resident on worker 1, but the program dispatches it to device 0" in text, text
    outcome, text = outcomes["test_a_sub_worker_that_raises"]  # the SubWorker's own exception, as raised
    assert outcome == "failed" and "AssertionError: must_be_five: got 6.0" in text, text


@_session("prepared-programs")
class TestPlain:
    def test_outcomes(self, outcomes: dict[str, Outcome]) -> None:
        _checks(outcomes)


@_session("prepared-programs-disturbed", "--pldemu-jitter", "50", "--pldemu-visibility", "deferred")
class TestJitterAndDeferredVisibility:
    def test_outcomes(self, outcomes: dict[str, Outcome]) -> None:
        _checks(outcomes)


pytestmark = pytest.mark.launcher


def test_every_program_file_is_run() -> None:
    assert {p.name for p in PROGRAMS.glob("*.py")} == set(FILES)
