"""Batch CVB0 and CVB (second order) sweeps over a block of clumped documents.

CVB0: Eq. 3 of Foulds et al. (2013) (Asuncion et al. 2009). CVB: Eq. 16-18
of Teh, Newman & Welling (2007), the Gaussian second-order correction.
Pure functions over numpy arrays; no Spark, no I/O. The references written
plainly from the papers' equations are ``tests/reference_modes.py::
cvb0_block`` and ``::cvb_block``. (MAP-EM, once this sweep with the token's own
share included, is :mod:`sparklda.kernels.map_em`.)
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

from .config import FASTMATH, JIT_OPTIONS
from .lanes import lane_sum
from .priors import alpha_vector


@numba.njit(fastmath=FASTMATH, **JIT_OPTIONS)
def _cvb_block(
    indptr: NDArray[np.int64],
    local: NDArray[np.int32],
    counts: NDArray[np.floating[Any]],
    gamma: NDArray[np.floating[Any]],
    nphi: NDArray[np.floating[Any]],
    nz: NDArray[np.floating[Any]],
    var_phi: NDArray[np.floating[Any]],
    var_z: NDArray[np.floating[Any]],
    alpha: NDArray[np.floating[Any]],
    eta: np.floating[Any],
    w_eta: np.floating[Any],
    second_order: bool,
    d_nphi: NDArray[np.floating[Any]],
    d_nz: NDArray[np.floating[Any]],
    d_var_phi: NDArray[np.floating[Any]],
    d_var_z: NDArray[np.floating[Any]],
) -> tuple[
    NDArray[np.floating[Any]],
    NDArray[np.floating[Any]],
    NDArray[np.floating[Any]],
    NDArray[np.floating[Any]],
]:
    # nphi, nz, var_phi, var_z are the caller's private working copies: they
    # start at the broadcast values and follow this block's own changes.
    n_docs = indptr.shape[0] - 1
    n_topics = gamma.shape[1]
    zero = eta - eta
    one = zero + 1
    two = one + one
    # Bit-determinism (docs/architecture.md): no fast-math, so every loop over
    # topics rounds the same on LLVM's vectorised and scalar paths, and the
    # normaliser is summed by lanes.lane_sum in a fixed order. The one loop
    # calling a transcendental function (exp, CVB) could round differently on
    # the two paths if numba vectorised it with Intel SVML; its arrays are rows
    # of this one workspace, at fixed distances, so which path runs depends on
    # K only, never on where allocations happen to land.
    stride = n_topics + 64
    work = np.empty(4 * stride, dtype=gamma.dtype)
    ntheta = work[0:n_topics]
    vtheta = work[stride : stride + n_topics]
    base = work[2 * stride : 2 * stride + n_topics]
    expo = work[3 * stride : 3 * stride + n_topics]
    for j in range(n_docs):
        start = indptr[j]
        end = indptr[j + 1]
        if start == end:
            continue
        # N^Θ_j (and its variance) from the stored γ of the document's pairs
        for k in range(n_topics):
            ntheta[k] = zero
            vtheta[k] = zero
        for p in range(start, end):
            m = counts[p]
            for k in range(n_topics):
                ntheta[k] += m * gamma[p, k]
            if second_order:
                for k in range(n_topics):
                    g = gamma[p, k]
                    vtheta[k] += m * g * (one - g)
        for p in range(start, end):
            u = local[p]
            m = counts[p]
            if second_order:
                # Eq. 18: means and variances with the clump's own m·γ and
                # m·γ(1−γ) removed; exp(−V^Θ/2(.)² − V^Φ/2(.)² + V^Z/2(.)²)
                for k in range(n_topics):
                    g = gamma[p, k]
                    mg = m * g
                    mv = mg * (one - g)
                    a = max(ntheta[k] - mg, zero) + alpha[k]
                    b = max(nphi[u, k] - mg, zero) + eta
                    c = max(nz[k] - mg, zero) + w_eta
                    base[k] = a * b / c
                    expo[k] = (
                        max(var_z[k] - mv, zero) / (two * c * c)
                        - max(vtheta[k] - mv, zero) / (two * a * a)
                        - max(var_phi[u, k] - mv, zero) / (two * b * b)
                    )
                top = expo[0]
                for k in range(1, n_topics):
                    top = max(top, expo[k])
                for k in range(n_topics):
                    base[k] = base[k] * np.exp(expo[k] - top)
            else:
                # Eq. 3: (N^Φ_uk + η)/(N^Z_k + Wη) · (N^Θ_jk + α), all "−ij"
                for k in range(n_topics):
                    mg = m * gamma[p, k]
                    x = (
                        (max(nphi[u, k] - mg, zero) + eta)
                        / (max(nz[k] - mg, zero) + w_eta)
                        * (max(ntheta[k] - mg, zero) + alpha[k])
                    )
                    base[k] = x
            inv = one / lane_sum(base, n_topics)
            # store the new γ and add the clump's change back everywhere
            if second_order:
                for k in range(n_topics):
                    new = base[k] * inv
                    old = gamma[p, k]
                    gamma[p, k] = new
                    d = m * (new - old)
                    dv = m * (new * (one - new) - old * (one - old))
                    ntheta[k] += d
                    nphi[u, k] += d
                    nz[k] += d
                    d_nphi[u, k] += d
                    d_nz[k] += d
                    vtheta[k] += dv
                    var_phi[u, k] += dv
                    var_z[k] += dv
                    d_var_phi[u, k] += dv
                    d_var_z[k] += dv
            else:
                for k in range(n_topics):
                    new = base[k] * inv
                    old = gamma[p, k]
                    gamma[p, k] = new
                    d = m * (new - old)
                    ntheta[k] += d
                    nphi[u, k] += d
                    nz[k] += d
                    d_nphi[u, k] += d
                    d_nz[k] += d
    return d_nphi, d_nz, d_var_phi, d_var_z


def cvb0_block(
    indptr: NDArray[np.integer[Any]],
    local: NDArray[np.integer[Any]],
    counts: NDArray[np.floating[Any]],
    gamma: NDArray[np.floating[Any]],
    nphi: NDArray[np.floating[Any]],
    nz: NDArray[np.floating[Any]],
    alpha: float | NDArray[np.floating[Any]],
    eta: float,
    w_eta: float,
    second_order: bool = False,
    var_phi: NDArray[np.floating[Any]] | None = None,
    var_z: NDArray[np.floating[Any]] | None = None,
) -> tuple[NDArray[np.floating[Any]], ...]:
    """One CVB0 (or CVB) sweep over a block of documents, updating γ in place.

    For each document j, N^Θ_j = Σ_p m_p γ_p is computed from the stored γ of
    its pairs; then for each pair p = (j, u) with count m, in storage order:

    1. remove the pair's own contribution m·γ_p from N^Θ_j, N^Φ_u and N^Z
       (the "−ij" of Eq. 3; values are floored at 0 against rounding);
    2. γ_pk ∝ (N^Φ_uk + η) / (N^Z_k + Wη) · (N^Θ_jk + α)
       (Eq. 3 of Foulds et al. 2013, CVB0 of Asuncion et al. 2009);
    3. add m·γ_p (the new γ) back to N^Θ_j, N^Φ_u and N^Z.

    Clumping: every pair stands for m tokens sharing one γ, and step 1
    removes the whole clump m·γ, not one token's γ as the token-level rule
    does. This is the standard practice for clumped CVB0 (Foulds et al.
    2013, Sec. 2.1; Teh et al. 2007, Sec. 3.1 keep "one copy of the
    variational posterior for each unique document/word pair"); for m = 1 it
    is the exact rule.

    With ``second_order=True`` this is CVB with the Gaussian approximation
    (Teh, Newman & Welling 2007, Eq. 16-18). The variances
    V = Σ m γ(1 − γ) of N^Θ_j (per document, computed like N^Θ_j), N^Φ_u
    (``var_phi``) and N^Z (``var_z``) are tracked too, the clump's own
    m·γ(1 − γ) removed and added back likewise, and the CVB0 term of step 2
    is multiplied by (Eq. 18, from the second-order expansion Eq. 17
    E[log(a + n)] ≈ log(a + E n) − Var n / (2 (a + E n)²): the two counts
    in the numerator of Eq. 15 get a minus sign, N^Z in the denominator a
    plus sign)

        exp(− V^Θ_jk / (2 (N^Θ_jk + α)²) − V^Φ_uk / (2 (N^Φ_uk + η)²)
            + V^Z_k / (2 (N^Z_k + Wη)²)).

    The kernel works on private copies of ``nphi`` / ``nz`` (and variances):
    the approximate distributed scheme of Newman et al., where a partition
    sees the statistics broadcast at the start of the iteration plus its own
    changes, and the driver adds up every partition's deltas.

    Parameters
    ----------
    indptr : int64 array (D+1,)
        CSR row pointers of the block's documents (empty documents allowed).
    local : int32 array (nnz,)
        Row of ``nphi`` (the block's U distinct terms) of each pair.
    counts : float array (nnz,)
        Count m of each (document, term) pair.
    gamma : float32 or float64 array (nnz, K), C-contiguous, writable
        Stored variational distribution of each pair, rows summing to one.
        **Updated in place.** Its dtype sets the dtype of the computation.
    nphi : float array (U, K)
        N^Φ rows of the block's terms as broadcast at the start of the
        iteration (not modified).
    nz : float array (K,)
        N^Z as broadcast (not modified).
    alpha : float or float array (K,)
        α, the document-topic prior: a number (symmetric) or a K-vector (a
        learned asymmetric α; equal values give the bits of the number).
    eta : float
        η, the symmetric topic-word prior.
    w_eta : float
        W·η, with W the full vocabulary size (not U).
    second_order : bool
        Use the CVB correction (Eq. 18) instead of CVB0.
    var_phi : float array (U, K), required if ``second_order``
        Var N^Φ rows as broadcast, Σ m γ(1 − γ) over the corpus's pairs.
    var_z : float array (K,), required if ``second_order``
        Var N^Z as broadcast.

    Returns
    -------
    tuple
        ``(delta_nphi, delta_nz)`` for CVB0, or
        ``(delta_nphi, delta_nz, delta_var_phi, delta_var_z)`` for CVB:
        ``delta_nphi`` (U, K) and ``delta_nz`` (K,) are this block's new
        minus old contributions Σ m (γ_new − γ_old) to N^Φ rows and N^Z;
        ``delta_var_phi`` (U, K) and ``delta_var_z`` (K,) the same for
        Σ m γ(1 − γ). All have ``gamma``'s dtype and
        ``delta_nphi.sum(0) == delta_nz`` up to rounding.

    Raises
    ------
    ValueError
        If ``gamma`` is not a writable C-contiguous float32/float64 array of
        shape (nnz, K), or variances are missing for ``second_order``.

    References
    ----------
    Foulds, Boyles, DuBois, Smyth & Welling (2013), Eq. 3.
    Teh, Newman & Welling (2007), Eq. 15-18.

    Equivalent to ``tests/reference_modes.py::cvb0_block`` (CVB0) and
    ``::cvb_block`` (CVB), which compute every statistic from scratch as
    broadcast − block's initial contributions + block's current contributions
    − the pair's own.

    Examples
    --------
    One document with two terms (3 and 1 tokens), one empty document, K = 2,
    and a block that is the whole corpus (W = 2):

    >>> import numpy as np
    >>> indptr, local = np.array([0, 2, 2]), np.array([0, 1], dtype=np.int32)
    >>> counts = np.array([3.0, 1.0])
    >>> gamma = cvb0_init_gamma(np.array([[1.0, 2.0], [2.0, 1.0]]))
    >>> nphi = counts[:, None] * gamma
    >>> d_nphi, d_nz = cvb0_block(indptr, local, counts, gamma, nphi, nphi.sum(0),
    ...                           0.1, 0.01, 2 * 0.01)
    >>> bool(np.allclose(d_nphi.sum(0), d_nz)), bool(np.allclose(gamma.sum(1), 1))
    (True, True)
    """
    if not isinstance(gamma, np.ndarray) or gamma.dtype not in (np.float32, np.float64):
        raise ValueError(
            "cvb0_block: 'gamma' must be a float32 or float64 numpy array, "
            f"got {type(gamma).__name__} of dtype {getattr(gamma, 'dtype', None)}."
        )
    if not (gamma.flags.c_contiguous and gamma.flags.writeable):
        raise ValueError(
            "cvb0_block: 'gamma' is updated in place and must be a writable C-contiguous array."
        )
    if gamma.ndim != 2 or gamma.shape[0] != len(local) or len(counts) != len(local):
        raise ValueError(
            f"cvb0_block: 'gamma' must have shape (nnz, K) = ({len(local)}, K) "
            f"matching 'local' and 'counts', got {gamma.shape}."
        )
    dtype = gamma.dtype
    cast = dtype.type
    n_topics = gamma.shape[1]
    nphi_work = np.array(nphi, dtype=dtype, order="C", copy=True)
    nz_work = np.array(nz, dtype=dtype, copy=True)
    if nphi_work.ndim != 2 or nphi_work.shape[1] != n_topics or nz_work.shape != (n_topics,):
        raise ValueError(
            f"cvb0_block: 'nphi' must be (U, {n_topics}) and 'nz' ({n_topics},), "
            f"got {nphi_work.shape} and {nz_work.shape}."
        )
    second_order = bool(second_order)
    if second_order:
        if var_phi is None or var_z is None:
            raise ValueError("cvb0_block: second_order=True needs 'var_phi' and 'var_z'.")
        var_phi_work = np.array(var_phi, dtype=dtype, order="C", copy=True)
        var_z_work = np.array(var_z, dtype=dtype, copy=True)
        if var_phi_work.shape != nphi_work.shape or var_z_work.shape != nz_work.shape:
            raise ValueError(
                "cvb0_block: 'var_phi' and 'var_z' must have the shapes of "
                f"'nphi' and 'nz', got {var_phi_work.shape} and {var_z_work.shape}."
            )
        d_var_phi = np.zeros_like(nphi_work)
        d_var_z = np.zeros_like(nz_work)
    else:
        var_phi_work = d_var_phi = np.zeros((0, n_topics), dtype=dtype)
        var_z_work = d_var_z = np.zeros(0, dtype=dtype)
    d_nphi = np.zeros_like(nphi_work)
    d_nz = np.zeros_like(nz_work)
    _cvb_block(
        np.ascontiguousarray(indptr, dtype=np.int64),
        np.ascontiguousarray(local, dtype=np.int32),
        np.ascontiguousarray(counts, dtype=dtype),
        gamma,
        nphi_work,
        nz_work,
        var_phi_work,
        var_z_work,
        alpha_vector(alpha, n_topics, dtype),
        cast(eta),
        cast(w_eta),
        second_order,
        d_nphi,
        d_nz,
        d_var_phi,
        d_var_z,
    )
    if second_order:
        return d_nphi, d_nz, d_var_phi, d_var_z
    return d_nphi, d_nz


def cvb0_init_gamma(uniforms: NDArray[np.number[Any]]) -> NDArray[np.floating[Any]]:
    """Random initial γ for CVB0/CVB: each row of ``uniforms`` normalised to sum to 1.

    ``uniforms`` (nnz, K) are positive draws the caller supplies (for example
    :func:`sparklda.kernels.uniform_matrix` keyed by pair), so the result
    depends only on the seed. Returns a new C-contiguous array of the same
    float dtype.

    Equivalent to ``uniforms / uniforms.sum(1, keepdims=True)``.
    """
    u = np.asarray(uniforms)
    if u.dtype not in (np.float32, np.float64):
        u = u.astype(np.float64)
    return np.ascontiguousarray(u / u.sum(axis=1, keepdims=True))
