"""BM25 over the posts a task may see (docs/spec.md §11.4), with the maintained ``bm25s``
library. The index of a task is built from its gated posts alone (made in
``[t0 - lookback, t0)``): a later post can neither be returned nor change the statistics
(document frequencies, lengths) that rank the earlier ones. Ties rank by time, then id."""

from __future__ import annotations

import numpy as np


def bm25_scores(texts: list[str], query: str) -> np.ndarray:
    """The BM25 score (Lucene variant, k1 1.5, b 0.75; English stopwords) of each text
    against ``query``: zero for a text sharing no term with it."""
    if not texts:
        return np.zeros(0)
    import bm25s

    corpus = bm25s.tokenize(texts, stopwords="en", show_progress=False)
    if not corpus.vocab:  # every text is stopwords or shorter than a term (bm25s raises)
        return np.zeros(len(texts))
    index = bm25s.BM25()
    index.index(corpus, show_progress=False)
    terms = bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)[0]
    known = [t for t in terms if t in corpus.vocab]
    if not known:
        return np.zeros(len(texts))
    return np.asarray(index.get_scores(known), dtype=np.float64)


def top_k(scores: np.ndarray, created: np.ndarray, ids: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` best posts with a score above zero: by score, then the later
    post first, then id."""
    keep = np.flatnonzero(scores > 0)
    order = np.lexsort((ids[keep], -created[keep], -scores[keep]))
    return keep[order[:k]]
