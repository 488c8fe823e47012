"""Span F1 exactly as the CoNLL-2005 ``srl-eval.pl`` computes it (a re-implementation).

Conventions of srl-eval.pl reproduced here:

- Propositions are matched by predicate position; a gold proposition whose predicted
  counterpart is missing, or names another target (lemma), counts all its arguments missed.
  Predicted propositions without gold are skipped (here with a warning). Sentences without
  gold propositions count towards the number of sentences only.
- Arguments of a column are its bracketed phrases, embedded ones included, visited by start
  (ascending) then end (descending). A ``C-X`` phrase is joined to the last ``X`` argument seen
  so far into one discontinuous argument of type X (spanning from the first piece's start to
  the last piece's end); a ``C-X`` without a preceding X becomes a plain X argument. ``R-X``
  is a label of its own. (An argument with embedded phrases is treated like a discontinuous
  one whose pieces are the embedded phrases, as srl-eval.pl does.)
- A predicted argument is correct iff a gold argument has the same start and end, the same
  type and, when either is discontinuous, both are and their pieces are the same set of spans.
  Gold arguments are indexed by (start, end): of two gold arguments with the same span only
  the later one can be matched or missed. Each gold argument is matched at most once.
- Arguments of type ``V`` (the predicate, with its ``C-V`` pieces) are excluded from the
  counts and reported apart. Per label (C-X under X) and overall: precision = 100 * correct /
  (correct + excess), recall = 100 * correct / (correct + missed), F1 = 2PR / (P + R), each 0
  when its denominator is 0. A proposition is perfect when it has no excess and no missed
  (non-excluded) argument.
"""

from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from .brackets import Phrase, parse_brackets
from .props import PropsSentence, read_props

EXCLUDED = frozenset({"V"})


@dataclass
class Counts:
    correct: int = 0
    excess: int = 0
    missed: int = 0

    def add(self, other: "Counts") -> None:
        self.correct += other.correct
        self.excess += other.excess
        self.missed += other.missed

    def prf(self) -> Tuple[float, float, float]:
        """(precision, recall, F1) in percent, with srl-eval.pl's operation order."""
        ok, op, ms = self.correct, self.excess, self.missed
        p = 100 * ok / (ok + op) if ok + op > 0 else 0
        r = 100 * ok / (ok + ms) if ok + ms > 0 else 0
        f1 = (2 * p * r) / (p + r) if p + r > 0 else 0
        return float(p), float(r), float(f1)

    def to_dict(self) -> Dict[str, float]:
        p, r, f1 = self.prf()
        return dict(precision=p, recall=r, f1=f1, correct=self.correct, excess=self.excess,
                    missed=self.missed)


@dataclass
class SRLEvalResult:
    sentences: int = 0
    propositions: int = 0
    perfect: int = 0
    overall: Counts = field(default_factory=Counts)
    per_label: Dict[str, Counts] = field(default_factory=dict)
    excluded: Dict[str, Counts] = field(default_factory=dict)
    warnings: List[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "sentences": self.sentences,
            "propositions": self.propositions,
            "perfect_propositions": (100 * self.perfect / self.propositions
                                     if self.propositions > 0 else 0),
            "overall": self.overall.to_dict(),
            "per_label": {k: self.per_label[k].to_dict() for k in sorted(self.per_label)},
            "excluded": {k: self.excluded[k].to_dict() for k in sorted(self.excluded)},
            "warnings": list(self.warnings),
        }

    def report(self) -> str:
        """The text table srl-eval.pl prints."""
        out = [
            "Number of Sentences    :      %6d" % self.sentences,
            "Number of Propositions :      %6d" % self.propositions,
            "Percentage of perfect props : %6.2f"
            % (100 * self.perfect / self.propositions if self.propositions > 0 else 0),
            "",
            "%10s   %6s  %6s  %6s   %6s  %6s  %6s"
            % ("", "corr.", "excess", "missed", "prec.", "rec.", "F1"),
            "-" * 60,
        ]

        def row(name: str, c: Counts) -> str:
            return "%10s   %6d  %6d  %6d   %6.2f  %6.2f  %6.2f" % (
                (name, c.correct, c.excess, c.missed) + c.prf())

        out += [row("Overall", self.overall), "-" * 10]
        out += [row(k, self.per_label[k]) for k in sorted(self.per_label)] + ["-" * 60]
        out += [row(k, self.excluded[k]) for k in sorted(self.excluded)] + ["-" * 60]
        return "\n".join(out) + "\n"


