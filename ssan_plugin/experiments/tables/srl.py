"""SRL tables of ``examples/srl/run_srl.py``'s archive: seed-level dev F1 comparisons, every run's
predictions rescored against the gold props."""

import re
from pathlib import Path
from typing import Dict, List, Sequence

from ...stats.significance import seed_level_test
from .blocks import ResultsError
from .verdicts import Comparison, apply_holm


def srl_gold_props(dev_conll: Path, dest: Path) -> Path:
    """The gold props of a CoNLL-2012 dev file, as ``ssan-prepare-srl`` writes them
    (``valid.props``): one column per proposition, in column order."""
    from ...srl.conll2012 import read_conll2012
    from ...srl.props import write_props

    sentences = read_conll2012(str(dev_conll))
    dest.parent.mkdir(parents=True, exist_ok=True)
    write_props(str(dest), ((s.targets(), [list(p.tags) for p in s.propositions])
                            for s in sentences))
    return dest


def srl_comparisons(archive: Path, gold_props: Path,
                    specs: Sequence[tuple], table: str = "srl", n_samples: int = 1000,
                    seed: int = 12345) -> List[Comparison]:
    """Seed-level dev F1 comparisons of ``run_srl.py``'s archive: ``specs`` are
    (label, baseline run prefix, system run prefix), a prefix ``CONFIG_ENCODER`` whose runs are
    ``PREFIX_sSEED/dev.pred.props.gz``; paired by seed; Holm over the specs."""
    from ...srl.compare import f1_score, read_checked, score_system

    gold = read_checked(str(gold_props), "--gold-props", f"--gold-props {gold_props}")

    def runs(prefix):
        found = {}
        for d in sorted(archive.glob(f"{prefix}_s*")):
            if (d / "result.json").is_file() and re.fullmatch(rf"{re.escape(prefix)}_s\d+", d.name):
                found[int(d.name.rsplit("_s", 1)[1])] = d / "dev.pred.props.gz"
        return found

    cache: Dict[Path, tuple] = {}

    def scored(path: Path):
        if path not in cache:
            pred = read_checked(str(path), "--pred-props", f"--pred-props {path}")
            s = score_system(gold, path.parent.name, pred)
            cache[path] = (s.stats, s.entry["f1"])
        return cache[path]

    rows = []
    for label, base_prefix, sys_prefix in specs:
        base, sys_ = runs(base_prefix), runs(sys_prefix)
        if len(base) < 2 or len(sys_) < 2:
            raise ResultsError(f"{label}: fewer than two archived seeds of {base_prefix} or "
                               f"{sys_prefix} in {archive}")
        b_seeds, s_seeds = sorted(base), sorted(sys_)
        result = seed_level_test([scored(base[s])[0] for s in b_seeds],
                                 [scored(sys_[s])[0] for s in s_seeds], f1_score,
                                 [str(s) for s in b_seeds], [str(s) for s in s_seeds],
                                 n_samples, seed)
        paired = [int(s) for s in result.baseline_seeds]
        rows.append(Comparison(table=table, label=label, system=sys_prefix,
                               baseline=base_prefix,
                               baseline_scores=[scored(base[s])[1] for s in paired],
                               system_scores=[scored(sys_[s])[1] for s in s_seeds],
                               result=result))
    apply_holm(rows)
    return rows
