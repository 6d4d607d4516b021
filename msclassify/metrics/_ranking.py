"""Classification and ranking scores: accuracy, ROC AUC, precision@k and NDCG@k per query."""

import numpy as np
from sklearn.metrics import accuracy_score, roc_auc_score

from ..checks import check_int


def _as_1d(values, name, n=None):
    values = np.asarray(values)
    if values.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one value per sample), got shape {values.shape}")
    if values.size == 0:
        raise ValueError(f"{name} is empty")
    if n is not None and values.shape[0] != n:
        raise ValueError(f"{name} has {values.shape[0]} entries but y_true has {n}; pass one per "
                         "sample")
    return values


def accuracy(y_true, y_pred):
    """Fraction of samples whose predicted label equals the true label.

    Examples
    --------
    >>> accuracy([0, 1, 1, 0], [0, 1, 0, 0])
    0.75
    """
    y_true = _as_1d(y_true, "y_true")
    y_pred = _as_1d(y_pred, "y_pred", y_true.shape[0])
    return float(accuracy_score(y_true, y_pred))


def roc_auc(y_true, scores):
    """Area under the ROC curve of a binary problem (scikit-learn's ``roc_auc_score``).

    Parameters
    ----------
    y_true : array-like, shape (N,)
        Two distinct labels; the larger one is the positive class.
    scores : array-like, shape (N,) or (N, 2)
        Higher means more positive. For an (N, 2) ``predict_proba`` output the
        second column is used.

    Examples
    --------
    >>> roc_auc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
    0.75
    """
    y_true = _as_1d(y_true, "y_true")
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim == 2 and scores.shape[1] == 2:
        scores = scores[:, 1]
    scores = _as_1d(scores, "scores", y_true.shape[0])
    if np.unique(y_true).size != 2:
        raise ValueError("roc_auc needs exactly two classes in y_true, found "
                         f"{np.unique(y_true).size}")
    return float(roc_auc_score(y_true, scores))


