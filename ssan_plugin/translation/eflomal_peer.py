"""The statistical peer of ``ssan-align``: eflomal (Östling and Tiedemann 2016; the ``eflomal``
package) trained on a parallel corpus plus the sentences to align, as aligners are used.

The corpus's raw sentences are tokenised as ``ssan-prepare-translation`` tokenises them
(normalisation and Moses tokenisation, ``LanguageConfig.pretokenise``): with the options a data
manifest records when one is given (``ssan-align --data``, e.g. ``--romanian-remove-diacritics``),
else with preparation's defaults; so that their tokens look like the gold set's (tokenised
already and passed as it is) and like the text the compared models read. eflomal
aligns in both directions; the links reported are the forward ones (A to B), the reverse ones,
and their intersection and union. The grow-diag-final family of symmetrisations is not computed:
fast_align's atools is on no package index, and NLTK's ``grow_diag_final_and`` returns the
union (its "not yet aligned" test looks integers up among the keys 'e' and 'f', so it always
passes). eflomal's sampler draws from a seed of its own that cannot be set from Python: two
runs differ (on the WPT Ro-En gold by a few tenths of an AER point), so the peer is run several
times and each score reported as the runs' mean and spread.
"""

import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set, Tuple

from .alignment import DIRECTIONS, Link
from .languages import LanguageConfig
from .textio import PipelineError, read_lines

def tokenised_corpus(prefix: str, lang_a: str, lang_b: str,
                     configs: Optional[Dict[str, LanguageConfig]] = None) -> List[Tuple[str, str]]:
    """``PREFIX.A`` / ``PREFIX.B`` raw parallel text -> tokenised pairs (empty sides dropped),
    each side as ``configs[lang]`` says (a data manifest's languages), else as preparation's
    defaults (``LanguageConfig.create(lang, segmented=False)``)."""
    sides = []
    for lang in (lang_a, lang_b):
        path = Path(f"{prefix}.{lang}")
        if not path.is_file():
            raise PipelineError(f"--eflomal-train {prefix}: no {path}")
        config = configs[lang] if configs else LanguageConfig.create(lang, segmented=False)
        sides.append([config.pretokenise(line) for line in read_lines(path)])
    if len(sides[0]) != len(sides[1]):
        raise PipelineError(f"--eflomal-train {prefix}: {len(sides[0])} {lang_a} lines, "
                            f"{len(sides[1])} {lang_b} lines")
    return [(a, b) for a, b in zip(*sides) if a.strip() and b.strip()]


def read_pharaoh(path: Path, n: int, total: int) -> List[Set[Link]]:
    """The last ``n`` lines of an eflomal links file (0-based ``i-j``) of ``total`` sentences as
    link sets; PipelineError when the file has another number of lines (nothing misaligned)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if len(lines) != total:
        raise PipelineError(f"eflomal wrote {len(lines)} lines of links for {total} sentence pairs")
    out = []
    for line in lines[len(lines) - n:]:
        out.append({(int(i), int(j)) for i, j in (item.split("-") for item in line.split())})
    return out


def eflomal_links(corpus: Sequence[Tuple[str, str]],
                  pairs: Sequence[Tuple[Sequence[str], Sequence[str]]]) -> Dict[str, List[Set[Link]]]:
    """{direction: one link set per pair of ``pairs``} (DIRECTIONS; links (A word, B word),
    0-based), one eflomal run trained on ``corpus`` (tokenised text pairs) followed by ``pairs``."""
    from eflomal import Aligner

    sources = [a for a, _ in corpus] + [" ".join(a) for a, _ in pairs]
    targets = [b for _, b in corpus] + [" ".join(b) for _, b in pairs]
    with tempfile.TemporaryDirectory() as work:
        fwd, rev = Path(work) / "fwd", Path(work) / "rev"
        Aligner().align(sources, targets, links_filename_fwd=str(fwd), links_filename_rev=str(rev),
                        quiet=True)
        forward, reverse = (read_pharaoh(path, len(pairs), len(sources)) for path in (fwd, rev))
    return dict(zip(DIRECTIONS, (forward, reverse, [f & r for f, r in zip(forward, reverse)],
                                 [f | r for f, r in zip(forward, reverse)])))
