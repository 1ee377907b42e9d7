/* The simulated runtime's pitched, 3D and peer copies and its device properties, through
 * progs/rt_check (scenarios copy2d, copy3d, peer, props). Exact values: return codes are
 * cudaError_t numbers (driver_types.h: cudaErrorInvalidValue 1, cudaErrorInvalidPitchValue 12,
 * cudaErrorInvalidMemcpyDirection 21, cudaErrorInvalidDevice 101, cudaErrorNotSupported 801). */
#include <stdlib.h>

#include "test_sim.h"

/* cuda_runtime_api.h, cudaMemcpy2D: "\p width must not exceed either \p dpitch or \p spitch";
 * the refusals make no driver call (2 cuMemcpy2DUnaligned_v2 calls: the two round-trip copies). */
Test(runtime_copies, memcpy_2d_round_trips_with_pitches_1024_and_2048)
{
    char *out = run_rt_check("copy2d");
    expect_line(out, "malloc=0");
    expect_line(out, "h2d=0");
    expect_line(out, "d2h=0");
    expect_line(out, "same=1 padding=1");
    expect_line(out, "async_ptsz=0");
    expect_line(out, "sync=0 same_async=1");
    expect_line(out, "wide_src=12");
    expect_line(out, "wide_dst=12");
    expect_line(out, "kind=21");
    expect_line(out, "last=21");
    expect_line(out, "cuMemcpy2DUnaligned_v2=2 cuMemcpy2DAsync_v2_ptsz=1 cuMemcpy2DAsync_v2=0");
}

/* cudaMemcpy3D: "must specify one of \p srcArray or \p srcPtr"; the simulated driver's arrays hold
 * no data, so an array side is cudaErrorNotSupported. */
Test(runtime_copies, memcpy_3d_round_trips_and_refuses_arrays)
{
    char *out = run_rt_check("copy3d");
    expect_line(out, "malloc=0");
    expect_line(out, "h2d=0");
    expect_line(out, "d2h_ptds=0");
    expect_line(out, "same=1");
    expect_line(out, "array_and_ptr=1");
    expect_line(out, "array=801");
    expect_line(out, "neither=1");
    expect_line(out, "cuMemcpy3D_v2=1 cuMemcpy3D_v2_ptds=1");
}

Test(runtime_copies, memcpy_peer_round_trips_between_two_devices)
{
    putenv("SIMCUDA_DEVICE_COUNT=2");
    char *out = run_rt_check("peer");
    expect_line(out, "set1=0 malloc_b=0");
    expect_line(out, "set0=0 malloc_a=0 malloc_c=0");
    expect_line(out, "h2d=0");
    expect_line(out, "peer=0");
    expect_line(out, "peer_async=0");
    expect_line(out, "sync=0");
    expect_line(out, "d2h=0");
    expect_line(out, "same=1");
    expect_line(out, "bad_dst=101 bad_src=101");
    expect_line(out, "cuMemcpyPeer=1 cuMemcpyPeerAsync=1");
}

/* Name, capacity, UUID (byte i of device d: 0x10*d + i) and PCI bus (the device's index) are the
 * simulated devices'; attributes the driver answers 0 read 0; a device past the count is
 * cudaErrorInvalidDevice and leaves the properties zeroed. */
Test(runtime_copies, device_properties_are_the_simulated_devices)
{
    putenv("SIMCUDA_DEVICE_COUNT=2");
    putenv("SIMCUDA_DEVICE_MEMORY=0:4GiB,1:8GiB");
    putenv("SIMCUDA_DEVICE_NAME=sim props");
    char *out = run_rt_check("props");
    expect_line(out, "dev0=0 name=sim props total=4294967296 cc=9.0");
    expect_line(out, "dev0 uuid0=0 uuid15=15 pci=0:0:0 sm=0");
    expect_line(out, "dev0 uva=1 map=1 managed=1 concurrent_managed=0 pools=1 warp=0 mem_pitch=0");
    expect_line(out, "dev0 attr=0 major=9");
    expect_line(out, "dev1=0 name=sim props total=8589934592 cc=9.0");
    expect_line(out, "dev1 uuid0=16 uuid15=31 pci=0:1:0 sm=0");
    expect_line(out, "dev2=101 name= total=0 cc=0.0");
    expect_line(out, "dev2 uva=0 map=0 managed=0 concurrent_managed=0 pools=0 warp=0 mem_pitch=0");
    expect_line(out, "dev2 attr=101 major=-1");
    expect_line(out, "null=1");
    expect_line(out, "last=1");
}
