"""scikit-learn's random forest regression, fitted on distinct inputs instead of rows (exact).

The A-SRPT predictor (:class:`raytestbed.predict.iterations.RandomForestPredictor`) is
``RandomForestRegressor(n_estimators=100, criterion="squared_error", random_state=seed)`` on
two integer features (group code, user code) and integer targets (iterations). scikit-learn
fits every tree on every row (bootstrap counts as sample weights), which costs ~8 s of CPU
per fit at 75,000 rows; the rows, however, hold only a few thousand distinct inputs. This
module builds the *same* trees on the distinct inputs, each carrying the sums of its rows
(weight, weight x target, weight x target^2, rows with a non-zero weight), and predicts the
same values, bit for bit:

* the per-tree seeds, bootstrap draws and the splitter's seed come from NumPy's
  ``RandomState`` exactly as in ``sklearn.ensemble._forest`` / ``sklearn.tree._classes``;
* the tree is grown depth-first (left child first) with the best splitter's feature draws
  (``rand_r``-style xorshift, Fisher-Yates over features, constant-feature bookkeeping),
  thresholds half-way between neighbouring float32 values, strict ``>`` between candidates,
  and the MSE criterion's proxy, impurity and improvement formulas in float64;
* the weights and the sums of w x y scikit-learn forms in a node are integers below 2**53,
  hence exact in any order, so grouping rows by input changes none of them, nor the split
  choice and node values computed from them. :func:`fit` checks this bound (and integral
  targets) and returns ``None`` where it does not hold; the caller then uses scikit-learn.
* the sums of w x y^2 (a node's impurity, used only to stop at a pure node and at a split
  that does not improve) may exceed 2**53 with large targets (AAIC jobs of millions of
  iterations). Where a node's sum stays below 2**53 the computation is exact as above;
  where it does not, scikit-learn's rounded sum depends on its row order, so the tree
  builder bounds the difference (recursive summation, Higham's gamma_k = k u / (1 - k u))
  and takes each of the two decisions only when its margin exceeds the bound; a decision
  within the bound (e.g. a pure node of huge targets) makes the fit return ``None``, and the
  caller uses scikit-learn.

Checked against scikit-learn 1.9 by ``tests/test_forest_exact.py`` (random data sets: the
predictions are identical floats). Units: targets are iteration counts; features are codes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

MAX_INT = np.iinfo(np.int32).max  #: scikit-learn's bound for per-tree seeds
RAND_R_MAX = 2147483647  #: scikit-learn's ``RAND_R_MAX``
DEFAULT_SEED = 1  #: scikit-learn's ``rand_r`` seed when the state is 0
EPSILON = np.finfo(np.float64).eps  #: scikit-learn's tree-builder EPSILON
FEATURE_THRESHOLD = np.float32(1e-7)  #: scikit-learn's "constant feature" tolerance
_EXACT = 2.0 ** 53
_U = 2.0 ** -53  #: unit roundoff of float64


@numba.njit(cache=True)
def _rand_int(low, high, state):
    """``sklearn.tree._utils.rand_int`` on a one-element uint32 state array."""
    s = np.uint64(state[0])
    if s == 0:
        s = np.uint64(DEFAULT_SEED)
    mask = np.uint64(0xFFFFFFFF)
    s ^= (s << np.uint64(13)) & mask
    s ^= s >> np.uint64(17)
    s ^= (s << np.uint64(5)) & mask
    state[0] = np.uint32(s)
    return low + np.int64(s % np.uint64(RAND_R_MAX + 1)) % (high - low)


@numba.njit(cache=True)
def _mt_seed(seed):
    """MT19937 state of ``np.random.RandomState(seed)`` (``init_genrand``), as uint32 words."""
    mt = np.empty(624, np.uint32)
    mt[0] = np.uint32(seed)
    for i in range(1, 624):
        prev = np.uint64(mt[i - 1])
        mt[i] = np.uint32((np.uint64(1812433253) * (prev ^ (prev >> np.uint64(30))) + np.uint64(i))
                          & np.uint64(0xFFFFFFFF))
    return mt


@numba.njit(cache=True)
def _mt_block(mt, out):
    """Regenerate the 624 words of ``mt`` and write their tempered outputs to ``out``."""
    N, M = 624, 397
    upper = np.uint32(0x80000000)
    lower = np.uint32(0x7FFFFFFF)
    matrix_a = np.uint32(0x9908B0DF)
    zero = np.uint32(0)
    one = np.uint32(1)
    for kk in range(N - M):
        y = (mt[kk] & upper) | (mt[kk + 1] & lower)
        mt[kk] = mt[kk + M] ^ (y >> one) ^ (matrix_a if (y & one) else zero)
    for kk in range(N - M, N - 1):
        y = (mt[kk] & upper) | (mt[kk + 1] & lower)
        mt[kk] = mt[kk + M - N] ^ (y >> one) ^ (matrix_a if (y & one) else zero)
    y = (mt[N - 1] & upper) | (mt[0] & lower)
    mt[N - 1] = mt[M - 1] ^ (y >> one) ^ (matrix_a if (y & one) else zero)
    for kk in range(N):
        y = mt[kk]
        y ^= y >> np.uint32(11)
        y ^= (y << np.uint32(7)) & np.uint32(0x9D2C5680)
        y ^= (y << np.uint32(15)) & np.uint32(0xEFC60000)
        y ^= y >> np.uint32(18)
        out[kk] = y


@numba.njit(cache=True)
def _mask(rng):
    """The smallest 2**k - 1 >= rng (NumPy's ``gen_mask``)."""
    mask = np.uint32(rng)
    mask |= mask >> np.uint32(1)
    mask |= mask >> np.uint32(2)
    mask |= mask >> np.uint32(4)
    mask |= mask >> np.uint32(8)
    mask |= mask >> np.uint32(16)
    return mask


@numba.njit(cache=True)
def _bootstrap_counts(seed, n):
    """``np.bincount(RandomState(seed).randint(0, n, n), minlength=n)`` (``_generate_sample_indices``).

    The legacy ``randint`` masks 32-bit words to the next power of two above n - 1 and rejects
    values above n - 1 (NumPy's ``random_bounded_uint64_fill`` with ``use_masked``). The
    rejection is branch-free (a rejected word counts in a spare slot n): about half the words
    are rejected, at random, so a branch would be mispredicted every other word."""
    counts = np.zeros(n + 1, np.int64)
    if n == 1:
        counts[0] = 1
        return counts[:n]
    mt = _mt_seed(seed)
    words = np.empty(624, np.uint32)
    r = np.int64(n - 1)
    mask = np.int64(_mask(n - 1))
    i = 0
    while i < n:
        _mt_block(mt, words)
        for pos in range(624):
            v = np.int64(words[pos]) & mask
            ok = v <= r
            counts[v if ok else n] += 1
            i += ok
            if i == n:
                break
    return counts[:n]


@numba.njit(cache=True)
def _splitter_seed(seed):
    """``RandomState(seed).randint(0, RAND_R_MAX)``: the splitter's ``rand_r`` state (``Splitter.init``)."""
    mt = _mt_seed(seed)
    words = np.empty(624, np.uint32)
    r = np.uint32(RAND_R_MAX - 1)
    mask = _mask(RAND_R_MAX - 1)
    pos = 624
    while True:
        if pos == 624:
            _mt_block(mt, words)
            pos = 0
        v = words[pos] & mask
        pos += 1
        if v <= r:
            return np.int64(v)


@numba.njit(cache=True)
def _gamma(k):
    """Higham's gamma_k = k u / (1 - k u): the relative error bound of a recursive sum of k terms."""
    return k * _U / (1.0 - k * _U)


@numba.njit(cache=True)
def _sq_error(sq, rows):
    """Bound on the difference between this module's and scikit-learn's sum of w y^2 = ``sq`` over
    ``rows`` drawn rows: 0 below 2**53 (both exact), else this module's error over per-input sums
    (gamma_{2 rows + 2}) plus scikit-learn's recursive sum in row order (gamma_{rows + 1}), each doubled
    for safety."""
    if sq < _EXACT:
        return 0.0
    mine = 2.0 * _gamma(2.0 * rows + 2.0) * sq
    return mine + 2.0 * _gamma(rows + 1.0) * (sq + mine)


@numba.njit(cache=True)
def _impurity_bound(err, sq, w, mean):
    """Bound on |scikit-learn's - this module's| impurity sq / w - mean^2 when their sums of w y^2
    differ by at most ``err`` (0: the same float operations on the same exact inputs)."""
    if err == 0.0:
        return 0.0
    return err / w + 16.0 * _U * (abs(sq) / w + mean * mean)


@numba.njit(cache=True)
def _point_sums(point_of_row, y, counts, n_points):
    """Per distinct input, over one tree's bootstrap (``counts`` per row): weight W = sum of w,
    S = sum of w y, Q = sum of w y^2, C = rows with w > 0. Every term is an integer, so the sums
    are scikit-learn's exactly (under the 2**53 bound); rows not drawn add zeros (no branch)."""
    W = np.zeros(n_points)
    S = np.zeros(n_points)
    Q = np.zeros(n_points)
    C = np.zeros(n_points, np.int64)
    for i in range(point_of_row.size):
        c = counts[i]
        k = point_of_row[i]
        w = np.float64(c)
        wy = w * y[i]
        W[k] += w
        S[k] += wy
        Q[k] += wy * y[i]
        C[k] += c > 0
    return W, S, Q, C


@numba.njit(cache=True)
def _build_tree(xs, presorted, W, S, Q, C, weighted_n_samples, rand_state):
    """Grow one tree as ``DepthFirstTreeBuilder`` + ``BestSplitter`` + ``MSE`` would on the rows.

    The inputs of a node are a range [start, end) of ``order[f]``, kept sorted by feature f for
    every f (stable partitions on each split), so a node costs time linear in its inputs; a
    node's sums (rows drawn, weight, sum w y, sum w y^2) come from its parent's split.
    ``presorted[f]``: all inputs sorted by feature f. Returns (feature, threshold, left, right,
    value) arrays (a leaf has left == -1) and True; or empty arrays and False where a decision
    that reads a sum of w y^2 above 2**53 lies within the rounding bound (module docstring)."""
    n_features = xs.shape[1]
    max_features = n_features  # RandomForestRegressor's default max_features=1.0
    n_pts = 0
    for k in range(W.size):
        if W[k] > 0:
            n_pts += 1
    order = np.empty((n_features, n_pts), np.int64)  # the drawn inputs, sorted by each feature
    for f in range(n_features):
        q = 0
        for k in presorted[f]:
            if W[k] > 0:
                order[f, q] = k
                q += 1
    buf = np.empty(n_pts, np.int64)
    go_left = np.zeros(xs.shape[0], np.bool_)
    cap = 2 * n_pts + 1
    feature = np.full(cap, -2, np.int64)
    threshold = np.full(cap, -2.0)
    left = np.full(cap, -1, np.int64)
    right = np.full(cap, -1, np.int64)
    value = np.zeros(cap)
    features = np.arange(n_features)
    constant_features = np.zeros(n_features, np.int64)
    state = np.array([np.uint32(rand_state)], np.uint32)
    # stack: (start, end, parent, is_left, n_constant_features, rows) and
    # (w, sum, sq, impurity, impurity's bound, 1.0 where sq is to be summed again from the inputs)
    st_i = np.zeros((cap, 6), np.int64)
    st_f = np.zeros((cap, 6))
    n0 = 0
    w0 = 0.0
    s0 = 0.0
    q0 = 0.0
    for q in range(n_pts):
        k = order[0, q]
        n0 += C[k]
        w0 += W[k]
        s0 += S[k]
        q0 += Q[k]
    st_i[0, 0], st_i[0, 1], st_i[0, 2], st_i[0, 3], st_i[0, 4], st_i[0, 5] = 0, n_pts, -1, 0, 0, n0
    st_f[0, 0], st_f[0, 1], st_f[0, 2], st_f[0, 3], st_f[0, 4], st_f[0, 5] = w0, s0, q0, np.inf, 0.0, 0.0
    empty_i = np.zeros(0, np.int64)
    empty_f = np.zeros(0)
    top = 1
    n_nodes = 0
    first = True
    while top > 0:
        top -= 1
        start, end, parent, is_left, n_known = st_i[top, 0], st_i[top, 1], st_i[top, 2], st_i[top, 3], st_i[top, 4]
        n_node_samples = st_i[top, 5]
        w_node, sum_total, sq_total, impurity = st_f[top, 0], st_f[top, 1], st_f[top, 2], st_f[top, 3]
        d_imp = st_f[top, 4]
        if st_f[top, 5] > 0.0:  # the parent's sum was inexact: this node's, from its inputs
            sq_total = 0.0
            for q in range(start, end):
                sq_total += Q[order[0, q]]
        e_node = _sq_error(sq_total, n_node_samples)
        is_leaf = n_node_samples < 2
        if first:
            m = sum_total / w_node
            impurity = sq_total / w_node - m * m
            d_imp = _impurity_bound(e_node, sq_total, w_node, m)
            first = False
        if not is_leaf and d_imp > 0.0 and abs(impurity - EPSILON) <= d_imp:
            return empty_i, empty_f, empty_i, empty_i, empty_f, False
        is_leaf = is_leaf or impurity <= EPSILON
        best_pos = end
        best_feature = -2
        best_threshold = -2.0
        imp_l = 0.0
        imp_r = 0.0
        d_l = 0.0
        d_r = 0.0
        improvement = 0.0
        b_n = 0
        b_w = 0.0
        b_s = 0.0
        b_q = 0.0
        if not is_leaf:
            # ---- BestSplitter.node_split
            f_i = n_features
            n_visited = 0
            n_found = 0
            n_drawn = 0
            n_total = n_known
            best_proxy = -np.inf
            while f_i > n_total and (n_visited < max_features or n_visited <= n_found + n_drawn):
                n_visited += 1
                f_j = _rand_int(n_drawn, f_i - n_found, state)
                if f_j < n_known:
                    t = features[n_drawn]
                    features[n_drawn] = features[f_j]
                    features[f_j] = t
                    n_drawn += 1
                    continue
                f_j += n_found
                feat = features[f_j]
                srt = order[feat]
                if xs[srt[end - 1], feat] <= xs[srt[start], feat] + FEATURE_THRESHOLD:
                    t = features[f_j]
                    features[f_j] = features[n_total]
                    features[n_total] = t
                    n_found += 1
                    n_total += 1
                    continue
                f_i -= 1
                t = features[f_i]
                features[f_i] = features[f_j]
                features[f_j] = t
                n_l = 0
                sum_l = 0.0
                w_l = 0.0
                sq_l = 0.0
                a = xs[srt[start], feat]
                for q in range(start, end - 1):
                    k = srt[q]
                    n_l += C[k]
                    sum_l += S[k]
                    w_l += W[k]
                    sq_l += Q[k]
                    b = xs[srt[q + 1], feat]
                    if b <= a + FEATURE_THRESHOLD:
                        a = b
                        continue
                    sum_r = sum_total - sum_l
                    w_r = w_node - w_l
                    proxy = sum_l * sum_l / w_l + sum_r * sum_r / w_r
                    if proxy > best_proxy:
                        best_proxy = proxy
                        best_pos = q + 1
                        best_feature = feat
                        best_threshold = np.float64(a) / 2.0 + np.float64(b) / 2.0
                        b_n, b_w, b_s, b_q = n_l, w_l, sum_l, sq_l
                    a = b
            if best_pos < end:
                # x <= threshold goes left: a prefix of order[best_feature]; the other orders are
                # partitioned stably
                for q in range(start, best_pos):
                    go_left[order[best_feature, q]] = True
                for f in range(n_features):
                    if f == best_feature:
                        continue
                    lo = start
                    hi = 0
                    for q in range(start, end):
                        k = order[f, q]
                        if go_left[k]:
                            order[f, lo] = k
                            lo += 1
                        else:
                            buf[hi] = k
                            hi += 1
                    for q in range(hi):
                        order[f, lo + q] = buf[q]
                for q in range(start, best_pos):
                    go_left[order[best_feature, q]] = False
                w_r = w_node - b_w
                sum_r = sum_total - b_s
                sq_r = sq_total - b_q
                ml = b_s / b_w
                mr = sum_r / w_r
                imp_l = b_q / b_w - ml * ml
                imp_r = sq_r / w_r - mr * mr
                improvement = ((w_node / weighted_n_samples)
                               * (impurity - (w_r / w_node * imp_r) - (b_w / w_node * imp_l)))
                if e_node > 0.0:  # scikit-learn's children's sums of w y^2 may differ from these
                    e_l = _sq_error(b_q, b_n)
                    d_l = _impurity_bound(e_l, b_q, b_w, ml)
                    d_r = _impurity_bound(1.01 * (e_node + e_l) + 2.0 * _U * abs(sq_r), sq_r, w_r, mr)
                if d_imp > 0.0 or d_l > 0.0 or d_r > 0.0:
                    share = w_node / weighted_n_samples
                    d_impr = share * (d_imp + w_r / w_node * d_r + b_w / w_node * d_l
                                      + 16.0 * _U * (abs(impurity) + abs(imp_r) + abs(imp_l) + d_imp + d_r + d_l))
                    if abs(improvement + EPSILON) <= d_impr:
                        return empty_i, empty_f, empty_i, empty_i, empty_f, False
            # constant-feature bookkeeping (features[:n_known] keep their order for siblings)
            for f in range(n_known):
                features[f] = constant_features[f]
            for f in range(n_found):
                constant_features[n_known + f] = features[n_known + f]
            n_known = n_total
            is_leaf = best_pos >= end or (improvement + EPSILON < 0.0)
        node = n_nodes
        n_nodes += 1
        if parent >= 0:
            if is_left:
                left[parent] = node
            else:
                right[parent] = node
        value[node] = sum_total / w_node
        if not is_leaf:
            feature[node] = best_feature
            threshold[node] = best_threshold
            st_i[top, 0], st_i[top, 1], st_i[top, 2], st_i[top, 3], st_i[top, 4] = best_pos, end, node, 0, n_known
            st_i[top, 5] = n_node_samples - b_n
            st_f[top, 0], st_f[top, 1], st_f[top, 2], st_f[top, 3] = w_node - b_w, sum_total - b_s, sq_total - b_q, imp_r
            st_f[top, 4], st_f[top, 5] = d_r, 1.0 if e_node > 0.0 else 0.0
            top += 1
            st_i[top, 0], st_i[top, 1], st_i[top, 2], st_i[top, 3], st_i[top, 4] = start, best_pos, node, 1, n_known
            st_i[top, 5] = b_n
            st_f[top, 0], st_f[top, 1], st_f[top, 2], st_f[top, 3] = b_w, b_s, b_q, imp_l
            st_f[top, 4], st_f[top, 5] = d_l, 1.0 if e_node > 0.0 else 0.0
            top += 1
    return feature[:n_nodes], threshold[:n_nodes], left[:n_nodes], right[:n_nodes], value[:n_nodes], True


@numba.njit(cache=True)
def _predict(xq, features, thresholds, lefts, rights, values, offsets):
    """Mean over the trees (summed in tree order, then divided, as scikit-learn does)."""
    n = xq.shape[0]
    out = np.zeros(n)
    n_trees = offsets.size - 1
    for t in range(n_trees):
        o = offsets[t]
        for i in range(n):
            node = 0
            while lefts[o + node] != -1:
                if np.float64(xq[i, features[o + node]]) <= thresholds[o + node]:
                    node = lefts[o + node]
                else:
                    node = rights[o + node]
            out[i] += values[o + node]
    for i in range(n):
        out[i] /= n_trees
    return out


@dataclass
class ExactForest:
    """The trees of one fit, concatenated (node arrays; ``offsets[t]`` = first node of tree t)."""

    features: np.ndarray
    thresholds: np.ndarray
    lefts: np.ndarray
    rights: np.ndarray
    values: np.ndarray
    offsets: np.ndarray

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Predictions for the rows of ``X`` (converted to float32, as scikit-learn does)."""
        xq = np.ascontiguousarray(np.asarray(X, dtype=np.float32).reshape(len(X), -1))
        return _predict(xq, self.features, self.thresholds, self.lefts, self.rights, self.values,
                        self.offsets)


def exact_bound_holds(y: np.ndarray) -> bool:
    """True if every weighted sum of w x y a fit can form is an integer below 2**53 (so exact in
    float64); the sums of w x y^2 are checked node by node while a tree grows."""
    y = np.asarray(y, dtype=float)
    if y.size == 0 or not np.all(np.isfinite(y)) or not np.all(y == np.rint(y)):
        return False
    # a bootstrap's weights sum to n: sum w |y| <= n max |y|
    return float(y.size) * float(np.max(np.abs(y))) < _EXACT


def fit(X: np.ndarray, y: np.ndarray, n_estimators: int = 100, seed: int = 0) -> ExactForest | None:
    """The forest ``RandomForestRegressor(n_estimators, random_state=seed).fit(X, y)`` would build.

    Returns None where the exactness bound (:func:`exact_bound_holds`) fails or a decision on a sum of
    w y^2 above 2**53 lies within its rounding bound (the module docstring)."""
    y = np.asarray(y, dtype=np.float64)
    return fit_grouped(X, np.arange(y.size), y, n_estimators, seed)


def fit_grouped(inputs: np.ndarray, input_of_row: np.ndarray, y: np.ndarray, n_estimators: int = 100,
                seed: int = 0) -> ExactForest | None:
    """:func:`fit` on the rows ``inputs[input_of_row]`` with targets ``y``, given without spelling the
    rows out: a caller that keeps its rows as indices into a short table of inputs (the online
    predictor's distinct (group, user) pairs) pays one pass over the table, not over the rows.

    Returns None where the exactness bound (:func:`exact_bound_holds`) fails or a decision on a sum of
    w y^2 above 2**53 lies within its rounding bound (the module docstring)."""
    y = np.asarray(y, dtype=np.float64)
    if not exact_bound_holds(y):
        return None
    xs32 = np.asarray(inputs, dtype=np.float32).reshape(len(inputs), -1)
    xs32 = np.ascontiguousarray(xs32 + np.float32(0.0))  # one bit pattern for 0.0 and -0.0
    keys = xs32.view(np.dtype((np.void, xs32.dtype.itemsize * xs32.shape[1]))).reshape(-1)
    if xs32.shape[1] == 2:
        keys = xs32.view(np.uint64).reshape(-1)  # two float32 codes as one 8-byte key: a fast sort
    _, first, point_of_input = np.unique(keys, return_index=True, return_inverse=True)
    points = np.ascontiguousarray(xs32[first])
    point_of_row = point_of_input.reshape(-1).astype(np.int64)[np.asarray(input_of_row, dtype=np.int64)]
    if point_of_row.size != y.size:
        raise ValueError(f"{point_of_row.size} rows of inputs for {y.size} targets")
    presorted = np.ascontiguousarray(np.stack([np.argsort(points[:, f], kind="stable")
                                               for f in range(points.shape[1])]).astype(np.int64))
    n = y.size
    rs = np.random.RandomState(seed)
    seeds = [rs.randint(MAX_INT) for _ in range(n_estimators)]  # _set_random_states, one per tree
    parts = []
    for s in seeds:
        counts = _bootstrap_counts(s, n)  # _generate_sample_indices, then bincount
        W, S, Q, C = _point_sums(point_of_row, y, counts, points.shape[0])
        rand_state = _splitter_seed(s)
        *tree, decided = _build_tree(points, presorted, W, S, Q, C, float(n), rand_state)
        if not decided:
            return None
        parts.append(tree)
    sizes = [p[0].size for p in parts]
    offsets = np.zeros(len(parts) + 1, np.int64)
    offsets[1:] = np.cumsum(sizes)
    return ExactForest(*(np.concatenate([p[i] for p in parts]) for i in range(5)), offsets)
