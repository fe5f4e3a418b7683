"""A slowdown seen in one run pair outside the timing pairs is confirmed before it refuses (gate._confirm,
gate._judged_with_confirmation). On an H100 (2026-12-05) an honest RMSNorm, 1.34x faster in the timing pairs, was
refused by the gate "other magnitudes" on one 1.35x pair of a few-microsecond call at 4096 x 4, among some forty
one-run pairs each held to a limit of its own."""

from __future__ import annotations

import math
import random

import pytest

from kernelloop.config import load_settings
from kernelloop.verify import gate
from kernelloop.verify.audit import AuditFinding, AuditReport
from kernelloop.verify.stats import decide
from kernelloop.verify.verdict import Durations, Reason


def verdict(**settings) -> gate.Verdict:
    v = gate.Verdict.model_construct(gates=[], notes=[], settings=load_settings().verify.model_copy(update=settings))
    v.speed = decide([5.0] * 9, [1.0] * 9, threshold=1.2, confidence=0.95)
    return v


class Experiment:
    """One pair's experiment run again: the candidate's time drawn around SLOWDOWN (times the baseline's 1 ms)."""

    def __init__(self, slowdown: float, noise: float = 0.0, fails: bool = False, audit: AuditReport | None = None,
                 seed: int = 0):
        self.slowdown, self.noise, self.fails, self.audit = slowdown, noise, fails, audit
        self.random = random.Random(seed)
        self.orders: list[bool] = []

    def __call__(self) -> gate.OtherSize | None:
        self.orders.append(True)
        if self.fails:
            return None
        ratio = self.slowdown * (1 + self.random.gauss(0, self.noise))
        clean = AuditReport(source="cupti", independent_ms=1.0) if self.audit else None
        return gate.OtherSize(label="", baseline_ms=1.0, candidate_ms=ratio, baseline_audit=clean,
                              candidate_audit=self.audit)


def pair(k: int, first_run: float, experiment: Experiment | None, magnitude: int = 0) -> gate.OtherSize:
    return gate.OtherSize(label=f"with scale {k}", baseline_ms=1.0, candidate_ms=first_run,
                          magnitude=magnitude).retimed_by(experiment)


def magnitudes(v: gate.Verdict, draws: list[gate.OtherSize]) -> tuple[gate.GateResult, list[Reason]]:
    reasons: list[Reason] = []
    gate._judged_with_confirmation(v, reasons, "other magnitudes", lambda: gate._speed_on_other_values(
        v, draws, reasons, None, "other magnitudes"), draws, Durations(), lambda p: None)
    rows = [g for g in v.gates if g.gate == "other magnitudes"]
    assert len(rows) == 1, rows  # judged again, not appended twice
    return rows[0], reasons


def test_one_noisy_pair_over_its_limit_is_run_again_and_passes():
    spike = Experiment(0.9, noise=0.03)
    draws = [pair(0, 1.35, spike)] + [pair(k, 0.9, Experiment(0.9)) for k in range(1, 8)]
    row, reasons = magnitudes(verdict(), draws)
    assert row.status == "pass" and not reasons, row.detail
    assert len(spike.orders) == 3
    assert draws[0].confirmed_runs == 3 and draws[0].ratio()[0] < 1.0
    assert "median of 3 more runs" in row.detail, row.detail


def test_a_real_slowdown_stays_one_when_run_again():
    draws = [pair(0, 1.5, Experiment(1.5, noise=0.03))] + [pair(k, 0.9, Experiment(0.9)) for k in range(1, 8)]
    row, reasons = magnitudes(verdict(), draws)
    assert row.status == "fail" and reasons == [Reason.not_faster], row.detail
    # its median over the policy: measured up to confirm_runs_most before it refuses (round 263)
    assert draws[0].confirmed_runs == 9 and draws[0].ratio()[0] > 1.4


