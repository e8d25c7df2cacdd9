"""BM25 over the texts a task may see, tokenized by the maintained ``bm25s`` library: the
event track's posts before ``t0`` (docs/spec.md §11.4), the intraday agents' headline search
(headlines available at the task's ``now``). One inverted index is built over texts sorted by
time and queried per task with the statistics of that task's window ``[lo, hi)`` alone: the
number of texts, their mean length and each term's document frequency are counted over the
window, so a later text can neither be returned nor change a score. The scores are those of a
``bm25s`` index built from the window alone, bit for bit (the Lucene variant, k1 1.5, b 0.75,
English stopwords; each text's term score rounded to float32 and summed in float32 in the
query's term order, as ``bm25s`` does); ``tests/test_events.py`` holds the two equal. A window
may also lie across several indexes (the agents' posts tool holds one a month,
:func:`window_scores`): its statistics are summed over them, with the same scores. Ties rank
by time, then id."""

from __future__ import annotations

import math
from itertools import chain

import numpy as np

K1, B = 1.5, 0.75  # bm25s' defaults, the Lucene variant


class PostIndex:
    """An inverted index of ``texts`` (in their order, the posts sorted by time): per term, the
    posts holding it (ascending), each with the pair of the post's length in terms and the
    term's count in it, as a code into the index's table of the pairs it holds (a term's
    score of a post depends on that pair alone: its postings take their pairs' scores); and
    the length of the texts before each post."""

    def __init__(self, texts: list[str]) -> None:
        import bm25s

        tokens = bm25s.tokenize(texts, stopwords="en", show_progress=False)
        self.vocab: dict[str, int] = tokens.vocab
        lengths = np.fromiter((len(d) for d in tokens.ids), np.int64, len(texts))
        self.cum_length = np.concatenate([[0], np.cumsum(lengths)])
        n = len(texts)
        doc = np.repeat(np.arange(n, dtype=np.int64), lengths)
        term = np.fromiter(chain.from_iterable(tokens.ids), np.int64, int(lengths.sum()))
        pairs, tf = np.unique(term * max(n, 1) + doc, return_counts=True)  # by term, then post
        self.post = pairs % max(n, 1)
        self.start = np.searchsorted(pairs // max(n, 1), np.arange(len(self.vocab) + 1))
        self.pair, self.pair_length, self.pair_tf = _pairs(lengths[self.post], tf)

    def scores(self, lo: int, hi: int, query: str) -> np.ndarray:
        """The BM25 score of each post in ``[lo, hi)`` against ``query``, with the statistics
        of those posts alone (zero for a post sharing no term with it), as float32."""
        return window_scores([(self, lo, hi)], query)


def _pairs(length: np.ndarray, tf: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each posting's code into the table of the distinct pairs of its post's ``length`` and
    the term's count ``tf`` in it (the pairs by length, then count), and the table: the pairs'
    lengths (int64) and counts (float32, as bm25s holds them). A few hundred pairs in posts
    of a few dozen words; the codes as narrow as their number allows."""
    width = int(tf.max()) + 1 if len(tf) else 1
    key = length * width + tf
    if len(key) and int(key.max()) < max(4 * len(key), 1 << 20):  # a mark for every key
        seen = np.zeros(int(key.max()) + 1, bool)
        seen[key] = True
        keys = np.flatnonzero(seen)
        code = (np.cumsum(seen) - 1)[key]
    else:
        keys, code = np.unique(key, return_inverse=True)
    narrow = np.uint16 if len(keys) <= 1 << 16 else np.uint32
    return code.astype(narrow), keys // width, (keys % width).astype(np.float32)


def window_scores(parts: list[tuple[PostIndex, int, int]], query: str, *,
                  touched: list | None = None, at: np.ndarray | None = None) -> np.ndarray:
    """The BM25 score against ``query`` of each post of a window held by several indexes:
    ``parts`` lists, in time order, each index and the range ``[lo, hi)`` of its posts in the
    window. The statistics are the window's: its posts' number and mean length and each
    term's document frequency summed over the parts, so the scores are those of one index over
    the window's posts, bit for bit (each post's term scores added in the query's order).
    Float32, as they are summed: the scores are a dense array over the window's posts, and a
    float64 copy of a million of them took a third of a query. ``touched``: a list that gets,
    for each of the query's terms in the window, the positions of the posts holding it (every
    post scoring above zero is among them; :func:`candidates`). ``at``: positions in the
    window (ascending, each once) of the only posts to score, the others left at zero (a
    ticker's headlines): each found in the postings of each term, so a call costs what those
    posts hold, not what the window does; their scores are the same bits, as the window's
    statistics are."""
    import bm25s

    sizes = [hi - lo for _, lo, hi in parts]
    n = sum(sizes)
    out = np.zeros(n, np.float32)
    if n == 0:
        return out
    mean_length = sum((ix.cum_length[hi] - ix.cum_length[lo] for ix, lo, hi in parts),
                      np.int64(0)) / n
    shifts = np.cumsum([0, *sizes[:-1]]).tolist()
    terms = bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)[0]
    fresh = True  # every score still zero
    for term in terms:
        hits = []  # (index, first and end of its postings in the window, shift of its posts)
        for (ix, lo, hi), shift in zip(parts, shifts, strict=True):
            t = ix.vocab.get(term)
            if t is None:
                continue
            s, e = ix.start[t], ix.start[t + 1]
            a = s + int(np.searchsorted(ix.post[s:e], lo))
            z = s + int(np.searchsorted(ix.post[s:e], hi))
            if a < z:
                hits.append((ix, a, z, shift - lo))
        df = sum(z - a for _, a, z, _ in hits)
        if df == 0:  # no post of the window holds it
            continue
        idf = np.float32(math.log(1 + (n - df + 0.5) / (df + 0.5)))
        mine = []  # the term's posts in the window, as positions in it
        for ix, a, z, shift in hits:
            if at is None:
                posts, codes = ix.post[a:z], ix.pair[a:z]
            else:  # the wanted posts of this index holding the term, found in its postings
                posts = at[(at >= ix.post[a] + shift) & (at <= ix.post[z - 1] + shift)] - shift
                j = a + np.searchsorted(ix.post[a:z], posts)
                held = ix.post[np.minimum(j, z - 1)] == posts
                posts, codes = posts[held], ix.pair[j[held]]
                if not len(posts):
                    continue
            x = _term_scores(ix, codes, idf, mean_length)
            where = posts + shift if shift else posts
            if fresh:  # no term has scored a post yet: each is 0 + its score (a score is
                out[where] = x  # above zero)
            else:
                out[where] += x
            mine.append(where)
        fresh = fresh and not mine
        if touched is not None and mine:
            touched.append(mine[0] if len(mine) == 1 else np.concatenate(mine))
    return out


def _term_scores(ix: PostIndex, codes: np.ndarray, idf: np.float32,
                 mean_length: float) -> np.ndarray:
    """A term's score of each of its postings whose pairs (length, count) are ``codes``, as
    float32 (:func:`_pair_scores` rounded); from a score of each of the index's pairs when
    the postings outnumber the pairs."""
    if len(codes) > len(ix.pair_tf):
        return _pair_scores(ix.pair_length, ix.pair_tf, idf, mean_length).astype(
            np.float32)[codes]
    return _pair_scores(ix.pair_length[codes], ix.pair_tf[codes], idf, mean_length).astype(
        np.float32)


def _pair_scores(lengths: np.ndarray, tf: np.ndarray, idf: np.float32,
                 mean_length: float) -> np.ndarray:
    """A term's score of a post of each of ``lengths`` holding it ``tf`` times: ``idf * tf /
    (K1 * ((1 - B) + B * length / mean_length) + tf)`` in float64, step by step in one
    array as bm25s computes it (the same bits)."""
    x = _length_part(lengths, mean_length)
    np.add(x, tf, out=x)
    np.divide(tf, x, out=x)
    np.multiply(x, idf, out=x)
    return x


def _length_part(lengths: np.ndarray, mean_length: float) -> np.ndarray:
    """``K1 * ((1 - B) + B * length / mean_length)`` of each of ``lengths`` (integers), in
    float64, step by step as bm25s computes it."""
    x = np.multiply(lengths, B)
    np.divide(x, mean_length, out=x)
    np.add(x, 1 - B, out=x)
    np.multiply(x, K1, out=x)
    return x


def candidates(scores: np.ndarray, touched: list[np.ndarray], k: int) -> np.ndarray:
    """Positions (ascending, each once) holding the ``k`` best posts above zero of ``scores``,
    whose posts above zero all lie in ``touched`` (arrays of positions, none repeated in one:
    :func:`window_scores`' postings a term), found without a pass over every score (a window
    of a million posts: about 1 ms). A post lies in at most ``len(touched)`` of the arrays, so
    fewer than ``(k - 1) * len(touched)`` of their entries score above the ``k``-th best
    post: every entry down to the ``k * len(touched)``-th best score is kept, and with them
    every post that can be among the best."""
    if not touched or k <= 0:
        return np.empty(0, np.int64)
    at = np.concatenate(touched)
    value = scores[at]
    above = value > 0
    if not above.all():  # (every posting scores above zero, unless float32 lost it)
        at, value = at[above], value[above]
    enough = k * len(touched)
    if len(at) > enough:
        at = at[value >= np.partition(value, len(value) - enough)[len(value) - enough]]
    return np.unique(at)


def top_k(scores: np.ndarray, created: np.ndarray, ids: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` best posts with a score above zero: by score, then the later
    post first, then id. Only the posts scoring at least the ``k``-th best score can be among
    them, so only those are ordered (ordering every post that scored, ids as text, took 0.66
    ms a query of a few thousand)."""
    keep = np.flatnonzero(scores > 0)
    if k <= 0:
        return keep[:0]
    if len(keep) > k:
        kth = np.partition(scores[keep], len(keep) - k)[len(keep) - k]  # the k-th best score
        keep = keep[scores[keep] >= kth]
    order = np.lexsort((ids[keep], -created[keep], -scores[keep]))
    return keep[order[:k]]
