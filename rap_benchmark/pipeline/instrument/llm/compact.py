"""The compact construction: a capable model's codebooks at a few requests per field.

Per candidate field (a cluster of the offline field step):

1. ``compact_draft``: ONE request shows a sample of the field's pre-cutoff papers (titles and
   abstract openings) and its most distinctive title phrases; the model names and defines the
   field, writes exactly eight directions (name, definition, inclusion, exclusion, exemplars) and
   labels every sampled paper (primary, secondary, type), or answers that the candidate has no
   topical core (it is dropped and listed). A second, independent draft (another sample order
   and draw, by the second drafting model) is asked for the fields of the parallel instrument.
   Candidates the model names identically are merged (the union of their memberships, the
   largest one's codebook) and listed.
2. ``assign`` (optional, ``label_papers`` per field): more of the field's papers labelled against
   the frozen draft, through the paper construction's labelling prompt and validation.
3. Every membership is then labelled offline by a classifier distilled from the model's labels
   (:mod:`rap_benchmark.pipeline.instrument.distilled`), with the paper's tie and bridge
   calibration; its agreement with the model's own labels on held-out labelled papers is
   reported. No request is sent after the model's labels.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from rap_benchmark.core.records import Assignment, Codebook
from rap_benchmark.pipeline.fields import FieldInfo
from rap_benchmark.pipeline.instrument.llm import prompts as P
from rap_benchmark.pipeline.instrument.llm.ask import ask
from rap_benchmark.pipeline.instrument.llm.assign import ASSIGNMENT_COLUMNS, label_batch
from rap_benchmark.pipeline.instrument.llm.client import RoundPending
from rap_benchmark.pipeline.instrument.llm.prompts import Stage
from rap_benchmark.pipeline.instrument.llm.records import PipelineResult
from rap_benchmark.pipeline.instrument.llm.stages import DistinctivePhrases, Pipeline, _order
from rap_benchmark.pipeline.instrument.llm.validate import (
    CompactDraft,
    NoTopicalCore,
    OutOfField,
    to_codebook,
    validate_compact_draft,
)

if TYPE_CHECKING:  # imported where it is used: the distiller's scipy and features load only for a compact build
    from rap_benchmark.pipeline.instrument.distilled import FieldFit

TOKENS_PER_LABEL = 40
DRAFT_BASE_TOKENS = 1600  # name, definition and eight directions


@dataclass(frozen=True)
class DraftRequest:
    """One compact draft to ask: the candidate, which draft (A or B), the model and the sample."""

    candidate: str
    which: str
    model: str
    sample: tuple[str, ...]
    prompt: str

    @property
    def budget(self) -> int:
        return DRAFT_BASE_TOKENS + TOKENS_PER_LABEL * len(self.sample)


def min_papers(n_sample: int) -> int:
    """Sampled papers each direction must be the primary of: 3% of the sample, at least 2."""
    return max(2, math.ceil(0.03 * n_sample))


def parallel_candidates(candidates: Sequence[str], n: int, seed: int) -> list[str]:
    """The candidates that get a second, independent draft: ``n`` of them by a hash of the seed
    (all when ``n`` is at least their number), sorted."""
    if n >= len(candidates):
        return sorted(candidates)
    key = lambda c: hashlib.sha256(f"{seed}|parallel|{c}".encode()).digest()  # noqa: E731
    return sorted(sorted(candidates, key=key)[:n])


@dataclass
class CompactField:
    """One field of the compact construction: its candidates (``sources``, ``lead`` the one whose
    drafts it keeps), members, drafts and the model's labels by draft, the distilled labellers'
    held-out agreement, and notes."""

    field_id: str
    name: str
    sources: tuple[str, ...]
    n_pre: int
    members: list[str]
    lead: str
    drafts: dict[str, CompactDraft] = field(default_factory=dict)
    labels: dict[str, dict[str, Assignment | OutOfField]] = field(default_factory=dict)  # by draft
    agreement: dict[str, FieldFit] = field(default_factory=dict)  # the distilled labeller's held-out fit, by draft
    notes: list[str] = field(default_factory=list)

    def codebook(self, which: str = "A") -> Codebook:
        d = self.drafts[which]
        return to_codebook(d.directions, self.field_id, d.name, d.definition)


def draft_requests(
    members: dict[str, list[str]],
    dates: dict[str, str],
    rows: Any,
    titles: dict[str, str],
    spec: Any,
    cfg: Any,
) -> list[DraftRequest]:
    """Every compact draft of a corpus: A for each candidate, B for the parallel candidates."""
    cids = sorted(members)
    eligible = {c: [p for p in members[c] if dates[p] < spec.eligibility_end] for c in cids}
    phrases = DistinctivePhrases(eligible, titles)
    parallel = set(parallel_candidates(cids, cfg.parallel_fields, spec.seed))
    out = []
    for c in cids:
        pre = [p for p in members[c] if dates[p] < spec.codebook_cutoff]
        if not pre:
            continue
        terms = "; ".join(phrases.top((c,)))
        for which, model in zip("AB", cfg.draft_models, strict=True):
            if which == "B" and c not in parallel:
                continue
            sample = tuple(_order(spec.seed, f"compact-{which}|{c}", pre)[: cfg.compact_papers])
            prompt = P.render(
                Stage.COMPACT_DRAFT,
                corpus=P.corpus_description(spec.categories),
                terms=terms or "(none)",
                n_papers=len(sample),
                cutoff=spec.codebook_cutoff,
                papers=P.paper_lines(rows(sample), cfg.compact_abstract_chars),
                min_papers=min_papers(len(sample)),
            )
            out.append(DraftRequest(c, which, model, sample, prompt))
    return out


def check_draft(request: DraftRequest, obj: dict[str, Any]) -> CompactDraft | NoTopicalCore:
    return validate_compact_draft(obj, request.sample, request.candidate, min_papers(len(request.sample)))


def merge_identical_names(
    drafts: dict[str, CompactDraft], members: dict[str, list[str]]
) -> list[tuple[tuple[str, ...], str, CompactDraft]]:
    """Candidates whose A drafts name the field identically (case-folded) as one unit each:
    (candidate ids, the unit's largest candidate (ties to the lowest id), its draft)."""
    groups: dict[str, list[str]] = {}
    for c in sorted(drafts):
        groups.setdefault(drafts[c].name.casefold(), []).append(c)
    units = []
    for ids in groups.values():
        lead = max(ids, key=lambda c: (len(members[c]), [-ord(ch) for ch in c]))
        units.append((tuple(ids), lead, drafts[lead]))
    return units


def frame_of(labels: dict[str, Assignment | OutOfField], field_id: str) -> pd.DataFrame:
    """The model's labels of one draft as rows (arxiv_id, field_id, primary, secondary, type);
    ``not_in_field`` rows carry type ``not_in_field``."""
    rows = []
    for pid, a in sorted(labels.items()):
        if isinstance(a, OutOfField):
            rows.append((pid, field_id, "other", None, "not_in_field"))
        else:
            rows.append((pid, field_id, a.primary, a.secondary, a.type.value))
    return pd.DataFrame(rows, columns=["arxiv_id", "field_id", "primary", "secondary", "type"])


class CompactPipeline(Pipeline):
    """The compact construction over a corpus (module docstring): the paper construction's
    interface, drops and notes; :attr:`fields` is what the review shows."""

    fields: list[CompactField]

    async def run(
        self, papers: pd.DataFrame, memberships: pd.DataFrame, candidates: dict[str, FieldInfo]
    ) -> PipelineResult:
        members = self._setup(papers, memberships, candidates)
        self.fields = []
        requests = draft_requests(members, self._date, self._rows, self._title, self.spec, self.cfg)
        try:
            outs = await self._all([self._asker(r) for r in requests], Stage.COMPACT_DRAFT)
        except RoundPending as waiting:  # the drafts answered so far go into the review
            self.fields = self._assemble(self._drafts_of(requests, waiting.results, candidates), members, candidates)
            raise
        self._count(Stage.COMPACT_DRAFT, outs)
        self.fields = self._assemble(self._drafts_of(requests, outs, candidates), members, candidates)
        await self._label_more(self.fields)
        return self._distil(papers)

    def _drafts_of(
        self, requests: list[DraftRequest], outs: list[Any], candidates: dict[str, FieldInfo]
    ) -> dict[str, dict[str, CompactDraft]]:
        """The valid drafts with a topical core, by draft and candidate; every other answer noted."""
        drafts: dict[str, dict[str, CompactDraft]] = {"A": {}, "B": {}}
        for r, out in zip(requests, outs, strict=True):
            where = f"candidate {r.candidate} ({candidates[r.candidate].name}), draft {r.which}"
            if out is None:
                continue  # waits for its reply
            if out.value is None:
                self.notes.append(f"{where}: stayed invalid: {out.reason}")
            elif isinstance(out.value, NoTopicalCore):
                self.notes.append(f"{where}: no topical core: {out.value.reason}")
            else:
                drafts[r.which][r.candidate] = out.value
        return drafts

    def partial(self) -> PipelineResult:
        """What the construction had when it stopped: the fields assembled so far (for the review)."""
        result = super().partial()
        result.compact = CompactOutcome(list(self.fields), None, None, None)
        return result

    def _asker(self, r: DraftRequest) -> Callable[[], Any]:
        check = partial(check_draft, r)
        return lambda: ask(
            self.client, Stage.COMPACT_DRAFT, r.model, r.prompt, check, self.cfg, budget=self.cfg.budget(r.budget)
        )

    def _assemble(
        self,
        drafts: dict[str, dict[str, CompactDraft]],
        members: dict[str, list[str]],
        candidates: dict[str, FieldInfo],
    ) -> list[CompactField]:
        """The kept fields, numbered f000... in order of name: each A draft with a topical core
        (identically named ones merged), its B draft when it has one."""
        units = sorted(merge_identical_names(drafts["A"], members), key=lambda u: (u[2].name.casefold(), u[0]))
        out = []
        for j, (cids, lead, draft) in enumerate(units):
            fid = f"f{j:03d}"
            union = sorted(set().union(*(members[c] for c in cids)))
            f = CompactField(
                fid, draft.name, cids, sum(self._date[p] < self.spec.codebook_cutoff for p in union), union, lead
            )
            f.drafts["A"] = draft
            f.labels["A"] = dict(draft.labels)
            if lead in drafts["B"]:
                f.drafts["B"] = drafts["B"][lead]
                f.labels["B"] = dict(drafts["B"][lead].labels)
            if len(cids) > 1:
                names = ", ".join(f"{c} ({candidates[c].name})" for c in cids)
                self.notes.append(
                    f"{fid}: candidates {names} were named alike ({draft.name!r}): merged, {lead}'s draft kept"
                )
            out.append(f)
        return out

    async def _label_more(self, fields: list[CompactField]) -> None:
        """``label_papers`` more of each field's papers (dated before eligibility_end) labelled by
        the model against each frozen draft (the ``assign`` stage's prompt and validation). With
        ``parallel_shared_labels``, the model applying draft B also labels the papers drawn for
        draft A, so that the two instruments are compared on the same papers, as the paper's two
        instruments label every membership."""
        cfg = self.cfg
        if cfg.label_papers <= 0:
            return
        jobs, owners = [], []

        def ask_labels(f: CompactField, which: str, model: str, ids: list[str]) -> None:
            cb = f.codebook(which)
            lines = P.codebook_lines(cb)
            for start in range(0, len(ids), cfg.label_batch):
                batch = ids[start : start + cfg.label_batch]
                papers = P.paper_lines(self._rows(batch), cfg.label_abstract_chars)
                jobs.append(partial(label_batch, self.client, cfg, cb, lines, papers, batch, model))
                owners.append((f, which))

        for f in fields:
            chosen: dict[str, list[str]] = {}
            for which, model in zip("AB", cfg.draft_models, strict=True):
                if which not in f.drafts:
                    continue
                pool = [p for p in f.members if self._date[p] < self.spec.eligibility_end and p not in f.labels[which]]
                chosen[which] = _order(self.spec.seed, f"label-{which}|{f.lead}", pool)[: cfg.label_papers]
                ask_labels(f, which, model, chosen[which])
            if cfg.parallel_shared_labels and "B" in chosen:
                asked_b = set(chosen["B"])
                shared = [p for p in chosen["A"] if p not in f.labels["B"] and p not in asked_b]
                ask_labels(f, "B", cfg.draft_models[1], shared)
        results = await self._all(jobs, Stage.ASSIGN)
        drops = self.drops[Stage.ASSIGN]
        for (f, which), (good, bad) in zip(owners, results, strict=True):
            f.labels[which].update(good)
            drops.add(len(good) + len(bad), len(bad), next(iter(bad.values()), None))
        self._check(Stage.ASSIGN)

    def _distil(self, papers: pd.DataFrame) -> PipelineResult:
        """Every membership labelled by the labeller distilled from draft A's labels (the paper's
        tie and bridge calibration), and the parallel instrument's slots from draft B's."""
        from rap_benchmark.pipeline.instrument.distilled import distil
        from rap_benchmark.pipeline.instrument.offline import calibrate_and_assign, direction_similarities

        fields = self.fields
        codebooks = [self._titled(f.codebook("A")) for f in fields]
        mem = pd.DataFrame(
            [(p, f.field_id) for f in fields for p in f.members], columns=["arxiv_id", "field_id"]
        ).sort_values(["field_id", "arxiv_id"], kind="stable")
        if not fields:
            empty = pd.DataFrame(columns=ASSIGNMENT_COLUMNS)
            return PipelineResult([], {}, mem, empty, [], [], self.notes, self.drops)
        units = {f.field_id: (f.members, labelled(f, "A")) for f in fields}
        labeller, agree = distil(papers, units, self.spec)
        assignments, calibration = calibrate_and_assign(papers, mem, codebooks, labeller, self.spec)
        for f in fields:
            f.agreement["A"] = agree[f.field_id]
        parallel = None
        second = [f for f in fields if "B" in f.drafts]
        if second:
            units_b = {f.field_id: (f.members, labelled(f, "B")) for f in second}
            labeller_b, agree_b = distil(papers, units_b, self.spec)
            mem_b = mem.loc[mem["field_id"].isin(units_b)]
            m, sims, _ = direction_similarities(papers, mem_b, labeller_b)
            slot = np.where(sims.max(axis=1) > 0.0, sims.argmax(axis=1), -1)  # -1: outside the eight
            parallel = m[["arxiv_id", "field_id"]].assign(slot=slot.astype(np.int64))
            for f in second:
                f.agreement["B"] = agree_b[f.field_id]
        info = {f.field_id: FieldInfo(f.field_id, f.name, f.drafts["A"].definition) for f in fields}
        model_labels = pd.concat(
            [frame_of(f.labels[w], f.field_id).assign(draft=w) for f in fields for w in sorted(f.labels)],
            ignore_index=True,
        ).sort_values(["field_id", "draft", "arxiv_id"], kind="stable")[
            ["arxiv_id", "field_id", "draft", "primary", "secondary", "type"]
        ]
        return PipelineResult(
            codebooks=codebooks,
            field_info=info,
            memberships=mem.reset_index(drop=True),
            assignments=assignments,
            reports=[],
            invalid_assignments=[],
            notes=self.notes,
            drops=self.drops,
            compact=CompactOutcome(fields, labeller, calibration, parallel, model_labels.reset_index(drop=True)),
        )


@dataclass(frozen=True)
class CompactOutcome:
    """What the compact construction adds to a result: its fields (for the review and the
    ledger), the distilled labeller and its calibration (the instrument), the parallel
    instrument's slot per membership of the fields with a second draft, and every label the
    model gave (by draft)."""

    fields: list[CompactField]
    labeller: Any
    calibration: Any
    parallel: pd.DataFrame | None
    model_labels: pd.DataFrame | None = None


def labelled(f: CompactField, which: str) -> Any:
    """The model's labels of a field's draft as the distiller reads them."""
    from rap_benchmark.pipeline.instrument.distilled import Labelled

    return Labelled.from_labels(frame_of(f.labels[which], f.field_id), f.drafts[which].directions)


def frozen_instrument(outcome: CompactOutcome, codebooks: Sequence[Codebook], field_model: Any, spec: Any) -> Any:
    """The compact construction as a frozen instrument (``rap build --freeze-instrument``): the
    field rule regrouped to the kept fields (merged candidates as one), the distilled labeller and
    its calibration, so that ``rap extend`` labels new papers as the build did."""
    from rap_benchmark.core.artifacts import codebook_to_dict
    from rap_benchmark.pipeline.instrument.frozen import FrozenInstrument
    from rap_benchmark.pipeline.instrument.offline import AssignRules

    return FrozenInstrument(
        fields=field_model.regrouped([f.sources for f in outcome.fields]),
        prototypes=outcome.labeller,
        rules=AssignRules.from_spec(spec),
        calibration=outcome.calibration,
        codebooks=tuple(codebook_to_dict(cb) for cb in sorted(codebooks, key=lambda cb: cb.field_id)),
        codebook_cutoff=spec.codebook_cutoff,
    )


def summary(outcome: CompactOutcome, candidates: int, seed: int) -> dict[str, Any]:
    """The ledger's account of a compact construction: candidates and fields kept, the model's
    labels, and the distilled labellers' held-out agreement (mean over fields, with a 95% interval
    from resampling fields, seeded; the per-field range)."""
    out: dict[str, Any] = {"candidates": candidates, "fields": len(outcome.fields)}
    out["merged_candidates"] = [list(f.sources) for f in outcome.fields if len(f.sources) > 1]
    for which in ("A", "B"):
        fits = [f.agreement[which] for f in outcome.fields if which in f.agreement]
        fits = [fit for fit in fits if np.isfinite(fit.held.agreement)]
        if not fits:
            continue
        values = np.array([fit.held.agreement for fit in fits])
        rng = np.random.default_rng(seed)
        means = values[rng.integers(0, len(values), size=(2000, len(values)))].mean(axis=1)
        n_out = sum(fit.held.n_outside for fit in fits)
        found = sum(fit.held.found for fit in fits)
        out[f"draft_{which}"] = {
            "fields": len(fits),
            "model_labels": int(sum(fit.held.n + fit.held.n_outside for fit in fits)),
            "held_out_agreement": round(float(values.mean()), 4),
            "held_out_agreement_95ci": [round(float(q), 4) for q in np.quantile(means, [0.025, 0.975])],
            "held_out_agreement_range": [round(float(values.min()), 4), round(float(values.max()), 4)],
            "held_out_papers": int(sum(fit.held.n for fit in fits)),
            "held_out_outside_recall": round(found / n_out, 4) if n_out else None,
            "held_out_outside_papers": int(n_out),
            "fields_with_outside_prototype": int(sum(len(fit.outside) > 0 for fit in fits)),
        }
    return out