def test_slower_everywhere_stays_slower_in_the_mean_when_a_secret_subset_is_run_again():
    # 1.2x at every scale (each under its 1.25x, the mean over its 1.1x): the members run again are a random
    # subset, so the mean is not pulled down by running only its slowest members again
    for seed in range(20):
        draws = [pair(k, 1.2 * (1 + random.Random(seed * 100 + k).gauss(0, 0.02)),
                      Experiment(1.2, noise=0.02, seed=seed * 100 + k), magnitude=1) for k in range(12)]
        row, reasons = magnitudes(verdict(), draws)
        assert row.status == "fail" and reasons, row.detail
        assert all(d.confirmed_runs for d in draws)  # no more members than confirm_draws: every one run again


def test_a_pair_whose_run_again_fails_keeps_its_one_run():
    draws = [pair(0, 1.5, Experiment(0.9, fails=True))] + [pair(k, 0.9, Experiment(0.9)) for k in range(1, 4)]
    row, reasons = magnitudes(verdict(), draws)
    assert row.status == "fail" and reasons, row.detail
    assert draws[0].confirmed_runs == 0


def test_every_run_again_is_audited():
    # a candidate that games the timer where it is run again is caught there, as in its first run
    base = AuditReport(source="cupti", independent_ms=1.0)
    escaped = AuditReport(source="cupti", independent_ms=1.0, findings=[AuditFinding(
        reason="timer_escape", message="GPU work ran outside the timed window")])
    draws = [pair(0, 1.5, Experiment(0.5, audit=escaped))]
    draws[0].baseline_audit = draws[0].candidate_audit = base
    v = verdict()
    reasons: list[Reason] = []
    original = gate._judge_one
    try:
        gate._judge_one = lambda cand, baseline, vs: cand  # the candidate's own findings stand
        gate._judged_with_confirmation(v, reasons, "other magnitudes", lambda: gate._speed_on_other_values(
            v, draws, reasons, None, "other magnitudes"), draws, Durations(), lambda p: None)
    finally:
        gate._judge_one = original
    assert reasons == [Reason.timer_escape], (reasons, v.gates)
    assert any(g.status == "fail" and "run again" in g.detail for g in v.gates), v.gates


def test_the_slowest_over_their_limit_are_run_again_first_and_no_more_than_confirm_draws(monkeypatch):
    sampled: list[tuple[int, int]] = []
    monkeypatch.setattr(gate, "_secret_sample", lambda n, k: sampled.append((n, k)) or [9])
    experiments = [Experiment(0.9) for _ in range(10)]
    firsts = [1.6, 1.5, 1.4] + [0.9] * 7
    draws = [pair(k, r, e) for k, (r, e) in enumerate(zip(firsts, experiments))]
    row, _ = magnitudes(verdict(confirm_draws=2, confirm_rounds=1), draws)
    # the two slowest over their limit, and the secret sample of 2 of the 10 (here the last)
    assert [d.confirmed_runs > 0 for d in draws] == [True, True] + [False] * 7 + [True] and sampled == [(10, 2)]
    assert row.status == "fail", row.detail  # the third's one run at 1.4x stands


def test_confirm_draws_zero_refuses_on_one_run():
    spike = Experiment(0.9)
    draws = [pair(0, 1.35, spike)] + [pair(k, 0.9, Experiment(0.9)) for k in range(1, 8)]
    row, _ = magnitudes(verdict(confirm_draws=0), draws)
    assert row.status == "fail" and not spike.orders


def test_other_sizes_and_caller_layouts_are_confirmed_too():
    # the gate "other sizes": one size's one run 1.4x over its 1.2x limit, 1.0x run again
    sizes = [gate.OtherSize(label=f"size {k}", baseline_ms=1.0, candidate_ms=1.4 if k == 0 else 0.8,
                            size_key=(-1, k)).retimed_by(Experiment(0.8 if k else 1.0)) for k in range(5)]
    v, reasons = verdict(), []
    gate._judged_with_confirmation(v, reasons, "other sizes", lambda: gate._speed_at_other_sizes(
        v, sizes, reasons, None), sizes, Durations(), lambda p: None)
    row = next(g for g in v.gates if g.gate == "other sizes")
    assert row.status == "pass" and not reasons, row.detail
    # the gate "caller layouts": one layout 1.3x slower than the baseline at the default size in one run
    layouts = [gate.LayoutTime(aligned=True, size=gate.OtherSize(
        label=f"layout {k}", baseline_ms=1.0, candidate_ms=1.3 if k == 0 else 0.2).retimed_by(Experiment(0.2)))
        for k in range(4)]
    v, reasons = verdict(), []
    gate._judged_with_confirmation(v, reasons, "caller layouts", lambda: gate._speed_in_caller_layouts(
        v, layouts, reasons, []), [layout.size for layout in layouts], Durations(), lambda p: None)
    row = next(g for g in v.gates if g.gate == "caller layouts")
    assert row.status == "pass" and not reasons, row.detail