def _query_slices(qid, n):
    """Row indices of each query, in order of first appearance."""
    qid = _as_1d(qid, "qid", n)
    _, first, inverse = np.unique(qid, return_index=True, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.cumsum(np.bincount(inverse))
    groups = np.split(order, bounds[:-1])
    return [groups[g] for g in np.argsort(first)]


def _ranked(relevance, scores):
    """Relevance in predicted order; among equal scores the least relevant comes first."""
    order = np.lexsort((relevance, -scores))
    return relevance[order]


def precision_at_k(y_true, scores, qid, k=5, relevance_threshold=1):
    """Average Precision@k of Nan et al. (2015), as used for Yahoo! LTR in BudgetRF and CEGB.

    Definition (Nan, Wang & Saligrama, "Feature-budgeted random forest", ICML
    2015, Sec. 3, Yahoo! Learning to Rank): "sort the documents in
    decreasing order of the predicted ranks [...] Take the top 5 documents in
    this order and reveal their true labels. If all of the documents are indeed
    relevant (y = 1), then the precision score is increased by 1; otherwise, if
    the first unrelated document appears in position 1 <= j <= 5, increase the
    precision score by (j-1)/5. Finally, the precision score is averaged over the
    set of test queries." So a query scores (number of relevant documents before
    the first irrelevant one) / k, or 1 if all of its top k are relevant.

    The labels are binarised, "y = 0 means the document is unrelated [...] y = 1
    means the document is relevant" (same section). The BudgetRF paper does not give
    the grade threshold; CEGB, on the same data and protocol, sets "all targets
    y > 0 to y = 1" (Peter et al., "Cost efficient gradient boosting", NIPS 2017,
    Sec. 5, Yahoo! LTR), hence
    ``relevance_threshold=1``: grade >= 1 is relevant.

    Choices the paper leaves open: a query with fewer than k documents takes all
    of them and scores 1 if all are relevant; among documents with equal scores
    the least relevant come first, so neither ties nor file order can raise the
    score.

    Parameters
    ----------
    y_true : array-like, shape (N,)
        Relevance grades (or 0/1 labels).
    scores : array-like, shape (N,)
        Predicted scores; higher is ranked first.
    qid : array-like, shape (N,)
        Query id of each row (rows of a query need not be contiguous).
    k : int
    relevance_threshold : float
        Grades >= this are relevant.

    Returns
    -------
    float
        Mean over queries, in [0, 1].

    Examples
    --------
    Query 1 ranks relevant, relevant, irrelevant first: (3-1)/5. Query 2 ranks
    an irrelevant document first: 0.

    >>> y = [2, 1, 0, 3, 0, 1, 1, 1]
    >>> s = [9, 8, 7, 1, 5, 4, 3, 2]
    >>> precision_at_k(y, s, qid=[1, 1, 1, 1, 2, 2, 2, 2])
    0.2
    """
    y_true = _as_1d(y_true, "y_true").astype(np.float64)
    scores = _as_1d(scores, "scores", y_true.shape[0]).astype(np.float64)
    check_int(k, "k")
    if np.isnan(scores).any():
        raise ValueError("scores contain NaN; a ranking needs comparable scores")
    relevant = (y_true >= relevance_threshold).astype(np.float64)
    per_query = []
    for rows in _query_slices(qid, y_true.shape[0]):
        top = _ranked(relevant[rows], scores[rows])[:k]
        irrelevant = np.flatnonzero(top == 0)
        per_query.append(1.0 if irrelevant.size == 0 else irrelevant[0] / k)
    return float(np.mean(per_query))


def ndcg_at_k(y_true, scores, qid, k=5, no_relevant="one"):
    """Normalised discounted cumulative gain at k, averaged over queries.

    Per query, with its documents ranked by decreasing score and r the rank
    (1-based): ``DCG@k = sum_{r<=k} (2**rel_r - 1) / log2(r + 1)`` and
    ``NDCG@k = DCG@k / IDCG@k``, IDCG being the DCG of the ideal order. Among
    equal scores the least relevant document comes first (a pessimistic,
    order-independent tie rule).

    Parameters
    ----------
    y_true : array-like, shape (N,)
        Non-negative relevance grades.
    scores : array-like, shape (N,)
    qid : array-like, shape (N,)
    k : int
    no_relevant : {"one", "zero", "skip"}
        Score of a query without any relevant document (IDCG = 0), where every
        ranking is ideal: 1 (as LightGBM's ndcg metric), 0, or leave such
        queries out of the mean.

    Examples
    --------
    The ranking puts grades 0, 1 first; the ideal order 2, 1:
    (0 + 1/log2(3)) / (3 + 1/log2(3)).

    >>> round(ndcg_at_k([2, 0, 1], [0.2, 0.9, 0.5], qid=[7, 7, 7], k=2), 4)
    0.1738
    """
    y_true = _as_1d(y_true, "y_true").astype(np.float64)
    scores = _as_1d(scores, "scores", y_true.shape[0]).astype(np.float64)
    check_int(k, "k")
    if np.any(y_true < 0) or np.isnan(y_true).any():
        raise ValueError("relevance grades y_true must be >= 0")
    if np.isnan(scores).any():
        raise ValueError("scores contain NaN; a ranking needs comparable scores")
    empty_score = {"one": 1.0, "zero": 0.0, "skip": None}
    if no_relevant not in empty_score:
        raise ValueError(f"no_relevant must be 'one', 'zero' or 'skip', got {no_relevant!r}")
    discount = 1.0 / np.log2(np.arange(2, k + 2))
    per_query = []
    for rows in _query_slices(qid, y_true.shape[0]):
        gains = 2.0 ** _ranked(y_true[rows], scores[rows])[:k] - 1.0
        ideal = 2.0 ** np.sort(y_true[rows])[::-1][:k] - 1.0
        idcg = ideal @ discount[:ideal.size]
        if idcg == 0:
            if empty_score[no_relevant] is not None:
                per_query.append(empty_score[no_relevant])
            continue
        per_query.append(gains @ discount[:gains.size] / idcg)
    if not per_query:
        raise ValueError("no query has a relevant document; NDCG is undefined with "
                         "no_relevant='skip'")
    return float(np.mean(per_query))
