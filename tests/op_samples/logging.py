"""Samples for the differentiable ops of logging_ops and image_ops."""

import numpy as np

from op_samples import rand, sample
from rill.graph.ops import image_ops, logging_ops

sample("CheckNumerics", [rand(2, 3)], lambda x: logging_ops.check_numerics(x, "x"))
sample("Print", [rand(2, 3)], lambda x: logging_ops.print_op(x, [x], message="sample: ", first_n=0))
sample("SpaceToDepth", [rand(1, 4, 6, 2)], lambda x: image_ops.space_to_depth(x, 2))
sample("DepthToSpace", [rand(2, 2, 3, 8)], lambda x: image_ops.depth_to_space(x, 2))
sample("SpaceToDepth", [rand(1, 3, 4, 4)], lambda x: image_ops.space_to_depth(x, 2, "NCHW"),
       name="nchw")  # fmt: skip


def _raw_v2(x):
    import rill.graph as rg

    g = rg.get_default_graph()
    return g.create_op("CheckNumericsV2", [x], {"message": "x"}).outputs[0]


sample("CheckNumericsV2", [rand(3)], _raw_v2)


def _bn_v1(op_type, training):
    def build(x, scale, offset, mean, var):
        import rill.graph as rg

        op = rg.get_default_graph().create_op(
            op_type, [x, scale, offset, mean, var], {"epsilon": 0.01, "is_training": training}
        )
        return op.outputs[0]

    return build


for _op in ("FusedBatchNorm", "FusedBatchNormV2"):
    for _training in (True, False):
        sample(
            _op,
            [rand(2, 2, 3, 2, dtype=np.float32) * 2, rand(2, lo=0.5, hi=1.5, dtype=np.float32),
             rand(2, dtype=np.float32), rand(2, dtype=np.float32),
             rand(2, lo=0.5, hi=1.5, dtype=np.float32)],
            _bn_v1(_op, _training),
            name="training" if _training else "inference",
            grad_inputs=[0, 1, 2],
            delta=1e-2,
            tol=5e-4,
        )  # fmt: skip

# -- image_ops: space/batch blocks and resizing ----------------------------------------------------


def _ct(v):
    import rill.graph as rg

    return rg.constant(np.array(v, np.int32))


sample("SpaceToBatchND", [rand(2, 3, 4, 2)],
       lambda x: image_ops.space_to_batch_nd(x, _ct([2, 2]), _ct([[1, 0], [0, 2]])))  # fmt: skip
sample("BatchToSpaceND", [rand(8, 2, 3, 1)],
       lambda x: image_ops.batch_to_space_nd(x, _ct([2, 2]), _ct([[0, 1], [1, 0]])))  # fmt: skip
_RESIZE_F32 = {"delta": 1e-2, "tol": 5e-4}
for _name, _kw in (("", {}), ("align_corners", {"align_corners": True}),
                   ("half_pixel", {"half_pixel_centers": True})):  # fmt: skip
    sample("ResizeBilinear", [rand(1, 3, 4, 2)],
           lambda x, kw=_kw: image_ops.resize_bilinear(x, _ct([5, 3]), **kw),
           name=_name, **_RESIZE_F32)  # fmt: skip
    sample("ResizeNearestNeighbor", [rand(2, 3, 4, 1)],
           lambda x, kw=_kw: image_ops.resize_nearest_neighbor(x, _ct([5, 7]), **kw),
           name=_name)  # fmt: skip

# -- pool_extra_ops -------------------------------------------------------------------------------


def _distinct(*shape):
    n = int(np.prod(shape))
    rng = np.random.default_rng(13)
    return ((rng.permutation(n) - n / 2) * 0.1 + rng.uniform(0, 0.01, n)).reshape(shape)


def _mp(op_type, x, **attrs):
    import rill.graph as rg

    return rg.get_default_graph().create_op(op_type, list(x), attrs).outputs


from rill.graph.ops import pool_extra_ops  # noqa: E402

sample("MaxPoolV2", [_distinct(1, 4, 5, 2)],
       lambda x: pool_extra_ops.max_pool_v2(x, _ct([1, 2, 2, 1]), _ct([1, 2, 2, 1]), "SAME"))  # fmt: skip
sample("MaxPoolWithArgmax", [_distinct(2, 4, 4, 2)],
       lambda x: pool_extra_ops.max_pool_with_argmax(x, [1, 2, 2, 1], [1, 1, 1, 1], "VALID")[0])  # fmt: skip


def _max_pool_grad_of(x, g):
    import rill.graph as rg

    y = rg.max_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    return _mp("MaxPoolGrad", [x, y, g], ksize=(1, 2, 2, 1), strides=(1, 2, 2, 1),
               padding="VALID")[0]  # fmt: skip