def test_a_means_limit_narrows_with_its_members():
    # red team round 257: 1 + 2 x the median spread is one member's noise; over 19 sizes at 5 % it let 1.12x slower
    # at every one pass in 57 % once one-run pairs no longer refused it
    many = [gate.OtherSize(label=f"size {k}", baseline_ms=1.0, candidate_ms=1.0, baseline_spread=0.048)
            for k in range(19)]
    assert gate._other_sizes_mean_limit(many) == 1.1
    assert gate._other_sizes_mean_limit(many[:2]) > 1.12  # few members: as wide as before, no wider


def slowed_everywhere(slowdown: float, noise: float, trials: int = 60, members: int = 19,
                      slow_process: tuple[float, float] = (0.0, 1.0), only_first: bool = False) -> float:
    """How often the gate "other sizes" passes a part SLOWDOWN x the baseline at each of MEMBERS other sizes, each
    run with NOISE (lognormal, per run), one-run pairs confirmed; SLOW_PROCESS (p, x): in a share p of its processes
    the candidate takes a path x times slower; ONLY_FIRST: slower at the first size only, at parity elsewhere."""
    passed = 0
    for trial in range(trials):
        rng = random.Random(trial)

        def one(k: int) -> gate.OtherSize:
            base, again = (math.exp(rng.gauss(0, noise)) for _ in range(2))
            path = slow_process[1] if rng.random() < slow_process[0] else 1.0
            return gate.OtherSize(label=f"size {k}", baseline_ms=base,
                                  candidate_ms=(1.0 if only_first and k else slowdown) * path *
                                  math.exp(rng.gauss(0, noise)),
                                  baseline_spread=max(base, again) / min(base, again) - 1, size_key=(-1, k))
        sizes = [one(k) for k in range(members)]
        for k, s in enumerate(sizes):
            s.retimed_by(lambda k=k: one(k))
        v, reasons = verdict(), []
        gate._judged_with_confirmation(v, reasons, "other sizes", lambda: gate._speed_at_other_sizes(
            v, sizes, reasons, None), sizes, Durations(), lambda p: None)
        passed += not reasons
    return passed / trials


def test_slower_at_every_size_is_refused_and_parity_is_not():
    assert slowed_everywhere(1.15, 0.05) < 0.05
    assert slowed_everywhere(1.12, 0.05) < 0.25
    assert slowed_everywhere(1.0, 0.05) > 0.95
    assert slowed_everywhere(1.0, 0.08) > 0.9


def test_a_small_gate_gets_no_second_chance_at_one_runs_noise():
    # red team round 258: five members at 5 % noise, 1.15x slower at each, passed in 40 % (22 % on first runs, and
    # confirmation judged the median of three at one run's noise); a mean passing on its noise allowance only is
    # measured again, and members averaging four runs are judged at their own noise
    assert slowed_everywhere(1.15, 0.05, members=5, trials=120) < 0.06
    assert slowed_everywhere(1.15, 0.08, members=5, trials=120) < 0.15
    assert slowed_everywhere(1.0, 0.05, members=5, trials=120) > 0.95
    assert slowed_everywhere(1.0, 0.08, members=5, trials=120) > 0.9


def test_a_slow_path_in_some_processes_counts_in_the_means():
    # red team round 258: 3x in one process of ten (1.2x on average for a caller) hid behind the median of three;
    # here one of five (1.4x on average), so that nearly every verification's first runs meet it somewhere
    assert slowed_everywhere(1.0, 0.03, slow_process=(0.2, 3.0), trials=80) < 0.1