def load_arguments(tags: Sequence[str]) -> List[Phrase]:
    """One argument column -> its arguments (srl-eval.pl's ``prop->load_SE_tagging``).

    An argument is a :class:`Phrase`; it is discontinuous when it has ``children`` (its pieces).
    """
    by_span: Dict[Tuple[int, int], Phrase] = {}
    for top in parse_brackets(tags):
        for phrase in top.dfs():
            by_span[(phrase.start, phrase.end)] = phrase
    args: List[Phrase] = []
    last: Dict[str, Phrase] = {}
    for key in sorted(by_span, key=lambda se: (se[0], -se[1])):
        phrase = by_span[key]
        if phrase.type.startswith("C-"):
            base = phrase.type[2:]
            head = last.get(base)
            if head is not None:
                if not head.children:
                    head.children.append(Phrase(head.start, head.end, base))
                head.children.append(phrase)
                head.end = phrase.end
                continue
            phrase.type = base
        args.append(phrase)
        last[phrase.type] = phrase
    return args


def discriminate(gold: Sequence[Phrase], pred: Sequence[Phrase]):
    """-> (correct predicted, excess predicted, missed gold) argument lists."""
    index: Dict[Tuple[int, int], Phrase] = {}
    for a in gold:
        index[(a.start, a.end)] = a
    ok: List[Phrase] = []
    op: List[Phrase] = []
    for a in pred:
        key = (a.start, a.end)
        g = index.get(key)
        if g is None:
            op.append(a)
        elif not g.children and not a.children:
            (ok if g.type == a.type else op).append(a)
            if g.type == a.type:
                del index[key]
        elif bool(g.children) != bool(a.children):
            op.append(a)
        else:
            good = g.type == a.type
            pieces = {(p.start, p.end) for p in g.children} if good else set()
            for p in a.children:
                if not good:
                    break
                if (p.start, p.end) in pieces:
                    pieces.discard((p.start, p.end))
                else:
                    good = False
            if good and not pieces:
                ok.append(a)
                del index[key]
            else:
                op.append(a)
    return ok, op, list(index.values())


@dataclass
class _Prop:
    verb: str
    position: int
    args: List[Phrase]


def _load_props(sentence: PropsSentence, where: str, index: int, warnings: List[str]) -> List[_Prop]:
    targets, columns = sentence
    columns = list(columns)
    props = []
    for i, target in enumerate(targets):
        if target == "-":
            continue
        if columns:
            args = load_arguments(columns.pop(0))
        else:
            warnings.append(f"sentence {index}: {where}: no argument column for prop {target}")
            args = []
        props.append(_Prop(target, i, args))
    return props


@dataclass
class PropositionMatch:
    """One scored proposition: where it is and how its arguments were matched
    (``discriminate``: correct and excess predicted arguments, missed gold ones; ``V`` included
    here, excluded by :meth:`counts`)."""

    sentence: int  # 0-based index of the sentence in the files
    words: int  # words in the sentence
    position: int  # 0-based word index of the predicate
    verb: str
    correct: List[Phrase]
    excess: List[Phrase]
    missed: List[Phrase]

    def counts(self) -> Counts:
        """(correct, excess, missed) of the proposition, ``EXCLUDED`` types left out: what it
        adds to the overall counts."""
        return Counts(*(sum(a.type not in EXCLUDED for a in args)
                        for args in (self.correct, self.excess, self.missed)))


