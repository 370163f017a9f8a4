"""The paper's LLM construction (its codebook and assignment sections), stage by stage.

1. ``field_name``: each candidate field (a cluster of the offline field step) is named by a
   human phrase and defined, from a sample of its titles;
2. ``field_merge``: one request groups synonymous field names, shown every pair of candidates
   whose papers overlap (it is asked to group those that largely overlap); a group becomes one
   field (the union of its memberships); fields are renumbered ``f000``... in order of name;
3. ``programs``: batches of each field's pre-cutoff papers -> atomic research programs, then
   ``programs_dedupe`` (one request per field) groups duplicates, those named alike included
   (each shown as its batch worded it; code merges names only when that request stays invalid,
   and says so in the review);
4. ``draft``: two independent, variable-size drafts (4-16 directions), one per drafting model,
   from the programs and a sample of papers shown in a different order to each; each draft
   places every sampled paper in a direction or none;
5. ``absorb``: further pre-cutoff papers, in batches, are absorbed into each draft;
6. ``revise``: each draft is revised once from how many of its sample and absorbed papers each
   direction holds, then frozen; the revision places the same papers again;
7. union: every direction of the frozen drafts, pooled anonymously (sorted by name, drafter
   removed; two directions named alike stay two candidates), each with its paper count;
8. ``consolidate``: exactly eight directions, never unrelated programs merged to reach eight (a
   narrow candidate is dropped instead); retried when invalid, a count other than eight is
   repaired deterministically (:func:`~.validate.repair_consolidation`) after the retries;
9. ``assign``: every membership, several papers per request: primary, secondary, type.

Every stage sends its requests concurrently and reads answers by request (so completion order
does not matter), each unit through :func:`~.ask.ask`. A unit that stays invalid is lost; a
stage that loses more than ``max_drop_share`` of its units stops the construction
(:class:`StageLost`). With the offline fallback the build goes on: a field keeps its offline
name, a draft its unrevised form, a field without a valid consolidation is dropped, and a
membership without a valid label is kept as ``low_evidence`` (never counted) and listed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

from rap_benchmark.core.records import Codebook
from rap_benchmark.core.spec import BenchmarkSpec
from rap_benchmark.pipeline.blocks import membership_overlaps
from rap_benchmark.pipeline.fields import FieldInfo
from rap_benchmark.pipeline.instrument.llm import prompts as P
from rap_benchmark.pipeline.instrument.llm.ask import ask
from rap_benchmark.pipeline.instrument.llm.assign import ASSIGNMENT_COLUMNS, assignment_table, label_batch
from rap_benchmark.pipeline.instrument.llm.client import Client, run_all
from rap_benchmark.pipeline.instrument.llm.prompts import Stage
from rap_benchmark.pipeline.instrument.llm.records import (
    MAX_TOKENS,
    FieldReport,
    Outcome,
    PipelineConfig,
    PipelineResult,
    StageDrops,
    StageLost,
)
from rap_benchmark.pipeline.instrument.llm.validate import (
    DIRECTION_FIELDS,
    Draft,
    FieldName,
    InvalidOutput,
    NamedGroup,
    Program,
    repair_consolidation,
    to_codebook,
    validate_absorption,
    validate_codebook,
    validate_draft,
    validate_field_name,
    validate_groups,
    validate_named_groups,
    validate_programs,
)

Ask = tuple[Any, str, str, Callable[[dict[str, Any]], Any]]  # owner, model, prompt, validate
PLACE_TOKENS = 20  # of a draft's or a revision's budget per paper it places ({"id": ..., "direction": n})
FAIR_SHARE = 1 / 24  # the least share of its papers a consolidated direction should hold: a third of an eighth


def _order(seed: int, salt: str, ids: Sequence[str]) -> list[str]:
    """``ids`` in a deterministic pseudo-random order (sha256 of seed, salt and id)."""
    return sorted(ids, key=lambda i: hashlib.sha256(f"{seed}|{salt}|{i}".encode()).digest())


class DistinctivePhrases:
    """The most distinctive title phrases of a candidate field (or a merged group of them), for
    the naming prompt (:func:`rap_benchmark.pipeline.phrases.rank_phrases` against all other
    candidates' papers)."""

    TOP = 8

    def __init__(self, members: dict[str, list[str]], titles: dict[str, str]) -> None:
        from rap_benchmark.pipeline.phrases import phrase_table

        self.members = members
        ids = sorted(set().union(*members.values())) if members else []
        self.index = {p: i for i, p in enumerate(ids)}
        self.table = phrase_table([titles[p] for p in ids])

    def top(self, unit: Sequence[str]) -> list[str]:
        from rap_benchmark.pipeline.phrases import rank_phrases

        docs = sorted({self.index[p] for c in unit for p in self.members[c]})
        return [self.table.surface(key, docs) for key, _, _ in rank_phrases(self.table, docs, top=self.TOP)]


class Pipeline:
    """One LLM construction over a corpus (see the module docstring)."""

    def __init__(
        self,
        client: Client,
        config: PipelineConfig,
        spec: BenchmarkSpec,
        progress: bool = False,
        max_drop_share: float | None = None,
    ) -> None:
        self.client = client
        self.max_drop_share = max_drop_share
        self.reports: list[FieldReport] = []
        self.invalid: list[dict[str, str]] = []
        self.outside: list[dict[str, str]] = []
        self.cfg = config
        self.spec = spec
        self.progress = progress
        self.notes: list[str] = []
        self.drops: dict[str, StageDrops] = {str(st): StageDrops() for st in Stage}

    def _count(self, stage: Stage, outcomes: Sequence[Outcome]) -> None:
        for out in outcomes:
            self.drops[stage].add(1, out.value is None, out.reason)
        self._check(stage)

    def _check(self, stage: Stage) -> None:
        """Stop the construction when ``stage`` lost more than ``max_drop_share`` of its units:
        the later stages would build on what is missing (and spend on it)."""
        d = self.drops[stage]
        if self.max_drop_share is not None and d.units and d.share > self.max_drop_share:
            raise StageLost(str(stage), d)

    def partial(self) -> PipelineResult:
        """What the construction had when it stopped (for the review): reports, notes, drops."""
        mem = pd.DataFrame(columns=["arxiv_id", "field_id"])
        labels = pd.DataFrame(columns=ASSIGNMENT_COLUMNS)
        codebooks = [r.codebook for r in self.reports if r.codebook is not None]
        return PipelineResult(codebooks, {}, mem, labels, self.reports, self.invalid, self.notes, self.drops)

    async def _all(self, jobs: list[Callable[[], Any]], stage: Stage) -> list[Any]:
        return await run_all(self.client, jobs, self.cfg.concurrency, f"llm {stage}" if self.progress else None)

    async def _ask_all(
        self, stage: Stage, asks: list[Ask], count: bool = True, placed: Sequence[int] | None = None
    ) -> list[tuple[Any, Outcome]]:
        """Send every (owner, model, prompt, validate) of ``stage`` at once; (owner, outcome) in
        order. ``placed``: per ask, how many papers its reply places (its budget grows with them)."""
        budgets: list[int | None] = [None] * len(asks)
        if placed is not None:
            budgets = [self.cfg.budget(MAX_TOKENS[stage] + PLACE_TOKENS * n) for n in placed]
        jobs = [
            lambda m=m, p=p, v=v, b=b: ask(self.client, stage, m, p, v, self.cfg, budget=b)
            for (_, m, p, v), b in zip(asks, budgets, strict=True)
        ]
        outs = await self._all(jobs, stage)
        if count:
            self._count(stage, outs)
        return [(a[0], out) for a, out in zip(asks, outs, strict=True)]

    def _titled(self, cb: Codebook) -> Codebook:
        """``cb`` with its exemplars' titles recorded (the agents' prompt shows two per direction)."""
        import dataclasses

        directions = tuple(
            dataclasses.replace(d, exemplar_titles=tuple(" ".join(self._title[e].split()) for e in d.exemplars))
            for d in cb.directions
        )
        return dataclasses.replace(cb, directions=directions)

    def _rows(self, ids: Sequence[str]) -> list[tuple[str, str, str]]:
        return [(i, self._title[i], self._abstract[i]) for i in ids]

    def _setup(
        self, papers: pd.DataFrame, memberships: pd.DataFrame, candidates: dict[str, FieldInfo]
    ) -> dict[str, list[str]]:
        """Read the papers' titles, abstracts and dates; each candidate's members (candidate order)."""
        ids = papers["arxiv_id"].astype(str).to_numpy(dtype=object)
        self._title = dict(zip(ids, papers["title"].astype(str), strict=True))
        self._abstract = dict(zip(ids, papers["abstract"].astype(str), strict=True))
        self._date = dict(zip(ids, papers["date"].astype(str).str.slice(0, 10), strict=True))
        members = {
            fid: group["arxiv_id"].astype(str).tolist() for fid, group in memberships.groupby("field_id", sort=True)
        }
        return {fid: members.get(fid, []) for fid in sorted(candidates)}

    # -- entry point ---------------------------------------------------------------------------
    async def run(
        self, papers: pd.DataFrame, memberships: pd.DataFrame, candidates: dict[str, FieldInfo]
    ) -> PipelineResult:
        members = self._setup(papers, memberships, candidates)
        fields, info = await self._fields(members, candidates)
        reports = [
            FieldReport(fid, info[fid].name, sources, sum(self._date[p] < self.spec.codebook_cutoff for p in ms))
            for fid, (sources, ms) in fields.items()
        ]
        self.reports = reports
        by_id = {r.field_id: r for r in reports}
        pre = {fid: [p for p in ms if self._date[p] < self.spec.codebook_cutoff] for fid, (_, ms) in fields.items()}
        await self._programs(reports, info, pre)
        await self._drafts(reports, info, pre)
        await self._absorb_and_revise(reports, info, pre)
        for r in reports:
            r.union, r.union_papers = union_of(r.revised)
        await self._consolidate(reports, info, pre)

        codebooks = [self._titled(r.codebook) for r in reports if r.codebook is not None]
        kept = {cb.field_id for cb in codebooks}
        for r in reports:
            if r.codebook is None:
                self.notes.append(f"{r.field_id} ({r.name}) dropped: no valid codebook")
        assignments, invalid = await self._assign(codebooks, {fid: fields[fid][1] for fid in kept})
        outside = {(o["field_id"], o["arxiv_id"]) for o in self.outside}
        rows = [(p, fid) for fid in sorted(kept) for p in fields[fid][1] if (fid, p) not in outside]
        mem = pd.DataFrame(rows, columns=["arxiv_id", "field_id"]).sort_values(["field_id", "arxiv_id"])
        return PipelineResult(
            codebooks=codebooks,
            field_info={fid: info[fid] for fid in sorted(kept)},
            memberships=mem.reset_index(drop=True),
            assignments=assignments,
            reports=[by_id[f] for f in sorted(by_id)],
            invalid_assignments=invalid,
            notes=self.notes,
            drops=self.drops,
            not_in_field=self.outside,
        )

    # -- 1-2: fields ---------------------------------------------------------------------------
    def _naming_prompt(self, key: str, ids: list[str], terms: list[str], fallback: str, merged: str = "") -> str:
        spec = self.spec
        eligible = [p for p in ids if self._date[p] < spec.eligibility_end]
        sample = _order(spec.seed, f"name|{key}", eligible)[: self.cfg.name_titles]
        return P.render(
            Stage.FIELD_NAME,
            corpus=P.corpus_description(spec.categories),
            terms="; ".join(terms) or fallback,
            merged=merged,
            papers=P.paper_lines(self._rows(sample), None),
        )

    async def _fields(
        self, members: dict[str, list[str]], candidates: dict[str, FieldInfo]
    ) -> tuple[dict[str, tuple[tuple[str, ...], list[str]]], dict[str, FieldInfo]]:
        cfg = self.cfg
        cids = sorted(candidates)
        phrases = DistinctivePhrases(
            {c: [p for p in members[c] if self._date[p] < self.spec.eligibility_end] for c in cids}, self._title
        )

        prompts = {c: self._naming_prompt(c, members[c], phrases.top((c,)), candidates[c].name) for c in cids}
        named = await self._ask_all(Stage.FIELD_NAME, [(c, cfg.model, prompts[c], validate_field_name) for c in cids])
        names: dict[str, FieldName] = {}
        for cid, out in named:
            if out.value is None:
                self.notes.append(f"candidate {cid}: naming failed ({out.reason}); offline name kept")
                names[cid] = FieldName(candidates[cid].name, candidates[cid].definition)
            else:
                names[cid] = out.value
        groups: tuple[tuple[str, ...], ...] = ()
        if len(cids) > 1:
            lines = "\n".join(f"{c}: {names[c].name}. {names[c].definition}" for c in cids)
            overlaps = "\n".join(P.overlap_line(*o) for o in candidate_overlaps(members, P.SHOWN_OVERLAP))
            prompt = P.render(
                Stage.FIELD_MERGE,
                fields=lines,
                overlaps=overlaps or "(none)",
                shown_overlap=f"{P.SHOWN_OVERLAP:.2f}",
                merge_overlap=f"{P.MERGE_OVERLAP:.2f}",
            )
            check = lambda o: validate_groups(o, cids, "merge")  # noqa: E731
            [(_, out)] = await self._ask_all(Stage.FIELD_MERGE, [(None, cfg.model, prompt, check)])
            if out.value is None:
                self.notes.append(f"synonym merging failed ({out.reason}); no fields merged")
            else:
                groups = out.value
        grouped = {c for g in groups for c in g}
        units = [g for g in groups] + [(c,) for c in cids if c not in grouped]
        unions = {unit: sorted(set().union(*(members[c] for c in unit))) for unit in units}
        # a merged field is named again, from its members' names and its whole membership
        renames = [u for u in units if len(u) > 1]

        def rename(unit: tuple[str, ...]) -> str:
            merged = P.merged_line([(names[c].name, names[c].definition) for c in unit])
            lead = names[self._lead(unit, members)].name
            return self._naming_prompt("+".join(unit), unions[unit], phrases.top(unit), lead, merged)

        new_name = dict(
            await self._ask_all(Stage.FIELD_NAME, [(u, cfg.model, rename(u), validate_field_name) for u in renames])
        )
        merged = []
        for unit in units:
            fname = names[self._lead(unit, members)]
            if len(unit) > 1:
                out = new_name[unit]
                if out.value is None:
                    self.notes.append(f"renaming merged {', '.join(unit)} failed ({out.reason}); kept {fname.name!r}")
                else:
                    fname = out.value
                self.notes.append(f"merged synonyms {', '.join(unit)} as {fname.name!r}")
            merged.append((fname, unit, unions[unit]))
        merged.sort(key=lambda m: (m[0].name.casefold(), m[1]))
        fields: dict[str, tuple[tuple[str, ...], list[str]]] = {}
        info: dict[str, FieldInfo] = {}
        for j, (fname, unit, ms) in enumerate(merged):
            fid = f"f{j:03d}"
            fields[fid] = (tuple(unit), ms)
            info[fid] = FieldInfo(fid, fname.name, fname.definition)
        return fields, info

    @staticmethod
    def _lead(unit: Sequence[str], members: dict[str, list[str]]) -> str:
        """The largest candidate of a merged unit (ties: the lowest id)."""
        return max(unit, key=lambda c: (len(members[c]), [-ord(ch) for ch in c]))

    # -- 3: atomic research programs -----------------------------------------------------------
    async def _programs(
        self, reports: list[FieldReport], info: dict[str, FieldInfo], pre: dict[str, list[str]]
    ) -> None:
        cfg, spec = self.cfg, self.spec
        asks: list[Ask] = []
        for r in reports:
            sample = _order(spec.seed, f"programs|{r.field_id}", pre[r.field_id])[: cfg.program_papers]
            for start in range(0, len(sample), cfg.program_batch):
                batch = sample[start : start + cfg.program_batch]
                prompt = P.render(
                    Stage.PROGRAMS,
                    field_name=info[r.field_id].name,
                    field_definition=info[r.field_id].definition,
                    papers=P.paper_lines(self._rows(batch), cfg.abstract_chars),
                )
                asks.append((r, cfg.model, prompt, lambda o, a=frozenset(batch): validate_programs(o, a)))
        for r, out in await self._ask_all(Stage.PROGRAMS, asks):
            if out.value is None:
                r.notes.append(f"a program batch stayed invalid: {out.reason}")
                continue
            r.programs.extend(out.value)
        # the model groups duplicates, those named alike too: it sees each batch's wording
        asks = []
        for r in reports:
            r.programs_extracted = len(r.programs)
            if len(r.programs) < 2:
                continue
            pids = [f"P{i + 1}" for i in range(len(r.programs))]
            lines = "\n".join(f"{pid}. {p.name}: {p.description}" for pid, p in zip(pids, r.programs, strict=True))
            prompt = P.render(Stage.PROGRAMS_DEDUPE, field_name=info[r.field_id].name, programs=lines)
            asks.append((r, cfg.model, prompt, lambda o, pids=pids: validate_named_groups(o, pids, "dedupe")))
        for r, out in await self._ask_all(Stage.PROGRAMS_DEDUPE, asks):
            if out.value is None:
                r.programs, alike = merge_alike(r.programs)
                merged = "; ".join(f"{n!r} ({k} programs)" for n, k in alike) or "none"
                r.notes.append(
                    f"program deduplication stayed invalid ({out.reason}); programs named alike merged by code: {merged}"
                )
                continue
            r.programs = dedupe_programs(r.programs, out.value)

    # -- 4: two independent drafts -------------------------------------------------------------
    def _draft_sample(self, fid: str, pre: list[str]) -> list[str]:
        return _order(self.spec.seed, f"draft|{fid}", pre)[: self.cfg.draft_papers]

    async def _drafts(self, reports: list[FieldReport], info: dict[str, FieldInfo], pre: dict[str, list[str]]) -> None:
        cfg = self.cfg
        asks: list[Ask] = []
        placing: list[int] = []
        for r in reports:
            sample = self._draft_sample(r.field_id, pre[r.field_id])
            if not sample:
                r.notes.append("no pre-cutoff papers to draft from")
                continue
            programs = "\n".join(f"- {p.name}: {p.description}" for p in r.programs) or "- (none found)"
            allowed = frozenset(sample)
            for which, model in zip("AB", cfg.draft_models, strict=True):
                shown = sample if which == "A" else _order(self.spec.seed, f"draft-b|{r.field_id}", sample)
                prompt = P.render(
                    Stage.DRAFT,
                    field_name=info[r.field_id].name,
                    field_definition=info[r.field_id].definition,
                    programs=programs,
                    n_papers=len(shown),
                    papers=P.paper_lines(self._rows(shown), cfg.abstract_chars),
                )
                asks.append(((r, which), model, prompt, lambda o, a=allowed, s=sample: validate_draft(o, a, s)))
                placing.append(len(sample))
        for (r, which), out in await self._ask_all(Stage.DRAFT, asks, placed=placing):
            r.drafts[which] = out.value
            if out.value is None:
                r.notes.append(f"draft {which} stayed invalid: {out.reason}")

    # -- 5-6: absorption and the frozen revision -----------------------------------------------
    async def _absorb_and_revise(
        self, reports: list[FieldReport], info: dict[str, FieldInfo], pre: dict[str, list[str]]
    ) -> None:
        cfg, spec = self.cfg, self.spec
        asks: list[Ask] = []
        extra: dict[str, list[str]] = {}
        for r in reports:
            shown = set(self._draft_sample(r.field_id, pre[r.field_id]))
            rest = [p for p in _order(spec.seed, f"absorb|{r.field_id}", pre[r.field_id]) if p not in shown]
            extra[r.field_id] = rest[: cfg.absorb_papers]
            for which, model in zip("AB", cfg.draft_models, strict=True):
                draft = r.drafts.get(which)
                if draft is None:
                    continue
                r.placed[which] = dict(draft.papers)  # the draft placed its own sample
                lines = "\n".join(P.direction_line(str(i + 1), d) for i, d in enumerate(draft.directions))
                for start in range(0, len(extra[r.field_id]), cfg.absorb_batch):
                    batch = extra[r.field_id][start : start + cfg.absorb_batch]
                    prompt = P.render(
                        Stage.ABSORB,
                        field_name=info[r.field_id].name,
                        directions=lines,
                        papers=P.paper_lines(self._rows(batch), cfg.abstract_chars),
                    )
                    check = lambda o, b=batch, d=draft: validate_absorption(o, b, len(d.directions))  # noqa: E731
                    asks.append(((r, which), model, prompt, check))
        for (r, which), out in await self._ask_all(Stage.ABSORB, asks):
            if out.value is None:
                r.notes.append(f"an absorption batch of draft {which} stayed invalid: {out.reason}")
                continue
            r.placed[which].update(out.value)
        asks, placing = [], []
        for r in reports:
            sample = self._draft_sample(r.field_id, pre[r.field_id])
            pool = sample + extra[r.field_id]
            for which, model in zip("AB", cfg.draft_models, strict=True):
                draft = r.drafts.get(which)
                if draft is None:
                    continue
                placed = Draft(draft.directions, r.placed[which])
                held = placed.held()
                unplaced = placed.unplaced()
                prompt = P.render(
                    Stage.REVISE,
                    field_name=info[r.field_id].name,
                    field_definition=info[r.field_id].definition,
                    n_placed=len(placed.papers),
                    n_sample=len(draft.papers),
                    n_absorbed=len(placed.papers) - len(draft.papers),
                    directions="\n".join(
                        P.direction_line(str(i + 1), d, held[i]) for i, d in enumerate(draft.directions)
                    ),
                    n_unplaced=len(unplaced),
                    unplaced=P.paper_lines(self._rows(sorted(unplaced)[:10]), None) or "(none)",
                    n_papers=len(pool),
                    papers=P.paper_lines(self._rows(pool), None),
                )
                asks.append(((r, which), model, prompt, lambda o, a=frozenset(pool), s=pool: validate_draft(o, a, s)))
                placing.append(len(pool))
        for (r, which), out in await self._ask_all(Stage.REVISE, asks, placed=placing):
            if out.value is None:
                r.notes.append(
                    f"the revision of draft {which} stayed invalid ({out.reason}); the draft is frozen as is"
                )
                r.revised[which] = Draft(r.drafts[which].directions, r.placed[which])
            else:
                r.revised[which] = out.value

    # -- 8: consolidation to exactly eight -----------------------------------------------------
    async def _consolidate(
        self, reports: list[FieldReport], info: dict[str, FieldInfo], pre: dict[str, list[str]]
    ) -> None:
        cfg = self.cfg
        asks: list[Ask] = []
        for r in reports:
            if not r.union:
                r.notes.append("no valid draft: no consolidation")
                continue
            sample = self._draft_sample(r.field_id, pre[r.field_id])
            allowed = frozenset(sample) | {e for d in r.union for e in d["exemplars"]}
            frozen = [d for d in r.revised.values() if d is not None]
            n_papers = max(len(d.papers) for d in frozen)
            fi = info[r.field_id]
            prompt = P.render(
                Stage.CONSOLIDATE,
                field_name=fi.name,
                field_definition=fi.definition,
                n_drafts=len(frozen),
                n_papers=n_papers,
                min_papers=max(1, round(n_papers * FAIR_SHARE)),
                candidates="\n".join(
                    P.direction_line(f"C{i + 1}", d, n)
                    for i, (d, n) in enumerate(zip(r.union, r.union_papers, strict=True))
                ),
                papers=P.paper_lines(self._rows(sample), None),
            )
            check = lambda o, a=allowed, fi=fi: validate_codebook(o, a, fi.field_id, fi.name, fi.definition)  # noqa: E731
            asks.append(((r, allowed), cfg.model, prompt, check))
        drops = self.drops[Stage.CONSOLIDATE]
        for (r, allowed), out in await self._ask_all(Stage.CONSOLIDATE, asks, count=False):
            drops.add(1)
            if out.value is not None:
                r.codebook = out.value
                if out.attempts > 1:
                    r.notes.append(f"consolidation valid at attempt {out.attempts}")
                continue
            fi = info[r.field_id]
            try:
                dirs, note = repair_consolidation(out.raw, allowed, r.union)
                r.codebook = to_codebook(dirs, fi.field_id, fi.name, fi.definition)
                r.repaired = True
                r.notes.append(f"repaired after {out.attempts} attempts: {note}")
            except InvalidOutput as exc:
                r.notes.append(f"consolidation failed: {out.reason} (not repairable: {exc})")
                drops.add(0, 1, f"{r.field_id}: {out.reason}")
        self._check(Stage.CONSOLIDATE)

    # -- 9: assignment -------------------------------------------------------------------------
    async def _assign(
        self, codebooks: list[Codebook], members: dict[str, list[str]]
    ) -> tuple[pd.DataFrame, list[dict[str, str]]]:
        cfg = self.cfg
        batches: list[tuple[Codebook, list[str]]] = []
        for cb in codebooks:
            ids = sorted(members[cb.field_id], key=lambda p: (self._date[p], p))
            batches += [(cb, ids[i : i + cfg.assign_batch]) for i in range(0, len(ids), cfg.assign_batch)]
        directions = {cb.field_id: P.codebook_lines(cb) for cb in codebooks}

        def job(cb: Codebook, batch: list[str]) -> Callable[[], Any]:
            papers = P.paper_lines(self._rows(batch), cfg.assign_abstract_chars)
            return lambda: label_batch(self.client, cfg, cb, directions[cb.field_id], papers, batch)

        results = await self._all([job(cb, batch) for cb, batch in batches], Stage.ASSIGN)
        table, invalid, outside = assignment_table(batches, results)
        self.invalid = invalid
        self.outside = [{"field_id": o.field_id, "arxiv_id": o.arxiv_id} for o in outside]
        drops = self.drops[Stage.ASSIGN]
        drops.add(len(table), len(invalid))
        for x in invalid[:3]:
            drops.add(0, 0, f"{x['arxiv_id']}: {x['reason']}")
        self._check(Stage.ASSIGN)
        return table, invalid


def _merge_ids(a: Sequence[str], b: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys([*a, *b]))


def dedupe_programs(programs: list[Program], groups: Sequence[NamedGroup]) -> list[Program]:
    """Merge each group of ``P<i>`` ids into one program at its first member's place, named and
    described as the reply names the group (papers pooled); order kept."""
    index = {f"P{i + 1}": i for i in range(len(programs))}
    into: dict[int, int] = {}
    label: dict[int, NamedGroup] = {}
    for g in groups:
        members = sorted(index[p] for p in g.ids)
        label[members[0]] = g
        for m in members[1:]:
            into[m] = members[0]
    out: dict[int, Program] = {}
    for i, p in enumerate(programs):
        j = into.get(i, i)
        if j in out:
            q = out[j]
            out[j] = Program(q.name, q.description, _merge_ids(q.papers, p.papers))
        else:
            g = label.get(j)
            out[j] = p if g is None else Program(g.name, g.description, p.papers)
    return [out[k] for k in sorted(out)]


def merge_alike(programs: list[Program]) -> tuple[list[Program], list[tuple[str, int]]]:
    """Programs named alike (case aside) merged into the first (papers pooled), order kept; with
    each merged name and how many programs it merged (for the review)."""
    seen: dict[str, Program] = {}
    count: dict[str, int] = {}
    for p in programs:
        k = p.name.casefold()
        count[k] = count.get(k, 0) + 1
        seen[k] = Program(seen[k].name, seen[k].description, _merge_ids(seen[k].papers, p.papers)) if k in seen else p
    return list(seen.values()), [(seen[k].name, n) for k, n in count.items() if n > 1]


def union_of(revised: dict[str, Draft | None]) -> tuple[list[dict[str, Any]], list[int]]:
    """The anonymous union of the frozen drafts: every direction of each (two named alike stay
    two candidates), sorted by name, then wording; with how many papers its draft placed in each."""
    pooled = [
        (d, n)
        for which in sorted(revised)
        if (draft := revised[which]) is not None
        for d, n in zip(draft.directions, draft.held(), strict=True)
    ]
    pooled.sort(key=lambda dn: (dn[0]["name"].casefold(), *(str(dn[0][k]) for k in DIRECTION_FIELDS), dn[1]))
    return [d for d, _ in pooled], [n for _, n in pooled]


def candidate_overlaps(members: dict[str, list[str]], least: float) -> list[tuple[str, str, int, float]]:
    """Every pair of candidates (a < b) whose overlap coefficient (shared papers over the smaller
    one's papers) is at least ``least``: (a, b, shared, overlap), largest overlap first."""
    cids = sorted(members)
    frame = pd.DataFrame([(c, p) for c in cids for p in members[c]], columns=["field_id", "arxiv_id"], dtype=object)
    sizes, i, j, shared = membership_overlaps(frame, cids)
    pairs = []
    for a, b, k in zip(i.tolist(), j.tolist(), shared.tolist(), strict=True):
        overlap = k / max(min(sizes[a], sizes[b]), 1)
        if overlap >= least:
            pairs.append((cids[a], cids[b], int(k), float(overlap)))
    return sorted(pairs, key=lambda x: (-x[3], x[0], x[1]))
