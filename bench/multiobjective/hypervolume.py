"""Exact hypervolume for 2 and 3 minimised objectives, the one implementation both sides of
bench/multiobjective are scored with.

hypervolume(points, ref): the Lebesgue measure of the region dominated by `points` and bounded
above by `ref`; points not strictly better than ref in every objective add nothing.
2-D: a sweep over the points sorted by the first objective. 3-D: slices between consecutive
distinct third-objective values, each slice a 2-D sweep (O(n^2 log n), fine for a few hundred
points).
"""


def _clip(points, ref):
    return [tuple(p) for p in points if all(v < r for v, r in zip(p, ref))]


def _hv2(points, ref):
    pts = sorted(points)   # by f1, then f2
    area, best_f2 = 0.0, ref[1]
    for f1, f2 in pts:
        if f2 < best_f2:
            area += (ref[0] - f1) * (best_f2 - f2)
            best_f2 = f2
    return area


def _hv3(points, ref):
    pts = sorted(points, key=lambda p: p[2])
    volume = 0.0
    for i, p in enumerate(pts):
        top = pts[i + 1][2] if i + 1 < len(pts) else ref[2]
        if top <= p[2]:
            continue
        volume += _hv2([(q[0], q[1]) for q in pts[:i + 1]], ref[:2]) * (top - p[2])
    return volume


def hypervolume(points, ref):
    pts = _clip(points, ref)
    if not pts:
        return 0.0
    if len(ref) == 2:
        return _hv2(pts, ref)
    if len(ref) == 3:
        return _hv3(pts, ref)
    raise ValueError("hypervolume: 2 or 3 objectives only")


def _self_test():
    import random
    rng = random.Random(1)
    # Against Monte Carlo on random sets, and two closed forms.
    assert abs(hypervolume([(0, 0)], (1, 2)) - 2) < 1e-12
    assert abs(hypervolume([(0, 0, 0)], (1, 2, 3)) - 6) < 1e-12
    assert abs(hypervolume([(0.5, 0.5, 0), (0, 0, 0.5)], (1, 1, 1)) - 0.625) < 1e-12
    for dim in (2, 3):
        pts = [tuple(rng.random() for _ in range(dim)) for _ in range(15)]
        ref = (1.0,) * dim
        exact = hypervolume(pts, ref)
        n, hit = 50000, 0
        for _ in range(n):
            z = [rng.random() for _ in range(dim)]
            hit += any(all(p[k] <= z[k] for k in range(dim)) for p in pts)
        mc = hit / n
        assert abs(exact - mc) < 0.01, (dim, exact, mc)
    print("hypervolume: self-test passed")


if __name__ == "__main__":
    _self_test()
