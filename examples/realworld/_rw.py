"""Helpers the realworld programs share over cuda.bindings' driver API (cuda-bindings 13.x calls).

Nothing here makes a call the audit is expected to report: every call a program's marker points at is
made in the program itself, so that its stack ends on the marked line.
"""

from cuda.bindings import driver

# A tiny kernel written in PTX (ISA 8.0, sm_90, the H200's architecture): out[i] = value for i < n.
FILL_PTX = b"""
.version 8.0
.target sm_90
.address_size 64

.visible .entry fill_u32(
    .param .u64 fill_u32_out,
    .param .u32 fill_u32_n,
    .param .u32 fill_u32_value
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<7>;
    .reg .b64 %rd<5>;

    ld.param.u64 %rd1, [fill_u32_out];
    ld.param.u32 %r1, [fill_u32_n];
    ld.param.u32 %r2, [fill_u32_value];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.s32 %r6, %r3, %r4, %r5;
    setp.ge.u32 %p1, %r6, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r6, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r2;
DONE:
    ret;
}
\x00"""


def check(result, what: str):
    """The value of a cuda.bindings result tuple; raise with the status name when the call failed."""
    err = result[0] if isinstance(result, tuple) else result
    if int(err):
        raise RuntimeError(f"{what}: {err.name}")
    if isinstance(result, tuple) and len(result) > 1:
        return result[1] if len(result) == 2 else result[1:]
    return None


def name(result) -> str:
    """The status name of a cuda.bindings result (a tuple or a bare CUresult)."""
    err = result[0] if isinstance(result, tuple) else result
    return err.name


def device(ordinal: int = 0):
    """cuInit, then the CUdevice of ``ordinal``."""
    check(driver.cuInit(0), "cuInit")
    return check(driver.cuDeviceGet(ordinal), "cuDeviceGet")


def fill_args(dptr, n: int, value: int):
    """cuLaunchKernel's kernelParams for fill_u32(out, n, value): (values, ctypes types)."""
    import ctypes

    return ((int(dptr), n, value), (ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32))
