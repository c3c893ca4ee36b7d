"""Point clouds: ``shapes3d``, the offline stand-in for ModelNet40, sampled on parametric surfaces.

Clouds are lists of ``torch_geometric.data.Data(pos=(n, 3), y=(1,))``, which
``torch_geometric.data.Batch.from_data_list`` and ``torch_geometric.utils.to_dense_batch`` turn into
padded batches with a mask. The ModelNet40 readers are in :mod:`neuralode_tf.data.modelnet`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

import torch
from torch import Tensor

from ._util import point_cloud_class
from .splits import Splits

__all__ = ["shapes3d", "sample_primitive", "sample_triangles", "SHAPES"]

_DTYPE = torch.float64  # geometry is computed in double precision and returned as float32


def _rand(generator: torch.Generator | None, *shape: int) -> Tensor:
    return torch.rand(*shape, generator=generator, dtype=_DTYPE)


def _uniform(generator: torch.Generator | None, low: float, high: float) -> float:
    return low + (high - low) * float(_rand(generator, 1))


def _unit_vectors(generator: torch.Generator | None, n: int) -> Tensor:
    v = torch.randn(n, 3, generator=generator, dtype=_DTYPE)
    return v / v.norm(dim=1, keepdim=True)


def sample_triangles(
    vertices: Tensor, faces: Tensor, num_points: int, *, generator: torch.Generator | None = None
) -> Tensor:
    """Points drawn uniformly by area from a triangle mesh.

    A triangle is chosen with probability proportional to its area, then a point in it with uniform
    barycentric coordinates (``u, v ~ U[0, 1]``, reflected when ``u + v > 1``).

    Args:
        vertices: ``(V, 3)`` floating positions.
        faces: ``(F, 3)`` vertex indices of the triangles.
        num_points: Number of points.
        generator: Random generator (default: torch's global one).

    Returns:
        ``(num_points, 3)`` points in the dtype of ``vertices``.
    """
    a, b, c = (vertices[faces[:, i]] for i in range(3))
    areas = torch.linalg.cross(b - a, c - a).norm(dim=1) / 2
    if not bool(areas.sum() > 0):
        raise ValueError(f"the mesh has no area to sample from ({len(faces)} faces)")
    chosen = torch.multinomial(areas.double(), num_points, replacement=True, generator=generator)
    uv = torch.rand(num_points, 2, generator=generator, dtype=vertices.dtype)
    uv = torch.where(uv.sum(dim=1, keepdim=True) > 1, 1 - uv, uv)
    a, b, c = a[chosen], b[chosen], c[chosen]
    return a + uv[:, :1] * (b - a) + uv[:, 1:] * (c - a)


def fan_triangles(polygons: Iterable[Sequence[int]]) -> Tensor:
    """``(F, 3)`` triangles splitting each polygon (a list of vertex indices) into a fan around its first vertex."""
    triangles = [(p[0], p[i], p[i + 1]) for p in polygons for i in range(1, len(p) - 1)]
    return torch.tensor(triangles, dtype=torch.long).reshape(-1, 3)


# --------------------------------------------------------------------------------------------
# Primitives. Each samples n points area-uniformly on a surface centred at the origin, about
# unit size, with proportions drawn from the generator. Curved surfaces are sampled in closed
# form or by rejection against their area element; flat ones through sample_triangles.
# --------------------------------------------------------------------------------------------

Patch = tuple[float, Callable[[int], Tensor]]  # (area, sampler of n points)


def _patches(generator: torch.Generator | None, n: int, patches: list[Patch]) -> Tensor:
    """n points on a surface made of patches, each getting a multinomial share proportional to its area."""
    areas = torch.tensor([area for area, _ in patches], dtype=_DTYPE)
    counts = torch.bincount(torch.multinomial(areas, n, replacement=True, generator=generator), minlength=len(areas))
    return torch.cat([sample(int(k)) for (_, sample), k in zip(patches, counts)])


def _rejection(generator: torch.Generator | None, n: int, propose: Callable[[int], tuple[Tensor, Tensor]]) -> Tensor:
    """n of the proposed points, each kept with its acceptance probability."""
    kept: list[Tensor] = []
    while sum(len(p) for p in kept) < n:
        points, accept = propose(2 * n)
        kept.append(points[_rand(generator, len(points)) < accept])
    return torch.cat(kept)[:n]


def _disk(generator: torch.Generator | None, radius: float, z: float) -> Patch:
    def sample(n: int) -> Tensor:
        rho, theta = radius * _rand(generator, n).sqrt(), 2 * math.pi * _rand(generator, n)
        return torch.stack([rho * theta.cos(), rho * theta.sin(), torch.full_like(rho, z)], dim=1)

    return math.pi * radius**2, sample


def _tube(generator: torch.Generator | None, radius: float, height: float) -> Patch:
    def sample(n: int) -> Tensor:
        theta, z = 2 * math.pi * _rand(generator, n), height * (_rand(generator, n) - 0.5)
        return torch.stack([radius * theta.cos(), radius * theta.sin(), z], dim=1)

    return 2 * math.pi * radius * height, sample


def _ellipsoid(generator: torch.Generator | None, n: int) -> Tensor:
    axes = torch.tensor([1.0, _uniform(generator, 0.5, 0.8), _uniform(generator, 0.25, 0.45)], dtype=_DTYPE)

    def propose(m: int) -> tuple[Tensor, Tensor]:
        # x = A u maps the unit sphere onto the ellipsoid; its area element is det(A) |A^-1 u|.
        u = _unit_vectors(generator, m)
        return u * axes, (u / axes).norm(dim=1) * axes.min()

    return _rejection(generator, n, propose)


def _box(generator: torch.Generator | None, n: int) -> Tensor:
    half = torch.tensor([_uniform(generator, 0.3, 0.55) for _ in range(3)], dtype=_DTYPE)
    corners = torch.tensor([[i, j, k] for i in (-1, 1) for j in (-1, 1) for k in (-1, 1)], dtype=_DTYPE) * half
    faces = fan_triangles([[0, 1, 3, 2], [4, 6, 7, 5], [0, 4, 5, 1], [2, 3, 7, 6], [0, 2, 6, 4], [1, 5, 7, 3]])
    return sample_triangles(corners, faces, n, generator=generator)


def _pyramid(generator: torch.Generator | None, n: int) -> Tensor:
    half, height = _uniform(generator, 0.35, 0.55), _uniform(generator, 0.6, 1.2)
    vertices = torch.tensor(
        [
            [-half, -half, -height / 2],
            [half, -half, -height / 2],
            [half, half, -height / 2],
            [-half, half, -height / 2],
            [0.0, 0.0, height / 2],
        ],
        dtype=_DTYPE,
    )
    faces = fan_triangles([[0, 3, 2, 1], [0, 1, 4], [1, 2, 4], [2, 3, 4], [3, 0, 4]])
    return sample_triangles(vertices, faces, n, generator=generator)


def _cylinder(generator: torch.Generator | None, n: int) -> Tensor:
    r, h = _uniform(generator, 0.3, 0.5), _uniform(generator, 0.8, 1.4)
    return _patches(generator, n, [_tube(generator, r, h), _disk(generator, r, -h / 2), _disk(generator, r, h / 2)])


def _cone(generator: torch.Generator | None, n: int) -> Tensor:
    r, h = _uniform(generator, 0.35, 0.6), _uniform(generator, 0.8, 1.4)

    def lateral(m: int) -> Tensor:
        # The distance from the apex, as a fraction of the slant, has density 2s on [0, 1].
        s, theta = _rand(generator, m).sqrt(), 2 * math.pi * _rand(generator, m)
        return torch.stack([r * s * theta.cos(), r * s * theta.sin(), h / 2 - h * s], dim=1)

    return _patches(generator, n, [(math.pi * r * math.hypot(r, h), lateral), _disk(generator, r, -h / 2)])


def _torus(generator: torch.Generator | None, n: int) -> Tensor:
    big, small = 0.65, _uniform(generator, 0.15, 0.35)

    def propose(m: int) -> tuple[Tensor, Tensor]:
        # The area element is small * (big + small cos(phi)) dtheta dphi.
        theta, phi = 2 * math.pi * _rand(generator, m), 2 * math.pi * _rand(generator, m)
        rho = big + small * phi.cos()
        points = torch.stack([rho * theta.cos(), rho * theta.sin(), small * phi.sin()], dim=1)
        return points, rho / (big + small)

    return _rejection(generator, n, propose)


def _capsule(generator: torch.Generator | None, n: int) -> Tensor:
    r, h = _uniform(generator, 0.25, 0.4), _uniform(generator, 0.5, 1.0)

    def caps(m: int) -> Tensor:
        # A sphere split at its equator, its halves pushed to the two ends of the tube.
        u = r * _unit_vectors(generator, m)
        u[:, 2] += h / 2 * u[:, 2].sign()
        return u

    return _patches(generator, n, [_tube(generator, r, h), (4 * math.pi * r**2, caps)])


_PRIMITIVES: dict[str, Callable[[torch.Generator | None, int], Tensor]] = {
    "sphere": _unit_vectors,
    "ellipsoid": _ellipsoid,
    "box": _box,
    "cylinder": _cylinder,
    "cone": _cone,
    "torus": _torus,
    "capsule": _capsule,
    "pyramid": _pyramid,
}

SHAPES = tuple(_PRIMITIVES)
"""Class names of :func:`shapes3d`, in label order."""


def sample_primitive(shape: str, num_points: int, *, generator: torch.Generator | None = None) -> Tensor:
    """``(num_points, 3)`` float64 points area-uniform on a canonical primitive (centred, axis-aligned).

    The proportions (box sides, radii, heights) are drawn from ``generator`` (default: torch's global
    one). Every primitive fits in the unit ball; the sphere has radius 1, the ellipsoid a longest
    semi-axis of 1 along ``x``, and the torus a centre-line radius of 0.65. Axis-symmetric shapes have
    their axis along ``z``.
    """
    if shape not in _PRIMITIVES:
        raise ValueError(f"unknown shape {shape!r}; choose from {SHAPES}")
    return _PRIMITIVES[shape](generator, num_points)


def _rotation(generator: torch.Generator | None) -> Tensor:
    """A rotation matrix uniform on SO(3): the Q of the QR decomposition of a Gaussian matrix, signs fixed."""
    q, r = torch.linalg.qr(torch.randn(3, 3, generator=generator, dtype=_DTYPE))
    q = q * torch.diagonal(r).sign()
    return q if torch.linalg.det(q) > 0 else -q


def shapes3d(
    *,
    num_train: int = 800,
    num_test: int = 200,
    num_points: int | tuple[int, int] = (64, 128),
    scale: tuple[float, float] = (0.75, 1.25),
    noise: float = 0.01,
    rotate: bool = True,
    seed: int = 0,
) -> Splits:
    """Point clouds on the surfaces of 8 primitives (:data:`SHAPES`), a small ModelNet-like classification task.

    Each cloud draws its class (balanced), its number of points, the primitive's proportions (see
    :func:`sample_primitive`), a uniform random rotation, a scale factor and Gaussian noise.

    Args:
        num_train, num_test: Number of clouds per split.
        num_points: Points per cloud, fixed or drawn uniformly from an inclusive ``(low, high)`` range.
        scale: Range of the uniform scale factor.
        noise: Standard deviation of the Gaussian jitter, relative to the scale.
        rotate: Apply a random rotation (else the axes of symmetry stay along ``z``).
        seed: Seed of the generator.

    Returns:
        ``"points"`` splits: lists of ``torch_geometric.data.Data(pos=(n, 3) float32, y=(1,) long)``.
    """
    data_class = point_cloud_class()
    low, high = (num_points, num_points) if isinstance(num_points, int) else num_points
    if not 1 <= low <= high:
        raise ValueError(f"num_points must be a positive count or a range (low, high), got {num_points}")
    generator = torch.Generator().manual_seed(seed)
    clouds = []
    for split_size in (num_train, num_test):
        labels = torch.arange(split_size) % len(SHAPES)
        for label in labels[torch.randperm(split_size, generator=generator)].tolist():
            n = int(torch.randint(low, high + 1, (1,), generator=generator))
            pos = _PRIMITIVES[SHAPES[label]](generator, n)
            if rotate:
                pos = pos @ _rotation(generator).T
            factor = _uniform(generator, *scale)
            pos = factor * (pos + noise * torch.randn(pos.shape, generator=generator, dtype=_DTYPE))
            pos = pos[torch.randperm(n, generator=generator)]
            clouds.append(data_class(pos=pos.float(), y=torch.tensor([label])))
    return Splits(
        name="shapes3d",
        kind="points",
        train=clouds[:num_train],
        test=clouds[num_train:],
        description=(
            f"point clouds on {len(SHAPES)} parametric primitives (seed {seed}), {low}-{high} points each, "
            f"{num_train} train / {num_test} test"
        ),
        classes=SHAPES,
    )
