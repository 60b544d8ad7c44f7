"""Compiled kernels of the node-level replay (SPEC §11): fit, GPU choice, node scoring, the event loop.

All compiled code of the placement engine lives in this one file, so that numba's on-disk cache
(which stamps a function with its own file only) never mixes stale callees into a caller.

State is plain arrays (see `engine.ClusterState`): per node CPU/memory left and the milli-GPU
left on each of its GPUs; scalars of the loop live in `iv` (int64) and `fv` (float64) so that a
run can stop at a decision (the PPO agent's) and resume where it was.

Policies (codes): 0 random, 1 first-fit, 2 best-fit (the FGD simulator's BestFit score), 3
least-loaded (lowest mean of CPU and GPU allocation: the seed's balancing), 4 FGD (fragmentation
gradient descent, Weng et al. ATC'23, as hkust-adsl/kubernetes-scheduler-simulator scores it),
5 external (the loop stops and the caller chooses).
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

RANDOM, FIRST_FIT, BEST_FIT, LEAST_LOADED, FGD, EXTERNAL = 0, 1, 2, 3, 4, 5
MILLI = 1000
MAX_SPEC_CPU = 128000.0  # the FGD simulator's normalisers (open-gpu-share utils/const.go)
MAX_SPEC_GPU = 8000.0
HOT = 0.8

# iv slots
IV_NEXT_ARR, IV_HEAP_N, IV_Q_HEAD, IV_Q_TAIL, IV_PLACED, IV_FAILED, IV_UNFIT, IV_HOT, IV_DONE, IV_PENDING, IV_QLEN, IV_DRAWN = range(12)
N_IV = 12
# fv slots
(FV_NOW, FV_T0, FV_SUM_U, FV_SUM_U2, FV_SUM_F, FV_ALLOC, FV_W_ALLOC, FV_W_FRAG, FV_W_STD, FV_W_HOT, FV_W_IDLE, FV_SPAN,
 FV_WAIT_SUM, FV_ARRIVED, FV_CAP, FV_SNAP_ALLOC, FV_SNAP_FRAG, FV_SNAP_STD, FV_SNAP_HOT, FV_SNAP_IDLE, FV_ANY_FAIL) = range(21)
N_FV = 21


@nb.njit(cache=True)
def node_frag(n, cpu_free, gfree, ngpu, model, access, g_gm, g_ng, g_spec, g_ptot, g_start, g_len, g_cpu, g_cum, p_nogpu):
    """Expected idle milli-GPUs of node n that the typical pods cannot use (FGD's fragment measure:
    `NodeGpuShareFragAmountScore` of pkg/utils/frag.go, i.e. `NodeGpuShareFragAmount` summed except
    Q3). Per typical pod, weighted by its frequency (`GetNodePodFrag` classifies it): a CPU-only pod
    (XL/XR) or one the node's GPU type excludes (NoAccess) makes every idle milli-GPU a fragment; a
    pod that fits neither GPUs nor CPU (Q1), GPUs only short (Q2) or CPU short (Q4) likewise; a pod
    that fits (Q3) makes the idle milli-GPU of the GPUs too small for it a fragment
    (`GetGpuFragMilliByNodeResAndPodRes`: the per-GPU measure of fractional GPUs)."""
    k = ngpu[n]
    left = 0
    for i in range(k):
        left += gfree[n, i]
    if left == 0:
        return 0.0
    f = p_nogpu * left
    for g in range(g_gm.shape[0]):
        s = g_spec[g]
        if s >= 0 and (model[n] < 0 or not access[s, model[n]]):
            f += g_ptot[g] * left
            continue
        gm = g_gm[g]
        fit = 0
        frag = 0
        for i in range(k):
            if gfree[n, i] >= gm:
                fit += 1
            else:
                frag += gfree[n, i]
        if fit < g_ng[g]:
            f += g_ptot[g] * left
            continue
        # probability of the group's pods whose CPU fits (cpu sorted ascending, cumulative p)
        lo = g_start[g]
        hi = lo + g_len[g]
        c = cpu_free[n]
        a, b = lo, hi
        while a < b:
            m = (a + b) // 2
            if g_cpu[m] <= c:
                a = m + 1
            else:
                b = m
        p_le = 0.0 if a == lo else g_cum[a - 1]
        f += p_le * frag + (g_ptot[g] - p_le) * left
    return f


@nb.njit(cache=True)
def fits(n, p, cpu_free, mem_free, gfree, ngpu, model, access, p_cpu, p_mem, p_ng, p_gm, p_spec):
    if cpu_free[n] < p_cpu[p] or mem_free[n] < p_mem[p]:
        return False
    need = p_ng[p]
    if need == 0:
        return True
    s = p_spec[p]
    if s >= 0 and (model[n] < 0 or not access[s, model[n]]):
        return False
    gm = p_gm[p]
    c = 0
    for i in range(ngpu[n]):
        if gfree[n, i] >= gm:
            c += 1
            if c >= need:
                return True
    return False


@nb.njit(cache=True)
def _util(n, cpu_cap, cpu_free, ngpu, gfree):
    u_c = 1.0 - cpu_free[n] / cpu_cap[n] if cpu_cap[n] > 0 else 0.0
    if ngpu[n] == 0:
        return u_c, u_c, 0.0
    left = 0
    for i in range(ngpu[n]):
        left += gfree[n, i]
    u_g = 1.0 - left / (ngpu[n] * MILLI)
    return 0.5 * (u_c + u_g), u_c, u_g


@nb.njit(cache=True)
def _share_gpu_choice(n, p, how, gfree, ngpu, p_gm, cpu_free, frag_args, p_cpu):
    """Which GPU of node n a GPU-share pod takes: 0 best (least milli left that fits), 1 random
    among those that fit, 2 FGD (least fragmentation after)."""
    gm = p_gm[p]
    best = -1
    if how == 1:
        cnt = 0
        for i in range(ngpu[n]):
            if gfree[n, i] >= gm:
                cnt += 1
                if np.random.randint(cnt) == 0:
                    best = i
        return best
    if how == 2:
        cpu_free_, gfree_, ngpu_, model, access, g_gm, g_ng, g_spec, g_ptot, g_start, g_len, g_cpu, g_cum, p_nogpu = frag_args
        # calculateGpuShareFragExtendScore (fgd_score.go): the GPU with the highest integer score
        # int(sigmoid((F_before - F_after) / 1000) * 100), the first one among equal scores
        f0 = node_frag(n, cpu_free, gfree, ngpu, model, access, g_gm, g_ng, g_spec, g_ptot, g_start, g_len, g_cpu, g_cum, p_nogpu)
        best_s = -1
        cpu_free[n] -= p_cpu[p]
        for i in range(ngpu[n]):
            if gfree[n, i] >= gm:
                gfree[n, i] -= gm
                f = node_frag(n, cpu_free, gfree, ngpu, model, access, g_gm, g_ng, g_spec, g_ptot, g_start, g_len, g_cpu, g_cum, p_nogpu)
                gfree[n, i] += gm
                sc = _sigmoid_score(f0 - f)
                if sc > best_s:
                    best_s = sc
                    best = i
        cpu_free[n] += p_cpu[p]
        return best
    best_left = 1 << 30
    for i in range(ngpu[n]):
        if gfree[n, i] >= gm and gfree[n, i] < best_left:
            best_left = gfree[n, i]
            best = i
    return best


@nb.njit(cache=True)
def _sigmoid_score(drop):
    """int(sigmoid(drop / 1000) * MaxNodeScore) (fgd_score.go, calculateGpuShareFragExtendScore)."""
    return int((1.0 / (1.0 + math.exp(-drop / 1000.0))) * 100.0)


@nb.njit(cache=True)
def _fgd_score(n, p, cpu_free, gfree, ngpu, model, access, g_gm, g_ng, g_spec, g_ptot, g_start, g_len, g_cpu, g_cum,
               p_nogpu, f_old, p_cpu, p_ng, p_gm):
    """The FGD plugin's score (`FGDScorePlugin.Score` -> `calculateGpuShareFragExtendScore`,
    pkg/simulator/plugin/fgd_score.go): int(sigmoid((F_before - F_after) / 1000) * 100); for a
    GPU-share pod the best over the GPUs it fits, for others after `NodeResource.Sub`."""
    best = _frag_after(n, p, cpu_free, gfree, ngpu, model, access, g_gm, g_ng, g_spec, g_ptot, g_start, g_len, g_cpu,
                       g_cum, p_nogpu, p_cpu, p_ng, p_gm)
    return _sigmoid_score(f_old[n] - best)


@nb.njit(cache=True)
def _frag_after(n, p, cpu_free, gfree, ngpu, model, access, g_gm, g_ng, g_spec, g_ptot, g_start, g_len, g_cpu, g_cum,
                p_nogpu, p_cpu, p_ng, p_gm):
    """Node n's fragment measure once pod p is on it: a GPU-share pod on the GPU leaving the least
    (the highest score of `calculateGpuShareFragExtendScore`), a whole-GPU pod on free GPUs (`Sub`
    takes the least sufficient GPUs, which for 1000 milli are the free ones)."""
    gm = p_gm[p]
    cpu_free[n] -= p_cpu[p]
    best = 1e300
    if p_ng[p] == 1 and gm < MILLI:
        seen0, seen1, seen2, seen3 = -1, -1, -1, -1
        for i in range(ngpu[n]):
            v = gfree[n, i]
            if v >= gm and v != seen0 and v != seen1 and v != seen2 and v != seen3:
                seen3, seen2, seen1, seen0 = seen2, seen1, seen0, v
                gfree[n, i] -= gm
                f = node_frag(n, cpu_free, gfree, ngpu, model, access, g_gm, g_ng, g_spec, g_ptot, g_start, g_len, g_cpu, g_cum, p_nogpu)
                gfree[n, i] += gm
                if f < best:
                    best = f
    else:
        took = 0
        idx = np.empty(64, np.int64)
        for i in range(ngpu[n]):
            if took < p_ng[p] and gfree[n, i] >= MILLI:
                gfree[n, i] -= gm
                idx[took] = i
                took += 1
        best = node_frag(n, cpu_free, gfree, ngpu, model, access, g_gm, g_ng, g_spec, g_ptot, g_start, g_len, g_cpu, g_cum, p_nogpu)
        for j in range(took):
            gfree[n, idx[j]] += gm
    cpu_free[n] += p_cpu[p]
    return best


@nb.njit(cache=True)
def select_node(p, policy, cpu_cap, cpu_free, mem_free, gfree, ngpu, model, access, p_cpu, p_mem, p_ng, p_gm, p_spec,
                g_gm, g_ng, g_spec, g_ptot, g_start, g_len, g_cpu, g_cum, p_nogpu, f_old, mask,
                p_shape, node_ver, sc_ver, sc_val, rank):
    """The node a heuristic puts pod p on (-1: nothing fits). Fills `mask` with the feasible nodes.
    Best-fit and FGD give equal scores to the node of lowest `rank` (`engine.tie_rank`): the FGD
    paper's simulator builds on a kube-scheduler fork (mental2008/kubernetes v1.20.5-minor,
    `selectHost`) that picks "the smallest lexicographical order if the score remains the same", and
    it names its nodes `%04d-<name>` after a seeded random permutation (pkg/simulator/simulator.go,
    `syncClusterResourceList`), so the smallest name is a random node, the same one all run long.
    First-fit and least-loaded take the first node in name order; random-fit (RandomScore: a random
    score per node) breaks ties at random. FGD's score of a node depends on the node and on the
    pod's (CPU, GPUs, milli-GPU) only: it is kept per pod shape and node (`sc_val`) until the node
    changes (`node_ver`)."""
    n_nodes = cpu_cap.shape[0]
    best = -1
    best_s = -1e300
    ties = 0
    pc, pm, need, gm, sp = p_cpu[p], p_mem[p], p_ng[p], p_gm[p], p_spec[p]
    for n in range(n_nodes):
        # `fits`, inlined: this loop runs once per node and pod, and is most of a replay's time
        ok = cpu_free[n] >= pc and mem_free[n] >= pm
        if ok and need > 0:
            if sp >= 0 and (model[n] < 0 or not access[sp, model[n]]):
                ok = False
            else:
                c = 0
                for i in range(ngpu[n]):
                    if gfree[n, i] >= gm:
                        c += 1
                        if c >= need:
                            break
                ok = c >= need
        mask[n] = ok
        if not ok:
            continue
        if policy == FIRST_FIT:
            if best < 0:
                best = n
            continue
        if policy == RANDOM:
            s = 0.0
        elif policy == BEST_FIT:
            left = 0
            for i in range(ngpu[n]):
                left += gfree[n, i]
            raw = 0.5 * (cpu_free[n] - p_cpu[p]) / MAX_SPEC_CPU + 0.5 * (left - p_ng[p] * p_gm[p]) / MAX_SPEC_GPU
            s = float(int((1.0 - raw) * 100.0))
        elif policy == LEAST_LOADED:
            u, uc, ug = _util(n, cpu_cap, cpu_free, ngpu, gfree)
            s = -u
        else:
            sh = p_shape[p]
            if sc_ver[sh, n] == node_ver[n]:
                s = sc_val[sh, n]
            else:
                s = float(_fgd_score(n, p, cpu_free, gfree, ngpu, model, access, g_gm, g_ng, g_spec, g_ptot, g_start,
                                     g_len, g_cpu, g_cum, p_nogpu, f_old, p_cpu, p_ng, p_gm))
                sc_val[sh, n] = s
                sc_ver[sh, n] = node_ver[n]
        if s > best_s:
            best_s = s
            best = n
            ties = 1
        elif s == best_s:
            if policy == RANDOM:
                ties += 1
                if np.random.randint(ties) == 0:
                    best = n
            elif (policy == BEST_FIT or policy == FGD) and rank[n] < rank[best]:
                best = n
    return best


@nb.njit(cache=True)
def seed_rng(seed):
    np.random.seed(seed)


@nb.njit(cache=True)
def _node_stats(n, cpu_cap, cpu_free, ngpu, gfree, sign, fv, iv, f_cache, frag_val):
    u, uc, ug = _util(n, cpu_cap, cpu_free, ngpu, gfree)
    fv[FV_SUM_U] += sign * u
    fv[FV_SUM_U2] += sign * u * u
    if uc > HOT or ug > HOT:
        iv[IV_HOT] += int(sign)
    if sign > 0:
        f_cache[n] = frag_val
    fv[FV_SUM_F] += sign * f_cache[n]


@nb.njit(cache=True)
def place_on(n, p, gpu_sel, cpu_cap, cpu_free, mem_free, gfree, ngpu, model, access, p_cpu, p_mem, p_ng, p_gm,
             g_gm, g_ng, g_spec, g_ptot, g_start, g_len, g_cpu, g_cum, p_nogpu, f_cache, fv, iv, a_node, a_mask):
    """Give pod p its resources on node n (GPU choice `gpu_sel`: 0 best, 1 random, 2 FGD); keep
    the running sums of utilisation, hot nodes and fragmentation up to date."""
    _node_stats(n, cpu_cap, cpu_free, ngpu, gfree, -1.0, fv, iv, f_cache, 0.0)
    cpu_free[n] -= p_cpu[p]
    mem_free[n] -= p_mem[p]
    gm = p_gm[p]
    mask = 0
    if p_ng[p] == 1 and gm < MILLI:
        frag_args = (cpu_free, gfree, ngpu, model, access, g_gm, g_ng, g_spec, g_ptot, g_start, g_len, g_cpu, g_cum, p_nogpu)
        cpu_free[n] += p_cpu[p]
        i = _share_gpu_choice(n, p, gpu_sel, gfree, ngpu, p_gm, cpu_free, frag_args, p_cpu)
        cpu_free[n] -= p_cpu[p]
        gfree[n, i] -= gm
        mask = 1 << i
    elif p_ng[p] > 0:
        took = 0
        for i in range(ngpu[n]):
            if took < p_ng[p] and gfree[n, i] >= MILLI:
                gfree[n, i] -= gm
                mask |= 1 << i
                took += 1
    fv[FV_ALLOC] += p_ng[p] * gm
    a_node[p] = n
    a_mask[p] = mask
    f = node_frag(n, cpu_free, gfree, ngpu, model, access, g_gm, g_ng, g_spec, g_ptot, g_start, g_len, g_cpu, g_cum, p_nogpu)
    _node_stats(n, cpu_cap, cpu_free, ngpu, gfree, 1.0, fv, iv, f_cache, f)


@nb.njit(cache=True)
def release(p, cpu_cap, cpu_free, mem_free, gfree, ngpu, model, access, p_cpu, p_mem, p_ng, p_gm,
            g_gm, g_ng, g_spec, g_ptot, g_start, g_len, g_cpu, g_cum, p_nogpu, f_cache, fv, iv, a_node, a_mask):
    n = a_node[p]
    _node_stats(n, cpu_cap, cpu_free, ngpu, gfree, -1.0, fv, iv, f_cache, 0.0)
    cpu_free[n] += p_cpu[p]
    mem_free[n] += p_mem[p]
    for i in range(ngpu[n]):
        if a_mask[p] & (1 << i):
            gfree[n, i] += p_gm[p]
    fv[FV_ALLOC] -= p_ng[p] * p_gm[p]
    f = node_frag(n, cpu_free, gfree, ngpu, model, access, g_gm, g_ng, g_spec, g_ptot, g_start, g_len, g_cpu, g_cum, p_nogpu)
    _node_stats(n, cpu_cap, cpu_free, ngpu, gfree, 1.0, fv, iv, f_cache, f)
    return n


# --- departures: a binary min-heap on (time, pod) in preallocated arrays ---------------------------

@nb.njit(cache=True)
def heap_push(ht, hp, iv, t, p):
    i = iv[IV_HEAP_N]
    iv[IV_HEAP_N] += 1
    ht[i] = t
    hp[i] = p
    while i > 0:
        j = (i - 1) // 2
        if ht[j] < ht[i] or (ht[j] == ht[i] and hp[j] < hp[i]):
            break
        ht[i], ht[j] = ht[j], ht[i]
        hp[i], hp[j] = hp[j], hp[i]
        i = j


@nb.njit(cache=True)
def heap_pop(ht, hp, iv):
    p = hp[0]
    n = iv[IV_HEAP_N] - 1
    iv[IV_HEAP_N] = n
    ht[0] = ht[n]
    hp[0] = hp[n]
    i = 0
    while True:
        l, r, m = 2 * i + 1, 2 * i + 2, i
        if l < n and (ht[l] < ht[m] or (ht[l] == ht[m] and hp[l] < hp[m])):
            m = l
        if r < n and (ht[r] < ht[m] or (ht[r] == ht[m] and hp[r] < hp[m])):
            m = r
        if m == i:
            break
        ht[i], ht[m] = ht[m], ht[i]
        hp[i], hp[m] = hp[m], hp[i]
        i = m
    return p


# --- the two experiments -------------------------------------------------------------------------

@nb.njit(cache=True)
def _accumulate(dt, cl, typ, st):
    cpu_cap = cl[0]
    fv, iv = st[1], st[2]
    if dt <= 0:
        return
    n = cpu_cap.shape[0]
    cap = fv[FV_CAP]
    mean = fv[FV_SUM_U] / n
    var = fv[FV_SUM_U2] / n - mean * mean
    fv[FV_W_ALLOC] += dt * fv[FV_ALLOC] / cap
    fv[FV_W_FRAG] += dt * fv[FV_SUM_F] / cap
    fv[FV_W_STD] += dt * math.sqrt(var if var > 0 else 0.0)
    fv[FV_W_HOT] += dt * iv[IV_HOT] / n
    if iv[IV_QLEN] > 0:
        fv[FV_W_IDLE] += dt * (1.0 - fv[FV_ALLOC] / cap)
    fv[FV_SPAN] += dt


@nb.njit(cache=True)
def _place(n, p, gpu_sel, cl, pods, typ, st):
    cpu_cap, cpu_free, mem_free, gfree, ngpu, model, access, rank = cl
    p_cpu, p_mem, p_ng, p_gm, p_spec, t_arr, dur, unfit, p_shape = pods
    g_gm, g_ng, g_spec, g_ptot, g_start, g_len, g_cpu, g_cum, p_nogpu = typ
    f_cache, fv, iv, a_node, a_mask, ht, hp, queue, mask, waits, node_ver, sc_ver, sc_val = st
    place_on(n, p, gpu_sel, cpu_cap, cpu_free, mem_free, gfree, ngpu, model, access, p_cpu, p_mem, p_ng, p_gm,
             g_gm, g_ng, g_spec, g_ptot, g_start, g_len, g_cpu, g_cum, p_nogpu, f_cache, fv, iv, a_node, a_mask)
    node_ver[n] += 1
    iv[IV_PLACED] += 1
    w = fv[FV_NOW] - t_arr[p]
    waits[p] = w
    fv[FV_WAIT_SUM] += w
    if dur[p] >= 0:
        heap_push(ht, hp, iv, fv[FV_NOW] + dur[p], p)


@nb.njit(cache=True)
def _select(p, policy, cl, pods, typ, st):
    cpu_cap, cpu_free, mem_free, gfree, ngpu, model, access, rank = cl
    p_cpu, p_mem, p_ng, p_gm, p_spec, t_arr, dur, unfit, p_shape = pods
    g_gm, g_ng, g_spec, g_ptot, g_start, g_len, g_cpu, g_cum, p_nogpu = typ
    f_cache, fv, iv, a_node, a_mask, ht, hp, queue, mask, waits, node_ver, sc_ver, sc_val = st
    return select_node(p, FIRST_FIT if policy == EXTERNAL else policy, cpu_cap, cpu_free, mem_free, gfree, ngpu, model,
                       access, p_cpu, p_mem, p_ng, p_gm, p_spec, g_gm, g_ng, g_spec, g_ptot, g_start, g_len, g_cpu,
                       g_cum, p_nogpu, f_cache, mask, p_shape, node_ver, sc_ver, sc_val, rank)


@nb.njit(cache=True)
def _depart(cl, pods, typ, st, gpu_sel):
    cpu_cap, cpu_free, mem_free, gfree, ngpu, model, access, rank = cl
    p_cpu, p_mem, p_ng, p_gm, p_spec, t_arr, dur, unfit, p_shape = pods
    g_gm, g_ng, g_spec, g_ptot, g_start, g_len, g_cpu, g_cum, p_nogpu = typ
    f_cache, fv, iv, a_node, a_mask, ht, hp, queue, mask, waits, node_ver, sc_ver, sc_val = st
    p = heap_pop(ht, hp, iv)
    n = release(p, cpu_cap, cpu_free, mem_free, gfree, ngpu, model, access, p_cpu, p_mem, p_ng, p_gm,
                g_gm, g_ng, g_spec, g_ptot, g_start, g_len, g_cpu, g_cum, p_nogpu, f_cache, fv, iv, a_node, a_mask)
    node_ver[n] += 1
    # only node n gained room: a waiting pod can only fit there now (it fitted nowhere before)
    for k in range(iv[IV_Q_HEAD], iv[IV_Q_TAIL]):
        w = queue[k]
        if w < 0:
            continue
        if fits(n, w, cpu_free, mem_free, gfree, ngpu, model, access, p_cpu, p_mem, p_ng, p_gm, p_spec):
            _place(n, w, gpu_sel, cl, pods, typ, st)
            queue[k] = -1
            iv[IV_QLEN] -= 1
    while iv[IV_Q_HEAD] < iv[IV_Q_TAIL] and queue[iv[IV_Q_HEAD]] < 0:
        iv[IV_Q_HEAD] += 1


@nb.njit(cache=True)
def run_time(cl, pods, typ, st, order, policy, gpu_sel):
    """Time replay: pods arrive at their creation time, hold their resources for their duration,
    wait in a queue (in arrival order) when nothing fits. Returns 1 when the EXTERNAL policy has a
    decision to make (pod in iv[IV_PENDING], feasible nodes in `mask`), 0 when the trace is over."""
    t_arr, unfit = pods[5], pods[7]
    f_cache, fv, iv, a_node, a_mask, ht, hp, queue, mask, waits, node_ver, sc_ver, sc_val = st
    n_arr = order.shape[0]
    while True:
        has_arr = iv[IV_NEXT_ARR] < n_arr
        has_dep = iv[IV_HEAP_N] > 0
        if not has_arr and not has_dep:
            iv[IV_DONE] = 1
            return 0
        t_a = t_arr[order[iv[IV_NEXT_ARR]]] if has_arr else 1e300
        t_d = ht[0] if has_dep else 1e300
        t = t_d if t_d <= t_a else t_a
        _accumulate(t - fv[FV_NOW], cl, typ, st)
        fv[FV_NOW] = t
        if t_d <= t_a:
            _depart(cl, pods, typ, st, gpu_sel)
            continue
        p = order[iv[IV_NEXT_ARR]]
        iv[IV_NEXT_ARR] += 1
        if unfit[p]:
            iv[IV_UNFIT] += 1
            continue
        n = _select(p, policy, cl, pods, typ, st)
        if n < 0:
            queue[iv[IV_Q_TAIL]] = p
            iv[IV_Q_TAIL] += 1
            iv[IV_QLEN] += 1
            continue
        if policy == EXTERNAL:
            iv[IV_PENDING] = p
            return 1
        _place(n, p, gpu_sel, cl, pods, typ, st)


@nb.njit(cache=True)
def _snapshot(cl, st):
    cpu_cap = cl[0]
    fv, iv = st[1], st[2]
    n = cpu_cap.shape[0]
    mean = fv[FV_SUM_U] / n
    var = fv[FV_SUM_U2] / n - mean * mean
    fv[FV_SNAP_ALLOC] = fv[FV_ALLOC] / fv[FV_CAP]
    fv[FV_SNAP_FRAG] = fv[FV_SUM_F] / fv[FV_CAP]
    fv[FV_SNAP_STD] = math.sqrt(var if var > 0 else 0.0)
    fv[FV_SNAP_HOT] = iv[IV_HOT] / n
    fv[FV_SNAP_IDLE] = (1.0 - fv[FV_ALLOC] / fv[FV_CAP]) if fv[FV_ANY_FAIL] > 0 else 0.0


@nb.njit(cache=True)
def _record(pods, p, cl, st, curve):
    p_ng, p_gm = pods[2], pods[3]
    fv = st[1]
    before = fv[FV_ARRIVED]
    fv[FV_ARRIVED] += p_ng[p] * p_gm[p]
    lo = int(math.floor(before / fv[FV_CAP] * 100.0)) + 1
    hi = int(math.floor(fv[FV_ARRIVED] / fv[FV_CAP] * 100.0 + 1e-9))
    for level in range(max(lo, 0), min(hi, curve.shape[0] - 1) + 1):
        curve[level] = fv[FV_ALLOC] / fv[FV_CAP]
        if level == 100:
            _snapshot(cl, st)


@nb.njit(cache=True)
def run_inflate(cl, pods, typ, st, draws, policy, gpu_sel, curve):
    """Inflation (the FGD paper's experiment): the drawn pods arrive one after another, never
    leave; each is placed or fails (and is dropped). `curve[k]` is the allocated GPU share when
    the GPUs requested by the pods drawn so far first reach k% of the cluster's."""
    unfit = pods[7]
    f_cache, fv, iv, a_node, a_mask, ht, hp, queue, mask, waits, node_ver, sc_ver, sc_val = st
    while iv[IV_DRAWN] < draws.shape[0]:
        p = draws[iv[IV_DRAWN]]
        if iv[IV_PENDING] == p and policy == EXTERNAL:  # resumed after the caller placed it
            iv[IV_PENDING] = -1
            iv[IV_DRAWN] += 1
            _record(pods, p, cl, st, curve)
            continue
        n = -1 if unfit[p] else _select(p, policy, cl, pods, typ, st)
        if unfit[p]:
            iv[IV_UNFIT] += 1
        if n < 0:
            iv[IV_FAILED] += 1
            fv[FV_ANY_FAIL] = 1.0
        elif policy == EXTERNAL:
            iv[IV_PENDING] = p
            return 1
        else:
            _place(n, p, gpu_sel, cl, pods, typ, st)
        iv[IV_DRAWN] += 1
        _record(pods, p, cl, st, curve)
    iv[IV_DONE] = 1
    return 0


@nb.njit(cache=True)
def external_place(n, cl, pods, typ, st, gpu_sel):
    """Place the pending pod on node n (the caller's choice) and let the loop go on."""
    iv = st[2]
    p = iv[IV_PENDING]
    _place(n, p, gpu_sel, cl, pods, typ, st)
    return p


@nb.njit(cache=True)
def fits_empty(cpu_cap, mem_cap, gcap, ngpu, model, access, p_cpu, p_mem, p_ng, p_gm, p_spec):
    """Per pod: whether it fits some node of the empty cluster."""
    out = np.zeros(p_cpu.shape[0], np.bool_)
    for p in range(p_cpu.shape[0]):
        for n in range(cpu_cap.shape[0]):
            if fits(n, p, cpu_cap, mem_cap, gcap, ngpu, model, access, p_cpu, p_mem, p_ng, p_gm, p_spec):
                out[p] = True
                break
    return out


# --- what the PPO agent sees ---------------------------------------------------------------------

NODE_FEATURES = ("fgd", "best_fit", "util", "util_after", "dvar", "cpu_free_after", "mem_free_after",
                 "gpu_free_after", "frag_after", "whole_gpus_after", "empty", "gpus")
N_NODE_FEATURES = len(NODE_FEATURES)


@nb.njit(cache=True)
def node_features(p, mem_cap, cl, pods, typ, st, out):
    """Per node, what putting pod p there would do (the PPO agent's input, `NODE_FEATURES`): FGD's
    score (continuous: sigmoid of the fragment drop / 1000), best-fit's score, the node's
    utilisation before and after, the change it makes to the spread of utilisation (N x the change
    of the variance, to first order: size-free), resources left, the fragment left, whether the node
    is empty. Rows of nodes where p does not fit are zero; `mask` (st[8]) says which fit.
    Returns the number of nodes that fit."""
    cpu_cap, cpu_free, mem_free, gfree, ngpu, model, access, rank = cl
    p_cpu, p_mem, p_ng, p_gm, p_spec, t_arr, dur, unfit, p_shape = pods
    g_gm, g_ng, g_spec, g_ptot, g_start, g_len, g_cpu, g_cum, p_nogpu = typ
    f_cache, fv, iv, a_node, a_mask, ht, hp, queue, mask, waits, node_ver, sc_ver, sc_val = st
    n_nodes = cpu_cap.shape[0]
    mean = fv[FV_SUM_U] / n_nodes
    k = 0
    for n in range(n_nodes):
        for j in range(out.shape[1]):
            out[n, j] = 0.0
        ok = fits(n, p, cpu_free, mem_free, gfree, ngpu, model, access, p_cpu, p_mem, p_ng, p_gm, p_spec)
        mask[n] = ok
        if not ok:
            continue
        k += 1
        u, uc, ug = _util(n, cpu_cap, cpu_free, ngpu, gfree)
        left = 0
        whole = 0
        for i in range(ngpu[n]):
            left += gfree[n, i]
            if gfree[n, i] == MILLI:
                whole += 1
        take = p_ng[p] * p_gm[p]
        cpu_after = cpu_free[n] - p_cpu[p]
        uc2 = 1.0 - cpu_after / cpu_cap[n] if cpu_cap[n] > 0 else 0.0
        gcap = ngpu[n] * MILLI
        if ngpu[n] > 0:
            u2 = 0.5 * (uc2 + 1.0 - (left - take) / gcap)
        else:
            u2 = uc2
        f_after = _frag_after(n, p, cpu_free, gfree, ngpu, model, access, g_gm, g_ng, g_spec, g_ptot, g_start, g_len,
                              g_cpu, g_cum, p_nogpu, p_cpu, p_ng, p_gm)
        x = (f_cache[n] - f_after) / 1000.0
        out[n, 0] = 1.0 / (1.0 + math.exp(-x))
        out[n, 1] = 1.0 - (0.5 * cpu_after / MAX_SPEC_CPU + 0.5 * (left - take) / MAX_SPEC_GPU)
        out[n, 2] = u
        out[n, 3] = u2
        out[n, 4] = (u2 * u2 - u * u) - 2.0 * mean * (u2 - u)
        out[n, 5] = cpu_after / cpu_cap[n] if cpu_cap[n] > 0 else 0.0
        out[n, 6] = (mem_free[n] - p_mem[p]) / mem_cap[n] if mem_cap[n] > 0 else 0.0
        out[n, 7] = (left - take) / gcap if gcap > 0 else 0.0
        out[n, 8] = f_after / gcap if gcap > 0 else 0.0
        if p_ng[p] > 0 and p_gm[p] >= MILLI:
            whole -= p_ng[p]
        elif p_ng[p] > 0 and whole > 0:
            # a share pod takes a whole GPU only when no partly used GPU fits it (FGD's choice may differ)
            part = False
            for i in range(ngpu[n]):
                if p_gm[p] <= gfree[n, i] < MILLI:
                    part = True
            if not part:
                whole -= 1
        out[n, 9] = whole / 8.0
        out[n, 10] = 1.0 if (cpu_free[n] == cpu_cap[n] and left == gcap) else 0.0
        out[n, 11] = ngpu[n] / 8.0
    return k