def test_a_mean_passing_on_its_noise_allowance_is_measured_again():
    # 1.13x at each of five scales: under each one's 1.25x; the mean over 1.1x, under its one-run noise limit
    experiments = [Experiment(1.13, noise=0.01, seed=k) for k in range(5)]
    draws = [pair(k, 1.13, e, magnitude=1) for k, e in enumerate(experiments)]
    v = verdict()
    v.speed.baseline.relative_iqr = 0.08  # a noisy baseline: the one-run limit is wide
    row, reasons = magnitudes(v, draws)
    # measured again while the mean stays unclear: three runs, then up to confirm_runs_most (round 263)
    assert all(len(e.orders) == 9 for e in experiments), [len(e.orders) for e in experiments]
    assert all(d.averaged_runs() == 10 for d in draws)
    assert row.status == "fail" and reasons == [Reason.not_faster], row.detail


def test_a_candidate_failing_in_a_run_again_is_refused():
    class Crashing(Experiment):
        def __call__(self):
            self.orders.append(True)
            return Reason.run_failed, "exit code 139 (a segmentation fault)"
    draws = [pair(0, 1.5, Crashing(0.9))] + [pair(k, 0.9, Experiment(0.9)) for k in range(1, 4)]
    row, reasons = magnitudes(verdict(), draws)
    assert row.status == "fail" and reasons == [Reason.run_failed], row.detail
    assert "the candidate failed where the baseline ran clean" in row.detail


def test_the_means_noise_narrows_with_the_runs_each_member_averages():
    one_run = gate._mean_noise_limit(1.0, 0.1, [1] * 25)
    four_runs = gate._mean_noise_limit(1.0, 0.1, [1] * 25, [4] * 25)
    assert math.isclose(math.log(four_runs), math.log(one_run) / 2, rel_tol=1e-9)
    assert gate._mean_noise_limit(1.0, 0.1, [1] * 25, [1] * 25) == one_run


def test_the_pooled_noise_narrows_a_limit_and_never_widens_it():
    # red team round 259: re-runs draw fresh inputs, and a baseline whose time follows its inputs showed a spread
    # that a pair's ratio cancels: 1.15x slower everywhere passed 69 % at five members
    sizes = [gate.OtherSize(label=f"size {k}", baseline_ms=1.0, candidate_ms=1.0, baseline_spread=0.03,
                            run_ratios=[1.0] * 4, baseline_runs=[1.0, 1.3, 0.8, 1.2]) for k in range(5)]
    first_look = 0.03 / gate.MEDIAN_SPREAD_SIGMAS
    assert gate._other_sizes_sigma(sizes) == first_look
    for size in sizes:
        size.baseline_runs = [1.0, 1.001, 0.999, 1.0]
    assert gate._other_sizes_sigma(sizes) < first_look / 10


def test_caller_layouts_confirm_the_members_of_their_mean():
    # red team round 259: an unclear mean re-ran the default-size layouts (in no mean) and none of the guarded sizes
    # (1.16x on first runs at three sizes: under each size's 1.2x, over the mean's limit; a failing mean confirms its
    # members, the guarded sizes among them, not the gate's layout runs: round 261)
    guarded = [gate.OtherSize(label=f"size {k}", baseline_ms=1.0, candidate_ms=1.16, baseline_spread=0.05,
                              size_key=(-1, k)).retimed_by(Experiment(1.0)) for k in range(3)]
    at_default = Experiment(0.2)
    layouts = [gate.LayoutTime(aligned=True, size=gate.OtherSize(
        label=f"layout {k}", baseline_ms=1.0, candidate_ms=0.2).retimed_by(at_default)) for k in range(4)]
    elsewhere = Experiment(1.0)
    layouts += [gate.LayoutTime(aligned=True, default_size=False, size_key=(-1, k), size=gate.OtherSize(
        label=f"layout at size {k}", baseline_ms=1.0, candidate_ms=1.16).retimed_by(elsewhere)) for k in range(3)]
    v, reasons = verdict(), []
    gate._judged_with_confirmation(v, reasons, "caller layouts", lambda: gate._speed_in_caller_layouts(
        v, layouts, reasons, guarded), [layout.size for layout in layouts], Durations(), lambda p: None)
    assert not at_default.orders and len(elsewhere.orders) == 9
    assert all(size.confirmed_runs == 3 for size in guarded)
    row = next(g for g in v.gates if g.gate == "caller layouts")
    assert row.status == "pass" and not reasons, row.detail


