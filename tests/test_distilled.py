"""The compact construction's offline half: a labeller distilled from a labelled sample.

On ``mini`` the generator knows every paper's true direction, so the mechanics can be checked
before any model labels exist: distilled from 80 true labels per field (the size of a compact
draft's sample) and the directions' texts, the labeller must recover the true direction of every
membership about as well as the offline instrument, whose prototypes saw every pre-cutoff
paper's true label, and its held-out agreement must say how well it does."""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np
import pandas as pd

from rap_benchmark.pipeline.instrument.distilled import FOLDS, Labelled, distil
from rap_benchmark.pipeline.instrument.offline import calibrate_and_assign

SAMPLE = 80


def _sample(mini, fid: str, group: pd.DataFrame) -> Labelled:
    dated = group.merge(mini.papers[["arxiv_id", "date"]], on="arxiv_id")
    pre = dated.loc[dated["date"] < mini.spec.codebook_cutoff]
    order = [hashlib.sha256(f"sample|{p}".encode()).hexdigest() for p in pre["arxiv_id"]]
    chosen = pre.assign(h=order).sort_values("h").head(SAMPLE)
    labels = pd.DataFrame({"arxiv_id": chosen["arxiv_id"], "primary": chosen["true_direction"], "secondary": None})
    directions = [dataclasses.asdict(d) for d in mini.codebooks[fid].directions]
    return Labelled.from_labels(labels, directions)


def test_a_labeller_distilled_from_a_labelled_sample_recovers_minis_true_directions(mini) -> None:
    truth = mini.extras["truth"]
    units = {fid: (g["arxiv_id"].tolist(), _sample(mini, fid, g)) for fid, g in truth.groupby("field_id")}
    labeller, agreement = distil(mini.papers, units, mini.spec)
    memberships = truth[["arxiv_id", "field_id"]]
    labels, _ = calibrate_and_assign(mini.papers, memberships, list(mini.codebooks.values()), labeller, mini.spec)
    joined = labels.merge(truth, on=["arxiv_id", "field_id"])
    exact = float((joined["primary"] == joined["true_direction"]).mean())
    offline = mini.assignments.merge(truth, on=["arxiv_id", "field_id"])
    offline_exact = float((offline["primary"] == offline["true_direction"]).mean())
    held_out = float(np.mean([fit.held.agreement for fit in agreement.values()]))
    assert exact >= 0.75 and exact >= offline_exact - 0.06, (exact, offline_exact)
    assert abs(held_out - exact) < 0.05, (held_out, exact)  # the held-out figure says how good it is
    assert all(fit.held.n == SAMPLE for fit in agreement.values())  # every sampled paper is held out once
    assert not any(len(fit.outside) for fit in agreement.values())  # no paper outside: no outside prototype
    shares = labels["type"].value_counts(normalize=True)
    assert abs(shares["boundary"] + shares.get("bridge", 0.0) - 0.4418) < 0.02  # the paper's tie calibration


def test_held_out_folds_never_train_on_the_paper_they_score() -> None:
    """Each labelled paper is scored by prototypes fitted without its label: a labeller that could
    see it would score a paper whose text is unique to its label perfectly; this one cannot."""
    import scipy.sparse as sp

    from rap_benchmark.pipeline.instrument.distilled import fit_field

    n = 8 * FOLDS * 2
    ids = tuple(f"p{i}" for i in range(n))
    primary = np.arange(n) % 8
    # every paper's only term is its own: no prototype fitted without it can point at it
    counts = sp.identity(n, format="csr", dtype=np.float32)
    lab = Labelled(ids, primary, np.full(n, -1), tuple(f"d{k}" for k in range(8)))
    text = sp.csr_matrix((8, n), dtype=np.float32)
    fit = fit_field(counts, lab, text, counts)
    assert fit.held.n == n and fit.held.agreement <= 1 / 8 + 0.1


