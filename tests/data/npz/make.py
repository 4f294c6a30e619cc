#!/usr/bin/python3
# make.py - writes the .npz fixtures of tests/unit/test_npz.c into the
# folder it lives in.  Run once on a Debian machine with python3-numpy
# (/usr/bin/python3 tests/data/npz/make.py) and commit the output; the unit
# tests are C and do not need Python.
#
# Good archives, as the three writers of Marian models make them:
#   savez.npz             numpy.savez (members stored)
#   savez_compressed.npz  numpy.savez_compressed (members deflated)
#   deflated.npz          the same members deflated by Python's zipfile alone
#                         (without the zip64 fields numpy forces)
#   cnpy.npz              as cnpy's npz_save (Marian's writer) makes them: stored
#                         members with cnpy's headers (padded to 16 bytes, not 64),
#                         the configuration as '<i1' with a NUL at its end
#   fortran.npz           column-major arrays (fortran_order True), 2-d and 3-d
#   text.npz              text as '|u1', '|S1', a 0-d '|S<n>', and bad text
# Bad ones, each with one fault:
#   not_npy.npz           a member README.txt beside Wemb.npy
#   bad_header.npz        a member whose .npy header dict does not parse
#   dtypes.npz            float64, big-endian float32, float16, int64, a 5-d
#                         array, and one good float32 tensor
#   duplicate.npz         the member Wemb.npy twice
#   bzip2.npz             a member compressed with bzip2
#   bad_size.npz          members whose data are shorter / longer than
#                         their header's shape
# The values of every tensor are PATTERN(i) = i * 0.25 - 1 (i counting the
# elements in C order); test_npz.c computes the same.
import io
import os
import warnings
import zipfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

YML = (b"type: transformer\n"
       b"dim-emb: 4\n"
       b"enc-depth: 1\n"
       b"dec-depth: 1\n"
       b"tied-embeddings-all: true\n"
       b"transformer-heads: 2\n"
       b"version: v1.12.0 65bf82ff 2023-02-21 09:56:29 -0800\n")


def pattern(shape, dtype=np.float32):
    n = int(np.prod(shape)) if len(shape) else 1
    return (np.arange(n, dtype=np.float64) * 0.25 - 1).astype(dtype).reshape(shape)


def model_arrays():
    text = np.frombuffer(YML + b"\0", dtype=np.int8)
    return {
        "Wemb": pattern((6, 4)),
        "encoder_l1_self_Wq": pattern((4, 4)),
        "decoder_ff_logit_out_b": pattern((1, 6)),
        "ids": np.array([3, -1, 7], dtype="<i4"),
        "scalar": pattern(()),
        "empty": pattern((0, 4)),
        "special:model.yml": text,
    }


def path(name):
    return os.path.join(HERE, name)


def npy_bytes(array):
    b = io.BytesIO()
    np.save(b, array, allow_pickle=False)
    return b.getvalue()


def cnpy_header(descr, shape):
    """The .npy header cnpy's create_npy_header writes."""
    dims = ", ".join(str(d) for d in shape)
    if len(shape) == 1:
        dims += ","
    d = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    d += " " * (16 - (10 + len(d)) % 16)
    d = d[:-1] + "\n"
    return b"\x93NUMPY\x01\x00" + len(d).to_bytes(2, "little") + d.encode()


def write_zip(name, members, compression=zipfile.ZIP_STORED):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the duplicate name is on purpose
        with zipfile.ZipFile(path(name), "w", compression) as z:
            for member, data in members:
                info = zipfile.ZipInfo(member, date_time=(2024, 1, 1, 0, 0, 0))
                info.compress_type = compression
                z.writestr(info, data)


def main():
    arrays = model_arrays()
    # numpy's own writers (members with zip64 extra fields, as numpy forces
    # them), with the clock stopped so that the dates in the zip, and so the
    # files, are the same at every run.
    real_time = zipfile.time.time
    zipfile.time.time = lambda: 1704067200.0
    try:
        np.savez(path("savez.npz"), **arrays)
        np.savez_compressed(path("savez_compressed.npz"), **arrays)
    finally:
        zipfile.time.time = real_time
    write_zip("deflated.npz", [(k + ".npy", npy_bytes(v)) for k, v in arrays.items()],
              zipfile.ZIP_DEFLATED)
    cnpy = []
    for k, v in arrays.items():
        descr = "<i1" if v.dtype == np.int8 else v.dtype.str
        cnpy.append((k + ".npy", cnpy_header(descr, v.shape) + v.tobytes()))
    write_zip("cnpy.npz", cnpy)

    write_zip("fortran.npz", [
        ("f2.npy", npy_bytes(np.asfortranarray(pattern((3, 4))))),
        ("f3.npy", npy_bytes(np.asfortranarray(pattern((2, 3, 4))))),
        ("f4.npy", npy_bytes(np.asfortranarray(pattern((2, 1, 3, 2))))),
    ])

    write_zip("text.npz", [
        ("u1.npy", npy_bytes(np.frombuffer(b"hello", dtype=np.uint8))),
        ("S1.npy", npy_bytes(np.frombuffer(b"hello", dtype="|S1"))),
        ("S0d.npy", npy_bytes(np.array(b"hello\0\0\0", dtype="|S8"))),
        ("nul_inside.npy", npy_bytes(np.frombuffer(b"he\0llo\0", dtype=np.int8))),
        ("two_d.npy", npy_bytes(np.frombuffer(b"hello!", dtype=np.int8).reshape(2, 3))),
        ("f4.npy", npy_bytes(pattern((3,)))),
    ])

    write_zip("not_npy.npz", [("Wemb.npy", npy_bytes(pattern((2, 2)))),
                              ("README.txt", b"not an array\n")])
    good = npy_bytes(pattern((2, 2)))
    bad = good.replace(b"'shape': (2, 2)", b"'shape': [2, 2]")
    write_zip("bad_header.npz", [("x.npy", bad)])
    write_zip("dtypes.npz", [
        ("f8.npy", npy_bytes(pattern((2, 2), np.float64))),
        ("big.npy", npy_bytes(pattern((2, 2)).astype(">f4"))),
        ("f2.npy", npy_bytes(pattern((2, 2), np.float16))),
        ("i8.npy", npy_bytes(np.arange(4, dtype="<i8"))),
        ("five_d.npy", npy_bytes(pattern((1, 1, 1, 1, 2)))),
        ("good.npy", npy_bytes(pattern((2, 2)))),
    ])
    write_zip("duplicate.npz", [("Wemb.npy", npy_bytes(pattern((2, 2)))),
                                ("Wemb.npy", npy_bytes(pattern((3, 2))))])
    write_zip("bzip2.npz", [("Wemb.npy", npy_bytes(pattern((2, 2))))], zipfile.ZIP_BZIP2)
    write_zip("bad_size.npz", [("short.npy", npy_bytes(pattern((3, 4)))[:-8]),
                               ("long.npy", npy_bytes(pattern((3, 4))) + b"\0\0\0\0")])


if __name__ == "__main__":
    main()