def test_every_unclear_group_of_magnitudes_is_confirmed_not_only_the_slowest():
    # red team round 260: a parity group that noise made the slowest was confirmed alone, and the slow group, then
    # the slowest, passed on one run each at a one-run limit (1.15x: 17 % at 8 % noise)
    parity = [pair(k, 1.14, Experiment(1.0), magnitude=0) for k in range(3)]
    slow = [pair(k, 1.13, Experiment(1.15), magnitude=1) for k in range(3, 5)]
    v = verdict()
    v.speed.baseline.relative_iqr = 0.08
    row, reasons = magnitudes(v, parity + slow)
    assert all(d.confirmed_runs for d in slow), [d.confirmed_runs for d in slow]
    assert row.status == "fail" and reasons == [Reason.not_faster], row.detail


def test_a_gate_still_failing_after_confirmation_confirms_the_rest_in_another_round():
    # three pairs over their limit, two confirmed per round: the third in the second round
    draws = [pair(k, r, Experiment(0.9)) for k, r in enumerate([1.6, 1.5, 1.4] + [0.9] * 3)]
    row, reasons = magnitudes(verdict(confirm_draws=2), draws)
    assert all(d.confirmed_runs for d in draws[:3])
    assert row.status == "pass" and not reasons, row.detail


def test_a_confirmation_that_breaks_off_leaves_the_judgement_standing():
    # red team round 261: the gate's rows and reasons were deleted before confirming, and an exception there left
    # a verdict with neither
    class Broken(Experiment):
        def __call__(self):
            raise OSError("the sandbox's work directory vanished")
    draws = [pair(0, 1.5, Broken(0.9))] + [pair(k, 0.9, Experiment(0.9)) for k in range(1, 4)]
    v, reasons = verdict(), []
    try:
        gate._judged_with_confirmation(v, reasons, "other magnitudes", lambda: gate._speed_on_other_values(
            v, draws, reasons, None, "other magnitudes"), draws, Durations(), lambda p: None)
    except OSError:
        pass
    assert reasons == [Reason.not_faster] and [g.status for g in v.gates] == ["fail"]


def test_an_unclear_mean_confirms_all_its_members_whatever_confirm_draws():
    # red team round 261: past twice confirm_draws, the last look passed an unclear mean on unconfirmed members
    experiments = [Experiment(1.13, seed=k) for k in range(30)]
    draws = [pair(k, 1.09, e, magnitude=1) for k, e in enumerate(experiments)]
    v = verdict(confirm_draws=4)
    v.speed.baseline.relative_iqr = 0.08
    row, reasons = magnitudes(v, draws)
    assert all(d.confirmed_runs for d in draws)
    assert row.status == "fail" and reasons == [Reason.not_faster], row.detail


def test_the_kept_pairs_noise_is_a_medians():
    assert gate._kept_pair_z(1) == pytest.approx((0.0, 1.0), abs=1e-6)
    assert gate._kept_pair_z(3) == pytest.approx((0.0, 0.6698), abs=1e-3)  # the variance of a median of 3: 0.4487
    mean, deviation = gate._kept_pair_z(2)  # the slower of two: E = 1 / sqrt(pi)
    assert mean == pytest.approx(1 / math.sqrt(math.pi), abs=1e-4) and deviation == pytest.approx(0.8256, abs=1e-3)
    assert gate._confirmed_noise_limit(3, 0.03) < gate.OTHER_SIZE_SLOWDOWN  # quiet: the policy's 1.2x decides
    assert gate._confirmed_noise_limit(3, 0.14) == pytest.approx(math.exp(0.14 * 3 * 0.6698), rel=1e-3)
    assert gate._confirmed_noise_limit(3, 5.0) == gate.OTHER_SIZE_NOISE_CAP


