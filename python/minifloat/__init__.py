"""minifloat: exact emulation of low-precision floating-point formats for PyTorch and NumPy.

A thin binding of the header-only C++ library (include/minifloat/): every rounding, code,
packing, codec and optimizer rule is the C++ one. docs/python.md documents every function.
"""

from ._core import version as __version__
from ._formats import NAMED, Format, format, parse_format
from ._ops import (GECKO_VARIANTS, OVERFLOW, ROUNDING, RoundingStats, decode, encode, gecko_compress,
                   fold_seed, gecko_compress_exponents, gecko_decompress, gecko_decompress_exponents, gecko_size, pack,
                   quantize, quantize_, unpack)
from .autograd import quantize_ste
from .interop import dtype_of, format_of
from . import blocks, compat, distributed, operands, optim
from . import layers, recipes
from .blocks import (NAMED_BLOCKS, BlockFormat, BlockStats, block_format, decode_blocks, encode_blocks, mxfp4,
                     mxfp6_e2m3, mxfp6_e3m2, mxfp8_e4m3, mxfp8_e5m2, mxint8, nvfp4, quantize_blocks)

binary32 = NAMED["binary32"]
binary16 = NAMED["binary16"]
bfloat16 = NAMED["bfloat16"]
e5m2 = NAMED["e5m2"]
e4m3 = NAMED["e4m3"]
fp_6_9_0 = NAMED["fp_6_9_0"]  #: the precision-assignment paper's 16-bit "high"
fp_4_3_4 = NAMED["fp_4_3_4"]  #: its 8-bit forward "low" (HFP8 1-4-3, bias 11)
fp_5_2_0 = NAMED["fp_5_2_0"]  #: its 8-bit backward "low"
e4m3fnuz = NAMED["e4m3fnuz"]  #: no -0, no Inf, NaN = 0x80, bias 8
e5m2fnuz = NAMED["e5m2fnuz"]  #: no -0, no Inf, NaN = 0x80, bias 16
e2m3 = NAMED["e2m3"]  #: OCP MX FP6 element (max 7.5)
e3m2 = NAMED["e3m2"]  #: OCP MX FP6 element (max 28)
e2m1 = NAMED["e2m1"]  #: OCP MX FP4 element (max 6)
int8_mx = NAMED["int8_mx"]  #: OCP MXINT8 element k * 2^-6, |k| <= 127, as a sign-magnitude format

__all__ = [
    "Format", "format", "parse_format", "NAMED", "binary32", "binary16", "bfloat16", "e5m2", "e4m3", "fp_6_9_0",
    "fp_4_3_4", "fp_5_2_0", "e4m3fnuz", "e5m2fnuz", "e2m3", "e3m2", "e2m1", "int8_mx", "ROUNDING", "OVERFLOW", "GECKO_VARIANTS", "RoundingStats", "quantize", "quantize_",
    "encode", "decode", "fold_seed", "pack", "unpack", "gecko_size", "gecko_compress_exponents", "gecko_decompress_exponents",
    "gecko_compress", "gecko_decompress", "quantize_ste", "optim", "compat", "distributed", "operands", "format_of", "dtype_of", "__version__",
    "blocks", "NAMED_BLOCKS", "BlockFormat", "BlockStats", "block_format", "quantize_blocks", "encode_blocks",
    "decode_blocks", "layers", "recipes", "mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4", "mxint8", "nvfp4",
]