def match_propositions(gold: Sequence[PropsSentence], pred: Sequence[PropsSentence],
                       warnings: List[str]) -> Iterator[PropositionMatch]:
    """The propositions srl-eval.pl scores, in file order, each with its matched arguments
    (the conventions of the module docstring); skipped or mismatched propositions are
    reported in ``warnings``. ValueError when the predictions end early or a sentence has
    another number of words than its gold."""
    for ns, gsent in enumerate(gold):
        if ns >= len(pred):
            raise ValueError(f"sentence {ns}: the predictions end before the gold props")
        psent = pred[ns]
        if len(gsent[0]) != len(psent[0]):
            raise ValueError(f"sentence {ns}: gold and pred sentences do not align correctly "
                             f"({len(gsent[0])} vs {len(psent[0])} words)")
        G = {p.position: p for p in _load_props(gsent, "gold", ns, warnings)}
        P = {p.position: p for p in _load_props(psent, "pred", ns, warnings)}
        for i in range(max(G) + 1 if G else 0):
            gprop: Optional[_Prop] = G.get(i)
            pprop: Optional[_Prop] = P.get(i)
            if gprop is None:
                if pprop is not None:
                    warnings.append(f"sentence {ns}: predicted prop {pprop.verb} at {i} "
                                    "without gold; skipped")
                continue
            if pprop is None:
                warnings.append(f"sentence {ns}: missing predicted prop {gprop.verb} at "
                                f"{i}; all its arguments counted as missed")
                pprop = _Prop(gprop.verb, i, [])
            elif pprop.verb != gprop.verb:
                warnings.append(f"sentence {ns}: expected {gprop.verb} at {i}, found "
                                f"{pprop.verb}; all gold arguments counted as missed")
                pprop = _Prop(gprop.verb, i, [])
            ok, op, ms = discriminate(gprop.args, pprop.args)
            yield PropositionMatch(ns, len(gsent[0]), i, gprop.verb, ok, op, ms)
        # after the last gold predicate (or in a sentence without one) srl-eval.pl looks no
        # further: such a prediction changes no count, but it is said, never dropped silently
        for i in sorted(i for i in P if i > (max(G) if G else -1)):
            warnings.append(f"sentence {ns}: predicted prop {P[i].verb} at {i} without gold; "
                            "skipped")


def evaluate(gold: Sequence[PropsSentence], pred: Sequence[PropsSentence],
             matches: Optional[List[PropositionMatch]] = None) -> SRLEvalResult:
    """Score predicted props against gold props, sentence by sentence (both in file order).

    With ``matches`` (a list), every scored proposition's :class:`PropositionMatch` is appended
    to it (``sentence_counts`` turns them into per-sentence counts)."""
    result = SRLEvalResult()
    for match in match_propositions(gold, pred, result.warnings):
        result.propositions += 1
        _count_proposition(result, match)
        if matches is not None:
            matches.append(match)
    result.sentences = len(gold)
    return result


def sentence_counts(matches: Sequence[PropositionMatch], n_sentences: int) -> List[Counts]:
    """Per-sentence (correct, excess, missed), ``EXCLUDED`` types left out, from the matches
    of ``evaluate``: they sum to its ``overall`` counts (sentences without gold propositions
    get zeros)."""
    out = [Counts() for _ in range(n_sentences)]
    for match in matches:
        out[match.sentence].add(match.counts())
    return out


def _count_proposition(result: SRLEvalResult, match: PropositionMatch) -> None:
    for args, kind in ((match.correct, "correct"), (match.excess, "excess"),
                       (match.missed, "missed")):
        for a in args:
            table = result.excluded if a.type in EXCLUDED else result.per_label
            counts = table.setdefault(a.type, Counts())
            setattr(counts, kind, getattr(counts, kind) + 1)
    prop = match.counts()
    result.overall.add(prop)
    result.perfect += int(prop.excess == 0 and prop.missed == 0)


def evaluate_files(gold_path: str, pred_path: str) -> SRLEvalResult:
    """``srl-eval.pl GOLD PRED`` on two CoNLL-2005 props files."""
    return evaluate(read_props(gold_path), read_props(pred_path))