def test_papers_the_model_placed_outside_the_eight_teach_the_labeller_to_place_members_outside(mini, tmp_path) -> None:
    """A field whose clustering pulled in papers of other fields (a shared word): the model labels
    the ones in its sample ``not_in_field``. The labeller learns an outside prototype from them and
    places outside as large a share of the field's papers as the model did of its sample, so most
    of the intruders it never saw become ``other`` (never counted), the field's own papers keep
    their true directions, and the held-out outside recall says how well it does."""
    truth = mini.extras["truth"]
    fields = sorted(truth["field_id"].unique())
    units, unseen = {}, []
    for j, fid in enumerate(fields):
        own = truth.loc[truth["field_id"] == fid, ["arxiv_id", "true_direction"]]
        other = truth.loc[truth["field_id"] == fields[(j + 1) % len(fields)], "arxiv_id"]
        extra = sorted(set(other) - set(own["arxiv_id"]))
        extra = extra[:: max(1, len(extra) // (len(own) // 4))]  # about a fifth of the members are intruders
        members = pd.concat([own, pd.DataFrame({"arxiv_id": extra, "true_direction": None})], ignore_index=True)
        dated = members.merge(mini.papers[["arxiv_id", "date"]], on="arxiv_id")
        pre = dated.loc[dated["date"] < mini.spec.codebook_cutoff]
        order = [hashlib.sha256(f"sample|{p}".encode()).hexdigest() for p in pre["arxiv_id"]]
        chosen = pre.assign(h=order).sort_values("h").head(SAMPLE)
        labels = pd.DataFrame(
            {"arxiv_id": chosen["arxiv_id"], "primary": chosen["true_direction"].fillna("other"), "secondary": None}
        )
        directions = [dataclasses.asdict(d) for d in mini.codebooks[fid].directions]
        units[fid] = (members["arxiv_id"].tolist(), Labelled.from_labels(labels, directions))
        unseen += [(p, fid) for p in sorted(set(extra) - set(chosen["arxiv_id"]))]
    labeller, fits = distil(mini.papers, units, mini.spec)
    assert all(len(fit.outside) == 1 and fit.held.n_outside >= 5 for fit in fits.values())
    members = pd.DataFrame([(p, fid) for fid, (ms, _) in units.items() for p in ms], columns=["arxiv_id", "field_id"])
    labels, _ = calibrate_and_assign(mini.papers, members, list(mini.codebooks.values()), labeller, mini.spec)
    unseen = pd.DataFrame(unseen, columns=["arxiv_id", "field_id"])
    placed_out = float(labels.merge(unseen, on=["arxiv_id", "field_id"])["primary"].eq("other").mean())
    joined = labels.merge(truth, on=["arxiv_id", "field_id"])
    exact = float((joined["primary"] == joined["true_direction"]).mean())
    n_out = sum(fit.held.n_outside for fit in fits.values())
    recall = sum(fit.held.outside_recall * fit.held.n_outside for fit in fits.values()) / n_out
    assert placed_out >= 0.8, placed_out
    assert exact >= 0.75, exact
    assert 0.8 <= recall <= placed_out + 0.05, (recall, placed_out)  # held out: a fair, if cautious, estimate
    # frozen (rap build --freeze-instrument), the outside class labels as it did
    from rap_benchmark.pipeline.instrument.frozen import FrozenInstrument, load, save

    save(FrozenInstrument(None, labeller, None, None, (), mini.spec.codebook_cutoff), tmp_path)
    thawed = load(tmp_path).prototypes
    prepared, rows = labeller.prepare(mini.papers), np.arange(len(mini.papers))
    for fid in fields:
        assert np.array_equal(thawed.similarities(prepared, fid, rows), labeller.similarities(prepared, fid, rows))


def test_learning_curve_at_every_label_is_the_builds_own_held_out_figure(mini) -> None:
    """``held_out_curve`` (benchmarks/labeller_curve.py) scores the build's own folds: at fraction
    1 it must give each field exactly the agreement :func:`distil` reports, and fewer labels may
    not train a fold on the paper it scores (fraction ~0: the directions' texts and the pool only)."""
    from rap_benchmark.pipeline.instrument.distilled import held_out_curve

    truth = mini.extras["truth"]
    units = {fid: (g["arxiv_id"].tolist(), _sample(mini, fid, g)) for fid, g in truth.groupby("field_id")}
    _, fits = distil(mini.papers, units, mini.spec)
    points = held_out_curve(mini.papers, units, mini.spec, [1e-9, 0.5, 1.0], seeds=(0, 1))
    at = {(p.field_id, p.fraction): p for p in points}
    for fid, fit in fits.items():
        assert at[(fid, 1.0)].held.agreement == fit.held.agreement and at[(fid, 1.0)].held.n == fit.held.n
        assert at[(fid, 1.0)].trained == SAMPLE * (FOLDS - 1) / FOLDS
        assert at[(fid, 1e-9)].trained == 0
        assert 0 < at[(fid, 0.5)].trained < SAMPLE
    full = np.mean([at[(fid, 1.0)].held.agreement for fid in fits])
    none = np.mean([at[(fid, 1e-9)].held.agreement for fid in fits])
    assert full > none  # mini's true labels teach more than the directions' texts alone


def test_training_draws_are_nested_and_near_their_fraction() -> None:
    from rap_benchmark.pipeline.instrument.distilled import training_draw

    ids = [f"p{i}" for i in range(4000)]
    small, large = training_draw(ids, 0.25, seed=3), training_draw(ids, 0.6, seed=3)
    assert not (small & ~large).any()  # one seed: a smaller fraction keeps a subset
    assert abs(small.mean() - 0.25) < 0.03 and abs(large.mean() - 0.6) < 0.03
    assert (training_draw(ids, 0.25, seed=4) != small).any()  # another seed, another draw
    assert training_draw(ids, 1.0, seed=0).all()