sample("MaxPoolGrad", [_distinct(1, 4, 4, 2), rand(1, 2, 2, 2)], _max_pool_grad_of,
       grad_inputs=[1])  # fmt: skip


def _max_pool_grad_grad_of(x, g):
    import rill.graph as rg

    y = rg.max_pool(x, [1, 2, 2, 1], [1, 1, 1, 1], "SAME")
    return _mp("MaxPoolGradGrad", [x, y, g], ksize=(1, 2, 2, 1), strides=(1, 1, 1, 1),
               padding="SAME")[0]  # fmt: skip


sample("MaxPoolGradGrad", [_distinct(1, 3, 4, 1), rand(1, 3, 4, 1)], _max_pool_grad_grad_of,
       grad_inputs=[1])  # fmt: skip


def _max_pool_grad_v2_of(x, g):
    y = pool_extra_ops.max_pool_v2(x, _ct([1, 2, 2, 1]), _ct([1, 2, 2, 1]), "VALID")
    return _mp("MaxPoolGradV2", [x, y, g, _ct([1, 2, 2, 1]), _ct([1, 2, 2, 1])],
               padding="VALID")[0]  # fmt: skip


sample("MaxPoolGradV2", [_distinct(1, 4, 4, 2), rand(1, 2, 2, 2)], _max_pool_grad_v2_of,
       grad_inputs=[1])  # fmt: skip

# -- patches and crops ----------------------------------------------------------------------------

sample("ExtractImagePatches", [rand(1, 5, 6, 2)],
       lambda x: image_ops.extract_image_patches(x, [1, 2, 3, 1], [1, 2, 1, 1], [1, 1, 1, 1],
                                                 "VALID"))  # fmt: skip
sample("ExtractImagePatches", [rand(2, 4, 4, 1)],
       lambda x: image_ops.extract_image_patches(x, [1, 2, 2, 1], [1, 1, 2, 1], [1, 2, 1, 1],
                                                 "SAME"), name="same_dilated")  # fmt: skip
# sample points stay off pixel centers, where bilinear interpolation has a kink in position
_BOXES = np.array([[0.1, 0.23, 0.7, 0.91], [0.05, 0.03, 0.55, 0.47]])
sample("CropAndResize",
       [rand(2, 5, 6, 2, dtype=np.float32), _BOXES.astype(np.float32)],
       lambda im, b: image_ops.crop_and_resize(im, b, _ct([1, 0]), _ct([3, 4])),
       delta=1e-3, tol=2e-3)  # fmt: skip

# -- volume_ops -----------------------------------------------------------------------------------

from rill.graph.ops import volume_ops  # noqa: E402

sample("Conv3D", [rand(1, 4, 5, 3, 2), rand(2, 2, 2, 2, 3)],
       lambda x, f: volume_ops.conv3d(x, f, [1, 1, 2, 1, 1], "SAME"))  # fmt: skip
sample("Conv3D", [rand(1, 5, 4, 4, 1), rand(2, 1, 2, 1, 2)],
       lambda x, f: volume_ops.conv3d(x, f, [1, 1, 1, 1, 1], "VALID",
                                      dilations=[1, 2, 1, 2, 1]), name="dilated")  # fmt: skip
sample("Conv3D", [rand(2, 2, 5, 4, 3), rand(3, 2, 1, 2, 3)],
       lambda x, f: volume_ops.conv3d(x, f, [1, 1, 2, 1, 2], "SAME", data_format="NCDHW"),
       name="ncdhw")  # fmt: skip
sample("MaxPool3D", [(_distinct(1, 2, 4, 4, 3) * 0.2).astype(np.float32)],
       lambda x: volume_ops.max_pool3d(x, [1, 1, 2, 2, 2], [1, 1, 2, 1, 2], "VALID",
                                       data_format="NCDHW"),
       delta=1e-2, tol=5e-4, name="ncdhw")  # fmt: skip
sample("MaxPool3D", [(_distinct(1, 4, 4, 3, 2) * 0.2).astype(np.float32)],
       lambda x: volume_ops.max_pool3d(x, [1, 2, 2, 2, 1], [1, 2, 1, 1, 1], "SAME"),
       delta=1e-2, tol=5e-4)  # fmt: skip
sample("AvgPool3D", [rand(1, 3, 4, 5, 2)],
       lambda x: volume_ops.avg_pool3d(x, [1, 2, 3, 2, 1], [1, 1, 2, 2, 1], "SAME"))  # fmt: skip

for _name, _kw in (("", {}), ("half_pixel", {"half_pixel_centers": True}),
                   ("align_corners", {"align_corners": True})):  # fmt: skip
    sample("ResizeBicubic", [rand(1, 4, 5, 1)],
           lambda x, kw=_kw: image_ops.resize_bicubic(x, _ct([6, 3]), **kw),
           name=_name, **_RESIZE_F32)  # fmt: skip