def test_a_size_under_its_limit_only_by_one_noisy_spread_is_confirmed():
    # red team round 262: the first look's limit is three times one spread of two baseline runs, so a size 1.45x
    # slower passed on one run where that spread came out at 0.2 (1.5x at one of 19 sizes: 16 % at 8 % noise)
    slow = Experiment(1.45, noise=0.02)
    sizes = [gate.OtherSize(label="size 0", baseline_ms=1.0, candidate_ms=1.45, baseline_spread=0.2,
                            size_key=(-1, 0)).retimed_by(slow)]
    sizes += [gate.OtherSize(label=f"size {k}", baseline_ms=1.0, candidate_ms=0.8, baseline_spread=0.01,
                             size_key=(-1, k)).retimed_by(Experiment(0.8)) for k in range(1, 10)]
    assert sizes[0].ratio()[0] <= sizes[0].limit()  # one run: under the limit its spread gives it
    v, reasons = verdict(), []
    gate._judged_with_confirmation(v, reasons, "other sizes", lambda: gate._speed_at_other_sizes(
        v, sizes, reasons, None), sizes, Durations(), lambda p: None)
    assert len(slow.orders) == 9 and sizes[0].confirmed_runs == 9
    row = next(g for g in v.gates if g.gate == "other sizes")
    assert row.status == "fail" and reasons == [Reason.not_faster], row.detail
    assert "size 0" in row.detail


def test_a_draw_under_its_limit_only_by_the_noise_allowance_is_confirmed():
    # the same on other magnitudes: 1.3x on one run, under the 1.32x a noisy baseline allows one run, confirmed and
    # held to what a median's noise allows (about 1.26x), not one run's
    slow = Experiment(1.3, noise=0.01)
    draws = [pair(0, 1.3, slow)] + [pair(k, 0.9, Experiment(0.9)) for k in range(1, 8)]
    v = verdict()
    v.speed.baseline.relative_iqr = 0.08 * 1.35  # one run's sigma 8 %
    row, reasons = magnitudes(v, draws)
    assert len(slow.orders) == 9
    assert row.status == "fail" and reasons == [Reason.not_faster], row.detail


def test_honest_parity_at_ten_percent_noise_is_not_refused_by_a_confirmed_median():
    # red team round 261 (P1): a confirmed median of three at parity held to the first look's 1.2x refused 16-22 %
    # at 10 % noise per run with 19-30 sizes; it is held to the noise a median of three has at the gate's noise
    assert slowed_everywhere(1.0, 0.10, members=30, trials=80) > 0.93
    assert slowed_everywhere(1.0, 0.10, members=19, trials=80) > 0.93


def test_a_median_of_three_over_the_policy_is_measured_up_to_confirm_runs_most():
    # red team round 263: held at three runs to the noise a median of three has (1.33x at 10 % noise), 1.25x at one
    # of 19 sizes passed 86 %; a median over 1.2x is measured more before it passes or refuses
    assert slowed_everywhere(1.3, 0.10, trials=100, only_first=True) < 0.5  # 69 % before (modelled: 37 %)
    assert slowed_everywhere(1.5, 0.10, trials=100, only_first=True) < 0.1  # 22 % before (4 %)
    assert slowed_everywhere(1.0, 0.10, only_first=True) > 0.95


def test_a_pass_resting_on_pairs_not_measured_enough_fails_closed_at_the_last_round():
    # red team round 263: at confirm_rounds 1 a failing gate's pairs past confirm_draws passed on one run each
    # one pair over its limit (parity when run again), six at 1.28x on one run (over the policy's 1.25x, under the
    # 1.32x a noisy baseline allows one run; parity when run again), forty at 0.9x; two confirmed per round
    draws = [pair(0, 1.6, Experiment(0.9))] + [pair(k, 1.28, Experiment(1.0)) for k in range(1, 7)] + \
        [pair(k, 0.9, Experiment(0.9)) for k in range(7, 47)]
    v = verdict(confirm_rounds=1, confirm_draws=2)
    v.speed.baseline.relative_iqr = 0.08 * 1.35
    row, reasons = magnitudes(v, draws)
    assert row.status == "fail" and reasons == [Reason.not_faster], row.detail
    assert "not measured again within confirm_rounds" in row.detail, row.detail
